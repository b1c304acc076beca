"""Memory over many compiles: compile, call and drop N distinct functions, closures or modules, and print the
process's RSS and the live objects framejit could leak at checkpoints (0, N/4, N/2, N), then after reset().

Run: python benchmarks/memory.py [--n 2000] [--kind code|closure|module|all] [--collect-every 100]

Kinds: "code" makes each function from its own source with its own globals (a distinct code object, as exec'd or
generated code has: a cache entry and graphs of its own); "closure" makes each by one factory closing over a fresh
weight tensor (one code object and one cache entry, the weight being a graph input); "module" makes a fresh
nn.Module instance each time (one forward code, an entry per instance). Every function and forward breaks its
graph (a print of nothing), so continuations are compiled too. RSS comes from /proc/self/statm at each
checkpoint; object counts from gc.get_objects() after collecting until nothing more is freed, and "dropped but
alive" counts the dropped functions, codes, modules and weights still alive then. "GraphModules" counts the live
ones of those handed to the backend. torch.fx itself keeps the source of every GraphModule it generated code
for (in linecache, for tracebacks): the column "FX sources kept", and the slow rise in "gc objects" (4 per
graph), are that.
"""

from __future__ import annotations

import argparse
import gc
import os
import types
import warnings
import weakref
from typing import Any, Callable

import torch
from torch import nn

import framejit
from framejit import cache
from framejit.break_resume import _RESUME_CODES

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


class KeepWeakGraphs:
    """A backend that runs graphs eagerly and holds only weak references to the GraphModules it was given."""

    def __init__(self) -> None:
        self.graphs: list[weakref.ref] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(weakref.ref(gm))
        return gm.forward

    def live(self) -> int:
        return sum(r() is not None for r in self.graphs)


SOURCE = """
def fn_{i}(x):
    y = torch.sin(x * 2) + 1
    print("", end="")
    return y.cos() - 1
"""


def make_code_fn(i: int) -> Callable[..., Any]:
    ns: dict[str, Any] = {"torch": torch}
    exec(compile(SOURCE.format(i=i), __file__, "exec"), ns)  # a real file name: framejit skips "<string>"
    return ns[f"fn_{i}"]


def make_closure(weight: torch.Tensor) -> Callable[..., Any]:
    def step(x):
        y = torch.sin(x @ weight) + 1
        print("", end="")
        return y.cos() - 1

    return step


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        print("", end="")
        return y * 2


def one_round(kind: str, i: int, backend: KeepWeakGraphs, x: torch.Tensor) -> list[weakref.ref]:
    """Compile, call twice and drop one function or module; weak references to what should now be dead."""
    if kind == "module":
        mod = Block()
        opt = framejit.compile(mod, backend=backend)
        refs = [weakref.ref(mod), weakref.ref(opt)]
    elif kind == "closure":
        weight = torch.randn(8, 8)
        mod = make_closure(weight)
        opt = framejit.compile(mod, backend=backend)
        refs = [weakref.ref(mod), weakref.ref(weight)]
    else:
        mod = make_code_fn(i)
        opt = framejit.compile(mod, backend=backend)
        refs = [weakref.ref(mod), weakref.ref(mod.__code__)]
    with torch.no_grad():
        want = mod(x)
        for _ in range(2):
            if not torch.allclose(opt(x), want):
                raise AssertionError(f"{kind} {i}: compiled result differs from eager")
    return refs


def collect() -> None:
    for _ in range(10):  # a code freed in one collection frees its cache entries' cycles only in the next
        if not gc.collect():
            break


def counts(backend: KeepWeakGraphs) -> dict[str, int]:
    collect()
    objs = gc.get_objects()
    with warnings.catch_warnings():  # isinstance() wakes lazy deprecated module attributes (torch.distributed)
        warnings.simplefilter("ignore")
        live = {
            name: sum(isinstance(o, cls) for o in objs)
            for name, cls in (
                ("fx.Node", torch.fx.Node),
                ("nn.Module", nn.Module),
                ("tensors", torch.Tensor),
                ("functions", types.FunctionType),
            )
        }
    return {
        "GraphModules": backend.live(),
        **live,
        "cache entries": sum(len(cache.entries(c)) for c in list(cache._codes)),
        "compiled frames": len(cache._frames),
        "continuations": sum(len(v) for v in _RESUME_CODES.values()),
        "gc objects": len(objs),
        # torch.fx keeps the generated source of every GraphModule it ever built (for linecache), by design
        "FX sources kept (KiB)": sum(map(len, torch.fx.graph_module._loader.eval_cache.values())) // 1024,
    }


def run(kind: str, n: int, warmup: int = 20, collect_every: int = 100) -> list[tuple[str, float, dict[str, int]]]:
    """Rows (rounds, RSS MiB, counts) at 0, n/4, n/2, n rounds (after `warmup` rounds) and after reset(), with the
    number of functions, code objects, modules and weights dropped so far that are still alive after collecting;
    raises if a compiled result differs from eager. gc.collect() runs every `collect_every` rounds (0: only
    CPython's own collections, which leave cyclic garbage such as dead GraphModules for its rare full ones)."""
    framejit.reset()
    backend = KeepWeakGraphs()
    x = torch.randn(4, 8)
    for i in range(warmup):  # first compiles fill torch's own caches (fake tensor dispatch, FX codegen, ...)
        one_round(kind, 10**6 + i, backend, x)
    checkpoints = {0, n // 4, n // 2, n}
    rows: list[tuple[str, float, dict[str, int]]] = []
    dropped: list[weakref.ref] = []

    def row(label: str) -> None:
        rss = rss_mib()  # before counts() collects: what the process holds at this point
        found = counts(backend)
        rows.append((label, rss, {**found, "dropped but alive": sum(r() is not None for r in dropped)}))

    for i in range(n + 1):
        if i in checkpoints:
            row(str(i))
        if i < n:
            dropped += one_round(kind, i, backend, x)
            if collect_every and (i + 1) % collect_every == 0:
                collect()
    framejit.reset()
    row("after reset()")
    return rows


def table(kind: str, rows: list[tuple[str, float, dict[str, int]]]) -> str:
    names = list(rows[0][2])
    lines = [f"| {kind} rounds | RSS MiB | " + " | ".join(names) + " |", "|" + " --- |" * (len(names) + 2)]
    lines += [f"| {label} | {rss:.1f} | " + " | ".join(str(c[k]) for k in names) + " |" for label, rss, c in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--kind", choices=["code", "closure", "module", "all"], default="all")
    parser.add_argument("--warmup", type=int, default=20, help="rounds run (and dropped) before round 0")
    parser.add_argument("--collect-every", type=int, default=100, help="rounds between gc.collect() (0: never)")
    args = parser.parse_args(argv)
    for kind in ["code", "closure", "module"] if args.kind == "all" else [args.kind]:
        print(table(kind, run(kind, args.n, args.warmup, args.collect_every)) + "\n", flush=True)


if __name__ == "__main__":
    main()
