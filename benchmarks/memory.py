"""Memory over many compiles: compile, call and drop N distinct functions or modules, and print the process's
RSS and the live objects framejit could leak at checkpoints (0, N/4, N/2, N), then after framejit.reset().

Run: python benchmarks/memory.py [--n 2000] [--kind code|closure|module|all]

Kinds: "code" makes each function from its own source (a distinct code object, so a cache entry and a
graph of its own); "closure" makes each one by a factory closing over a different number (one code object,
so it recompiles on the closed-over value until config.cache_size_limit, then runs as Python); "module"
makes a fresh nn.Module instance each time (one forward code, a cache entry per instance, guarded by
identity). Every function and forward has a graph break (a print), so continuations are compiled too.
RSS is read from /proc/self/statm after a gc.collect(); object counts from gc.get_objects().
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import types
import weakref
from typing import Any, Callable

import torch
from torch import nn

import framejit
from framejit import cache
from framejit.graph_break import _RESUME_CODES

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


def _quiet_print(*args: Any, **kwargs: Any) -> None:
    """The graph break in each function: a call framejit cannot trace (it prints nothing)."""


SOURCE = """
def fn_{i}(x):
    y = torch.sin(x * 2) + 1
    _quiet_print(y)
    return y.cos() - 1
"""


def make_code_fn(i: int) -> Callable[..., Any]:
    ns: dict[str, Any] = {"torch": torch, "_quiet_print": _quiet_print}
    exec(compile(SOURCE.format(i=i), __file__, "exec"), ns)  # a real file name: framejit skips "<string>"
    return ns[f"fn_{i}"]


def make_closure(i: int) -> Callable[..., Any]:
    def fn(x):
        y = torch.sin(x * i) + 1
        _quiet_print(y)
        return y.cos() - i
    return fn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        _quiet_print(y)
        return y * 2


def one_round(kind: str, i: int, backend: KeepWeakGraphs, x: torch.Tensor) -> list[weakref.ref]:
    """Compile, call twice and drop one function or module; weak references to what should now be dead."""
    if kind == "module":
        mod = Block()
        opt = framejit.compile(mod, backend=backend)
        want = mod(x)
        refs = [weakref.ref(mod), weakref.ref(opt)]
    else:
        mod = make_code_fn(i) if kind == "code" else make_closure(i)
        opt = framejit.compile(mod, backend=backend)
        want = mod(x)
        refs = [weakref.ref(mod)] + ([weakref.ref(mod.__code__)] if kind == "code" else [])
    for _ in range(2):
        if not torch.allclose(opt(x), want):
            raise AssertionError(f"{kind} {i}: compiled result differs from eager")
    return refs


def counts(backend: KeepWeakGraphs) -> dict[str, int]:
    for _ in range(10):  # a code freed in one collection frees its cache entries' cycles only in the next
        if not gc.collect():
            break
    objs = gc.get_objects()
    return {
        "GraphModule (live)": backend.live(),
        "fx.Node": sum(isinstance(o, torch.fx.Node) for o in objs),
        "code objects": sum(isinstance(o, types.CodeType) for o in objs),
        "functions": sum(isinstance(o, types.FunctionType) for o in objs),
        "nn.Module": sum(isinstance(o, nn.Module) for o in objs),
        "tensors": sum(isinstance(o, torch.Tensor) for o in objs),
        "codes with entries": len(cache._codes),
        "cache entries": sum(len(cache.entries(c)) for c in list(cache._codes)),
        "compiled frames": len(cache._frames),
        "resume codes": sum(len(v) for v in _RESUME_CODES.values()),
        "gc objects": len(objs),
    }


def run(kind: str, n: int, report: Callable[[str], None] = print) -> list[tuple[str, float, dict[str, int]]]:
    """Rows (label, RSS MiB, counts) at 0, n/4, n/2, n rounds and after reset(); raises if a dropped object
    is still alive after gc.collect()."""
    framejit.reset()
    backend = KeepWeakGraphs()
    x = torch.randn(4, 8)
    checkpoints = {0, n // 4, n // 2, n}
    rows = []
    for i in range(n + 1):
        if i in checkpoints:
            c = counts(backend)
            rows.append((str(i), rss_mib(), c))
            report(f"{kind:8} {i:6} rss {rows[-1][1]:8.1f} MiB  {c}")
        if i == n:
            break
        refs = one_round(kind, i, backend, x)
        if i % 100 == 0:
            gc.collect()
            alive = [r() for r in refs if r() is not None]
            if alive and kind != "code":
                raise AssertionError(f"{kind} {i}: still alive after del + gc.collect(): {alive}")
    framejit.reset()
    c = counts(backend)
    rows.append(("reset", rss_mib(), c))
    report(f"{kind:8} reset  rss {rows[-1][1]:8.1f} MiB  {c}")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--kind", choices=["code", "closure", "module", "all"], default="all")
    args = parser.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")  # the closure kind reaches the cache size limit by design
    for kind in (["code", "closure", "module"] if args.kind == "all" else [args.kind]):
        run(kind, args.n)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
