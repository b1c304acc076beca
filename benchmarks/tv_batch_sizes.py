"""torchvision CNNs trained on batches whose size changes (4, then 3, then 5: an epoch's last, smaller batch),
under framejit and torch.compile side by side: graphs compiled, and every parameter's gradient against eager's.

Run from the repository root: python benchmarks/tv_batch_sizes.py [models...]

Each model is built with random weights (10 classes, train mode), copied for the eager reference, and compiled
with a counting backend that wraps aot_eager (framejit's, or torch's for torch.compile). Each step seeds the
generator alike before the compiled and the eager call (dropout, stochastic depth), sums the output and runs
backward; the report is the graph count and the largest gradient difference relative to eager's largest value.
The second size makes both JITs compile a graph with a symbolic batch size (automatic dynamic).
"""

from __future__ import annotations

import copy
import sys
import time
import warnings

import torch

import framejit
from tv_sweep import import_torchvision  # noqa: E402  (benchmarks/ is the script's directory)

MODELS = ["resnet18", "mobilenet_v3_small", "densenet121", "efficientnet_b0", "regnet_x_400mf", "shufflenet_v2_x0_5"]


class Counting:
    def __init__(self, jit: str) -> None:
        self.jit, self.graphs = jit, 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        self.graphs += 1
        if self.jit == "framejit":
            return framejit.lookup_backend("aot_eager")(gm, example_inputs)
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager(gm, example_inputs)


def run(jit: str, name: str, torchvision: object) -> str:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, num_classes=10).train()
    reference = copy.deepcopy(model)
    backend = Counting(jit)
    compiled = framejit.compile(model, backend=backend) if jit == "framejit" else torch.compile(model, backend=backend)
    worst, start, status = 0.0, time.perf_counter(), "ok"
    for n in (4, 3, 5):
        x = torch.randn(n, 3, 64, 64, generator=torch.Generator().manual_seed(n))
        model.zero_grad(), reference.zero_grad()
        try:
            torch.manual_seed(100 + n)
            compiled(x).sum().backward()
        except Exception as e:  # noqa: BLE001 - reported
            status = f"error at batch {n}: {type(e).__name__}: {str(e)[:80]}"
            break
        torch.manual_seed(100 + n)
        reference(x).sum().backward()
        worst = max(
            [worst]
            + [
                (a.grad - b.grad).abs().max().item() / (b.grad.abs().max().item() + 1e-12)
                for a, b in zip(model.parameters(), reference.parameters())
                if b.grad is not None
            ]
        )
    if jit == "framejit":
        framejit.reset()
    else:
        torch._dynamo.reset()
    return f"| {name} | {jit} | {backend.graphs} | {worst:.1e} | {time.perf_counter() - start:.1f} | {status} |"


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torchvision = import_torchvision()
    print("| model | JIT | graphs | largest gradient difference (relative) | seconds | result |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for name in sys.argv[1:] or MODELS:
        for jit in ("framejit", "torch.compile"):
            print(run(jit, name, torchvision), flush=True)


if __name__ == "__main__":
    main()
