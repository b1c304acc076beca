"""What the real-library tests share: importing a library or skipping with why, and running a program under
framejit and under torch.compile side by side with a counting backend each.

framejit never imports torch._dynamo; these tests do, for the comparison only, and reset it before and after."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Sequence

import pytest
import torch

import framejit
from framejit.testing import CompileCounter

# a program: called with the compiled callable, returns what to compare with eager
Step = Callable[[Callable[..., Any]], Any]


def import_or_skip(name: str, why: str = "") -> Any:
    """The module, or a skip naming why it cannot be had. Unlike pytest.importorskip, an import that fails with
    another error than ImportError (a binary built for another torch) skips too."""
    try:
        return importlib.import_module(name)
    except Exception as e:  # any failure to import is a reason to skip
        pytest.skip(
            f"{name} cannot be imported beside torch {torch.__version__}: {type(e).__name__}: {e}. {why}",
            allow_module_level=True,
        )


@dataclasses.dataclass
class Run:
    """What one compiled program did: its results, the graph and op counts after each step, why each recompile
    happened (framejit only)."""

    results: list[Any]
    counts: list[int]
    ops: list[int] = dataclasses.field(default_factory=list)
    recompiles: list[str] = dataclasses.field(default_factory=list)

    @property
    def graphs(self) -> int:
        return self.counts[-1]


def run_framejit(fn: Callable[..., Any], steps: Sequence[Step], **options: Any) -> Run:
    """Each step run on `fn` compiled by framejit with a counting backend (CompileCounter)."""
    counter = CompileCounter()
    recompiles: list[str] = []
    compiled = framejit.optimize(counter, guard_fail_fn=lambda failure: recompiles.append(failure.reason), **options)(
        fn
    )
    run = Run([], [], recompiles=recompiles)
    for step in steps:
        run.results.append(step(compiled))
        run.counts.append(counter.frame_count)
        run.ops.append(counter.op_count)
    return run


def run_torch_compile(fn: Callable[..., Any], steps: Sequence[Step]) -> Run:
    """Each step run on `torch.compile(fn)` with torch's counting backend, from a reset torch._dynamo."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter as TorchCompileCounter

    torch._dynamo.reset()
    counter = TorchCompileCounter()
    compiled = torch.compile(fn, backend=counter)
    run = Run([], [])
    try:
        for step in steps:
            run.results.append(step(compiled))
            run.counts.append(counter.frame_count)
            run.ops.append(counter.op_count)
    finally:
        torch._dynamo.reset()
    return run


def assert_not_more_graphs(framejit_counts: Sequence[int], torch_counts: Sequence[int]) -> None:
    """framejit's graph count after each step is at most torch.compile's."""
    assert all(f <= t for f, t in zip(framejit_counts, torch_counts, strict=True)), (
        f"framejit's graphs after each step {list(framejit_counts)}, torch.compile's {list(torch_counts)}"
    )


def assert_close_tree(got: Any, want: Any, **tol: float) -> None:
    """assert_close over nested results (tuples, lists, dicts, model outputs that are dicts)."""
    torch.testing.assert_close(got, want, **(tol or {"rtol": 1e-4, "atol": 1e-5}))
