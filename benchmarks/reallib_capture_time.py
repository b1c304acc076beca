"""Capture time on the real-library set (tests/reallibs' models), framejit against torch.compile, side by side.

Run from the repository root: python benchmarks/reallib_capture_time.py [--repeat 3]

Each model's first call is timed under each JIT with the eager backend (so the figure is capture: tracing, guards
and code generation, not a code generator), from a fresh model and an empty cache, alternating framejit and
torch.compile; median of --repeat. Both JITs are primed first (a tiny function compiled by each). Printed per
model: seconds for each, the ratio framejit / torch.compile, and the graph counts; and the ratio of the totals.
Needs the `reallibs` extra (diffusers, torch-geometric, x-transformers, einops).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402
from framejit.testing import CompileCounter  # noqa: E402


def _cases() -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]:
    """name: (make a fresh model, call it once)."""
    from tests.reallibs import test_diffusers as diff
    from tests.reallibs import test_pyg as pyg
    from tests.reallibs import test_x_transformers as xt
    from tests.reallibs.nanogpt import GPTConfig, TinyGPT

    latents, embedding = diff.state_latents(), diff.prompt_embedding()
    image = torch.randn(1, 3, 16, 16)
    nodes, edges = pyg.graph(40)
    tokens = xt.tokens()
    gpt_tokens = torch.randint(0, GPTConfig().vocab, (4, 16))

    def gpt() -> Any:
        torch.manual_seed(0)
        return TinyGPT(GPTConfig()).eval()

    return {
        "diffusers UNet": (diff.tiny_unet, lambda m: m(latents, 999, encoder_hidden_states=embedding).sample),
        "diffusers VAE": (diff.tiny_vae, lambda m: m(image).sample),
        "PyG GCN": (lambda: pyg.model("GCN"), lambda m: m(nodes, edges)),
        "PyG GAT": (lambda: pyg.model("GAT"), lambda m: m(nodes, edges)),
        "PyG GraphSAGE": (lambda: pyg.model("GraphSAGE"), lambda m: m(nodes, edges)),
        "x-transformers + einops": (lambda: xt.Tagger().eval(), lambda m: m(tokens)),
        "nanoGPT": (gpt, lambda m: m(gpt_tokens)),
    }


def _first_call(jit: str, make: Callable[[], Any], call: Callable[[Any], Any]) -> tuple[float, int]:
    model = make()
    counter = CompileCounter()
    if jit == "framejit":
        framejit.reset()
        compiled = framejit.compile(model, backend=counter)
    else:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=counter)
    with torch.no_grad():
        start = time.perf_counter()
        call(compiled)
        seconds = time.perf_counter() - start
    return seconds, counter.frame_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for prime in (framejit.compile(lambda x: x.sin() + 1, backend="eager"), torch.compile(lambda x: x.cos() * 2)):
        prime(torch.randn(3))
    print(f"{'model':26} {'framejit s':>10} {'torch.compile s':>16} {'ratio':>6} {'graphs':>8}")
    totals = [0.0, 0.0]
    for name, (make, call) in _cases().items():
        times: dict[str, list[float]] = {"framejit": [], "torch.compile": []}
        graphs = {}
        for _ in range(args.repeat):
            for jit in times:
                seconds, graphs[jit] = _first_call(jit, make, call)
                times[jit].append(seconds)
        ours, theirs = statistics.median(times["framejit"]), statistics.median(times["torch.compile"])
        totals[0] += ours
        totals[1] += theirs
        count = f"{graphs['framejit']} / {graphs['torch.compile']}"
        print(f"{name:26} {ours:10.2f} {theirs:16.2f} {ours / theirs:6.2f} {count:>8}")
    print(f"{'all':26} {totals[0]:10.2f} {totals[1]:16.2f} {totals[0] / totals[1]:6.2f}")


if __name__ == "__main__":
    main()
