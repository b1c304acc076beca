"""Graph breaks: regressions.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import ByValue


# ---------------------------------------------------------------------------------------------
# regressions
# ---------------------------------------------------------------------------------------------


def _brk_for_regressions():
    return None


framejit.disallow_in_graph(_brk_for_regressions)


class _SuperBase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class _SuperChild(_SuperBase):
    def forward(self, x):
        y = x.sin()
        _brk_for_regressions()
        return super().forward(y) + 1  # zero-argument super() in the continuation needs `self` first


def test_zero_argument_super_after_a_break():
    model = _SuperChild()
    x = torch.randn(2, 4)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(model)
    assert same(compiled(x), model(x))
    assert same(compiled(x), model(x))
    assert cnt.frame_count == 2  # before the break, and the continuation (self and a module live across it)


def test_a_frame_that_must_run_whole_as_python_reports_why():
    """A break framejit cannot resume after (inside a `for` over an iterator it cannot read) leaves the frame to
    Python: explain() and FRAMEJIT_LOGS=breaks say so, with the reason, rather than nothing at all."""
    import threading

    lock = threading.Lock()

    def loop_over_a_callable_iterator(x):
        for _ in iter(lock.locked, True):
            x = x + 1
            break
        return x

    reasons = [r.reason for r in framejit.explain(loop_over_a_callable_iterator)(torch.ones(2)).break_reasons]
    assert any("the frame runs as Python: cannot resume" in r for r in reasons), reasons


def test_an_argument_the_trace_cannot_read_breaks_where_it_is_used():
    """The break is at the use (which resumes), not at the load of the argument (which cannot): the rest of the
    frame is still a graph."""

    key = ByValue()

    def f(x, table):
        y = x.sin()
        return y * table[key]

    x, table = torch.randn(3), {key: 2.0}
    explained = framejit.explain(f)(x, table)
    assert explained.graph_count == 2
    assert [r.reason for r in explained.break_reasons] == [
        "a dict with keys that are neither constants nor compared by identity"
    ]
    assert torch.equal(framejit.compile(f, backend="eager")(x, table), f(x, table))


def test_a_compile_that_breaks_keeps_no_reference_to_the_frames_that_called_it():
    """An exception kept with its traceback holds the frames that called the compile, and their locals (torch's
    tensor repr holds a C++ guard that disables functorch in one: kept, it broke eager vmap later), until the
    garbage collector runs."""
    import gc
    import weakref

    class Token:
        pass

    def breaks(x):
        y = x + 1
        print("a break")
        return y * 2

    def caller(x, fn):
        token = Token()
        framejit.compile(fn, backend="eager")(x)  # compiles: a first trace fails at the break, a second breaks
        return weakref.ref(token)

    caller(torch.ones(2), breaks)  # (a first compile in a process may import modules lazily; some keep frames)
    gc.disable()
    try:
        ref = caller(torch.ones(3), breaks)
        assert ref() is None  # freed when caller returned, not at the next collection
    finally:
        gc.enable()
