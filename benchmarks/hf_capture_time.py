"""Capture time on the model zoo: framejit's first call against torch.compile's, backend "eager", side by side.

Run from the repository root: python benchmarks/hf_capture_time.py [--models bert,t5] [--repeat R]

The zoo is the one tests/models/hf_zoo.py defines (transformers models from small configs, random weights), in
inference (eval, no_grad). With backend "eager" no compiler runs, so a first call is each JIT's own work: trace the
frame, build its guards and replacement code, run once. Before any timing both JITs compile a tiny function (their
one-time imports and setup are not counted), and each model runs once eagerly (transformers' lazy imports). Then
each JIT compiles a fresh copy of the model R+1 times, each time from an empty cache (framejit.reset(),
torch._dynamo.reset()), the two JITs alternating. "cold" is the first of these, the first time the process meets
the model's code (which JIT goes first alternates from model to model, since the first one also pays torch's lazy
setup of the ops it meets); "again" is the median of the other R, where per-code caches that survive a reset (both
JITs keep some) have been filled. Printed per model, in milliseconds, with each JIT's graph count, and the geomean of
framejit's time over torch.compile's for both columns.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402
from tests.models.hf_zoo import ONE_GRAPH, build  # noqa: E402


class GraphCounter:
    """A backend that counts graphs and runs them as they are."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> torch.fx.GraphModule:
        self.graphs += 1
        return gm


def first_call_s(jit: str, model: torch.nn.Module, inputs: dict) -> tuple[float, int]:
    counter = GraphCounter()
    if jit == "framejit":
        framejit.reset()
        compiled = framejit.optimize(counter)(model)
    else:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=counter)
    with torch.no_grad():
        start = time.perf_counter()
        compiled(**inputs)
        return time.perf_counter() - start, counter.graphs


def prime() -> None:
    def tiny(x):
        return torch.relu(x) + 1

    x = torch.randn(4)
    framejit.optimize("eager")(tiny)(x)
    torch.compile(tiny, backend="eager")(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ONE_GRAPH))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.simplefilter("ignore")
    prime()
    print(
        f"first call, backend eager, inference (ms); torch {torch.__version__}, transformers {transformers.__version__}"
    )
    print(
        f"{'model':18s} {'fj cold':>8s} {'tc cold':>8s} {'ratio':>6s}   {'fj again':>8s} {'tc again':>8s} "
        f"{'ratio':>6s}   graphs fj/tc"
    )
    ratios: dict[str, list[float]] = {"cold": [], "again": []}
    for index, name in enumerate(args.models.split(",")):
        overrides, make_inputs = ONE_GRAPH[name]
        model, inputs = build(name, overrides, train=False), make_inputs()
        with torch.no_grad():
            model(**inputs)
        times: dict[str, list[float]] = {"framejit": [], "torch.compile": []}
        graphs: dict[str, int] = {}
        for i in range(args.repeat + 1):
            order = ["framejit", "torch.compile"] if (i + index) % 2 == 0 else ["torch.compile", "framejit"]
            for jit in order:
                seconds, graphs[jit] = first_call_s(jit, copy.deepcopy(model), inputs)
                times[jit].append(seconds * 1e3)
        fj, tc = times["framejit"], times["torch.compile"]
        cold, again = (fj[0], tc[0]), (statistics.median(fj[1:]), statistics.median(tc[1:]))
        ratios["cold"].append(cold[0] / cold[1])
        ratios["again"].append(again[0] / again[1])
        print(
            f"{name:18s} {cold[0]:8.0f} {cold[1]:8.0f} {cold[0] / cold[1]:6.2f}   {again[0]:8.0f} {again[1]:8.0f} "
            f"{again[0] / again[1]:6.2f}   {graphs['framejit']}/{graphs['torch.compile']}",
            flush=True,
        )
    for column, values in ratios.items():
        geomean = math.exp(sum(map(math.log, values)) / len(values))
        print(f"geomean of framejit / torch.compile, {column}, over {len(values)} models: {geomean:.2f}")


if __name__ == "__main__":
    main()
