"""The built-in backends that need nothing beyond torch: eager, debug and inductor."""
from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.backends.registry import register_backend


@register_backend(name="eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the captured graph as Python (FX's generated forward): capture with no compiler."""
    return gm.forward


@register_backend(name="debug", tags=("debug",))
def debug(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Print the captured graph, then run it eagerly."""
    print(f"framejit debug backend: graph with {len(example_inputs)} inputs")
    gm.graph.print_tabular()
    return gm.forward


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any], *, mode: str | None = None,
             options: dict | None = None) -> Callable[..., Any]:
    """TorchInductor (torch._inductor.compile_fx); `mode`/`options` as in torch.compile."""
    from torch._inductor.compile_fx import compile_fx
    patches = dict(options or {})
    if mode in ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        patches.setdefault("max_autotune", mode.startswith("max-autotune"))
        patches.setdefault("triton.cudagraphs", mode != "max-autotune-no-cudagraphs"
                           and any(t.is_cuda for t in example_inputs if isinstance(t, torch.Tensor)))
    return compile_fx(gm, example_inputs, config_patches=patches)


inductor.accepts_mode_and_options = True  # type: ignore[attr-defined]
register_backend(inductor, name="inductor")
