"""Per-call overhead of framejit vs torch.compile, both with the "eager" backend, on tiny inputs.

Run: python benchmarks/overhead.py [--seconds S] [--repeat R]

For each case it times warm calls (after compiling) of: the plain eager function,
framejit.compile(fn, backend="eager") and torch.compile(fn, backend="eager"), and
prints the best per-call time over several timeit repeats, the microseconds each
JIT adds over eager, and the ratio framejit-added / torch.compile-added (lower is better
for framejit; <= 1.0 meets the target).
"""

from __future__ import annotations

import argparse
import copy
import sys
import timeit
from typing import Any, Callable

import torch
from torch import nn

import framejit
import torch._dynamo.testing
from framejit.testing import CompileCounterWithBackend

# Each function is made from source for every system, so each system gets its own code object
# (both JITs keep their caches on the code object). The source is compiled under this file's name:
# framejit refuses to capture generated code ("<...>" file names).
ADD_SRC = """
def add2(a, b):
    return a + b
"""

TEN_SRC = """
def sum10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9
"""


def make_fn(src: str) -> Callable[..., Any]:
    ns: dict[str, Any] = {"torch": torch}
    exec(compile(src, __file__, "exec"), ns)
    return next(v for k, v in ns.items() if k != "torch" and callable(v) and not k.startswith("__"))


def make_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def cases() -> list[tuple[str, Callable[[], Any], tuple]]:
    torch.manual_seed(0)
    add_args = (torch.randn(4, 4), torch.randn(4, 4))
    ten_args = tuple(torch.randn(4, 4) for _ in range(10))
    mlp = make_mlp()
    mlp_args = (torch.randn(4, 16),)
    return [
        ("add (2 tensors)", lambda: make_fn(ADD_SRC), add_args),
        ("sum of 10 args", lambda: make_fn(TEN_SRC), ten_args),
        ("3-layer MLP", lambda: copy.deepcopy(mlp), mlp_args),
    ]


def best_per_call_us(calls: list[Callable[[], Any]], seconds: float, repeat: int) -> list[float]:
    """Best per-call microseconds of each callable; the repeats are interleaved (a round times every
    callable once) so that drift in machine load hits all of them alike."""
    timers, numbers = [], []
    for call in calls:
        timer = timeit.Timer(call)
        number, elapsed = timer.autorange()  # a count taking >= 0.2 s
        numbers.append(max(1, int(number * seconds / max(elapsed, 1e-9))))
        timers.append(timer)
    best = [float("inf")] * len(calls)
    for _ in range(repeat):
        for i, (timer, number) in enumerate(zip(timers, numbers)):
            best[i] = min(best[i], timer.timeit(number) / number * 1e6)
    return best


def check(name: str, got: Any, want: Any) -> None:
    if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
        sys.exit(f"{name}: compiled result differs from eager")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.15, help="target seconds per timeit repeat")
    parser.add_argument("--repeat", type=int, default=9, help="timeit repeats (the best is kept)")
    args = parser.parse_args()

    rows = []
    for name, make, inputs in cases():
        eager = make()
        # counting wrappers around the "eager" backend: they return that backend's callable unchanged,
        # so calls cost the same, and they show that each JIT compiled exactly one graph
        fj_cnt = CompileCounterWithBackend("eager")
        fj = framejit.compile(make(), backend=fj_cnt)
        torch._dynamo.reset()
        tc_cnt = torch._dynamo.testing.CompileCounterWithBackend("eager")
        tc = torch.compile(make(), backend=tc_cnt)

        want = eager(*inputs)
        for label, fn in (("framejit", fj), ("torch.compile", tc)):
            for _ in range(3):  # compile, then warm
                got = fn(*inputs)
            check(f"{name} / {label}", got, want)

        t_eager, t_fj, t_tc = best_per_call_us(
            [lambda: eager(*inputs), lambda: fj(*inputs), lambda: tc(*inputs)], args.seconds, args.repeat
        )
        for label, cnt in (("framejit", fj_cnt), ("torch.compile", tc_cnt)):
            if cnt.frame_count != 1:
                sys.exit(f"{name} / {label}: expected 1 compiled graph, got {cnt.frame_count}")
        rows.append((name, t_eager, t_fj, t_tc))
        framejit.reset()
        torch._dynamo.reset()

    header = ("case", "eager us", "framejit us", "torch.compile us", "framejit +us", "torch.compile +us", "ratio fj/tc")
    table = []
    for name, t_eager, t_fj, t_tc in rows:
        add_fj, add_tc = t_fj - t_eager, t_tc - t_eager
        ratio = f"{add_fj / add_tc:.2f}" if add_tc > 0 else "n/a"
        table.append((name, f"{t_eager:.2f}", f"{t_fj:.2f}", f"{t_tc:.2f}", f"{add_fj:+.2f}", f"{add_tc:+.2f}", ratio))
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    print(
        f"per-call time, best of {args.repeat} repeats (torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, CPU); backend 'eager' for both JITs"
    )
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print("ratio = framejit's added us / torch.compile's added us (<= 1.00: framejit adds no more overhead)")


if __name__ == "__main__":
    main()
