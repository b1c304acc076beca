"""The two backends that compile nothing: eager (the graph's Python forward) and debug (print it first)."""

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
