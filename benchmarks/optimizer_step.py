"""A compiled optimizer step: framejit.compile(opt.step) against torch.compile(opt.step), side by side, both
with the inductor backend (and the eager step for reference).

Run from the repository root: python benchmarks/optimizer_step.py [--optimizers AdamW,SGD] [--steps N]

Each optimizer steps a model of many parameters (a stack of linear layers: the step is one loop over them, so it
is where compiling pays). Each JIT gets its own copy of the model and optimizer, primed by compiling a tiny
function first; its first step is timed as the first call (capture and inductor's compile, from an empty
inductor cache), then N warm steps
are timed after 3 more. Printed: first call (s), warm step (ms) of eager, framejit and torch.compile, the speedup
of each over eager, and the graph counts (one each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

# a fresh inductor cache: neither JIT's first call finds kernels an earlier run compiled
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="optimizer_step_")

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402
from framejit.testing import CompileCounterWithBackend  # noqa: E402


def model_and_optimizer(name: str, layers: int, width: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    options = {"momentum": 0.9} if name == "SGD" else {}
    return model, getattr(torch.optim, name)(model.parameters(), lr=1e-3, **options)


def with_grads(model: nn.Module) -> None:
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-2


def run(jit: str, name: str, layers: int, width: int, steps: int) -> tuple[float, float, int]:
    model, opt = model_and_optimizer(name, layers, width)
    with_grads(model)
    graphs = 0
    if jit == "framejit":
        counter = CompileCounterWithBackend("inductor")
        step = framejit.compile(opt.step, backend=counter)
    elif jit == "torch.compile":
        import torch._dynamo.testing

        counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
        torch._dynamo.reset()
        step = torch.compile(opt.step, backend=counter)
    else:
        counter, step = None, opt.step
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    if counter is not None:
        graphs = counter.frame_count
    return first, statistics.median(times) * 1e3, graphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizers", default="AdamW,Adam,SGD")
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    x = torch.randn(4)
    framejit.compile(lambda t: torch.relu(t) + 1, backend="inductor")(x)
    torch.compile(lambda t: torch.relu(t) + 1, backend="inductor")(x)
    print(
        f"{args.layers} linear layers of {args.width}x{args.width} ({2 * args.layers} parameters); torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(
        f"{'optimizer':10s} {'fj first s':>10s} {'tc first s':>10s} {'eager ms':>9s} {'fj ms':>7s} {'tc ms':>7s} "
        f"{'fj x':>6s} {'tc x':>6s} {'graphs fj/tc':>12s}"
    )
    for name in args.optimizers.split(","):
        results = {
            jit: run(jit, name, args.layers, args.width, args.steps) for jit in ("eager", "framejit", "torch.compile")
        }
        eager, fj, tc = results["eager"], results["framejit"], results["torch.compile"]
        print(
            f"{name:10s} {fj[0]:10.2f} {tc[0]:10.2f} {eager[1]:9.2f} {fj[1]:7.2f} {tc[1]:7.2f} "
            f"{eager[1] / fj[1]:6.2f} {eager[1] / tc[1]:6.2f} {fj[2]:>6d}/{tc[2]}",
            flush=True,
        )


if __name__ == "__main__":
    main()
