"""Memory: compiling, calling and dropping many distinct functions, closures and modules leaves
nothing behind (weak references to them, their code and the graphs handed to the backend all die, cache
entries go, RSS plateaus), and framejit.reset() frees every cache entry and compiled graph.
benchmarks/memory.py measures the same at 2,000 (figures in benchmarks/RESULTS.md)."""

from __future__ import annotations

import gc
import os
import weakref
from typing import Any, Callable

import pytest
import torch
from torch import nn

import framejit
from framejit import cache


class WeakGraphs:
    """A backend that runs graphs eagerly and keeps only weak references to the GraphModules it was given."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.refs.append(weakref.ref(gm))
        return gm.forward

    def live(self) -> int:
        return sum(r() is not None for r in self.refs)


def collect() -> None:
    for _ in range(10):  # a code freed in one collection frees its cache entries' cycles only in the next
        if not gc.collect():
            break


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def framejit_state() -> dict[str, int]:
    with_entries = [c for c in list(cache._codes) if cache.entries(c)]  # (others are library code marked SKIP)
    return {
        "codes": len(with_entries),
        "entries": sum(len(cache.entries(c)) for c in with_entries),
        "frames": len(cache._frames),
        "watchers": len(cache._watchers),
    }


SOURCE = """
def fn_{i}(x):
    y = torch.sin(x * 2) + 1
    print("", end="")  # a graph break: the rest is a continuation with a graph of its own
    return y.cos() - 1
"""


def distinct_function(i: int) -> Callable:
    """A function with a code object and globals of its own, as exec'd or generated code has."""
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(SOURCE.format(i=i), __file__, "exec"), namespace)  # a real file name: "<string>" is skipped
    return namespace[f"fn_{i}"]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(256, 256)  # 257 KiB of parameters: a leaked instance shows in RSS

    def forward(self, x):
        y = torch.relu(self.lin(x))
        print("", end="")
        return y * 2


@pytest.mark.slow
def test_dropped_functions_with_their_own_code_and_globals_are_freed():
    backend, x, refs = WeakGraphs(), torch.randn(4, 256), []
    for i in range(150):
        fn = distinct_function(i)
        compiled = framejit.compile(fn, backend=backend)
        assert torch.equal(compiled(x), fn(x)) and torch.equal(compiled(x), fn(x))
        refs += [weakref.ref(fn), weakref.ref(fn.__code__), weakref.ref(compiled)]
        del fn, compiled
    collect()
    assert [r for r in refs if r() is not None] == []
    assert backend.live() == 0 and len(backend.refs) == 300  # two graphs per function, all freed
    assert framejit_state() == {"codes": 0, "entries": 0, "frames": 0, "watchers": 0}


def test_dropped_closures_free_what_they_captured():
    """Closures of one factory share a code object; what one captured must die with it, whichever closure of
    that code ran last."""

    def make(model: nn.Module) -> Callable:
        def step(x):
            y = model(x) + 1
            print("", end="")
            return y.sum()

        return step

    backend, x, refs = WeakGraphs(), torch.randn(4, 256), []
    for _ in range(40):
        model = Block()
        step = framejit.compile(make(model), backend=backend)
        with torch.no_grad():
            assert torch.allclose(step(x), make(model)(x))
        refs += [weakref.ref(model), weakref.ref(step)]
        del model, step
    collect()
    assert [r for r in refs if r() is not None] == []


@pytest.mark.slow
def test_dropped_modules_free_themselves_their_entries_and_graphs():
    backend, x = WeakGraphs(), torch.randn(4, 256)
    forward = Block.forward.__code__

    def one_round() -> list[weakref.ref]:
        mod = Block()
        compiled = framejit.compile(mod, backend=backend)
        with torch.no_grad():
            assert torch.equal(compiled(x), mod(x)) and torch.equal(compiled(x), mod(x))
        return [weakref.ref(mod), weakref.ref(compiled), weakref.ref(mod.lin.weight)]

    for _ in range(30):  # warm up: torch's and the allocator's own caches fill here
        one_round()
    collect()
    rss_before, state_before, live_before = rss_mib(), framejit_state(), backend.live()
    refs = [r for _ in range(100) for r in one_round()]
    collect()
    assert [r for r in refs if r() is not None] == []
    assert not cache.entries(forward), "each dead module's entry is dropped"
    assert framejit_state() == state_before and backend.live() == live_before <= 1  # the continuation's graph
    # 100 leaked Blocks would hold 25 MiB of parameters alone (and their graphs and tensors more)
    assert rss_mib() - rss_before < 10, f"RSS grew from {rss_before:.0f} to {rss_mib():.0f} MiB"


def test_deleting_a_compiled_module_frees_its_graphs():
    backend, x = WeakGraphs(), torch.randn(2, 256)
    mod = Block()
    compiled = framejit.compile(mod, backend=backend)
    with torch.no_grad():
        compiled(x)
    assert backend.live() == 2 and cache.entries(Block.forward.__code__)
    r_mod, r_compiled = weakref.ref(mod), weakref.ref(compiled)
    del mod, compiled
    collect()
    assert r_mod() is None and r_compiled() is None
    assert not cache.entries(Block.forward.__code__)
    assert backend.live() == 1  # only the continuation's graph (`y * 2`), which is not the module's


def test_reset_frees_every_entry_and_graph():
    backend, x = WeakGraphs(), torch.randn(2, 256)
    functions = [distinct_function(i) for i in range(5)]
    modules = [Block() for _ in range(3)]
    compiled = [framejit.compile(f, backend=backend) for f in functions + modules]
    with torch.no_grad():
        for c in compiled:
            c(x)
    # two graphs per function; the three Blocks share one graph (guarded by type), and one continuation's
    assert backend.live() == 2 * 5 + 1 + 1 and framejit_state()["entries"] > 0
    framejit.reset()
    collect()
    assert backend.live() == 0, "reset() leaves compiled graphs alive"
    assert framejit_state() == {"codes": 0, "entries": 0, "frames": 0, "watchers": 0}
    with torch.no_grad():  # and everything compiles again
        assert all(torch.equal(c(x), orig(x)) for c, orig in zip(compiled, functions + modules))
    assert backend.live() == 2 * 5 + 1 + 1
