"""framejit's own capture time: the first call of each bench-suite model with backend "eager".

Run: python benchmarks/capture_time.py [--repeat R]
To compare two checkouts of framejit, run it once from each with PYTHONPATH=<checkout>, alternating.

With backend "eager" no compiler runs, so a first call is framejit's work alone: trace the frame (fake
tensors included), build the replacement code and the guard function, then run once. Each model is
compiled once before timing (one-time imports and torch's lazy setup), then `repeat` times after
`framejit.reset()`; the median is printed, in milliseconds, for inference (no_grad) and for a training
step (forward, loss, backward).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

import framejit
from framejit.bench.models import SUITE, Case


def first_call_ms(case: Case, train: bool, repeat: int) -> float:
    model = case.model.train(train)

    def step(fn: Any) -> None:
        if train:
            case.loss_fn(fn(case.x), case.target).backward()
        else:
            with torch.no_grad():
                fn(case.x)

    times = []
    for i in range(repeat + 1):
        framejit.reset()
        compiled = framejit.optimize("eager")(model)
        start = time.perf_counter()
        step(compiled)
        if i:  # the first compile primes imports and torch's lazy setup
            times.append((time.perf_counter() - start) * 1e3)
    framejit.reset()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"framejit first call, backend eager, median of {args.repeat} (ms), framejit at {framejit.__file__}")
    total = {False: 0.0, True: 0.0}
    for name, build in SUITE.items():
        torch.manual_seed(0)
        case = build(False)
        row = {train: first_call_ms(case, train, args.repeat) for train in (False, True)}
        for train in row:
            total[train] += row[train]
        print(f"{name:12s} infer {row[False]:8.1f}   train {row[True]:8.1f}")
    print(f"{'total':12s} infer {total[False]:8.1f}   train {total[True]:8.1f}")


if __name__ == "__main__":
    main()
