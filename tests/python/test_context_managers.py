"""with-blocks over context managers written in Python (a class with __enter__/__exit__, contextlib.nullcontext):
both methods are traced, the normal exit calls __exit__(None, None, None)."""

import contextlib

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


class Scale:
    def __init__(self, log, factor):
        self.log, self.factor = log, factor

    def __enter__(self):
        self.log.append("enter")
        return self.factor

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit" if exc_type is None else "error")
        return False


def maybe_scaled(log, on):
    return Scale(log, 3.0) if on else contextlib.nullcontext(1.0)


def test_python_context_managers_are_traced():
    def fn(x, log):
        with maybe_scaled(log, True) as k:
            x = x * k
        with maybe_scaled(log, False) as k:
            x = x + k
        return x

    x = torch.randn(3)
    eager_log, compiled_log = [], []
    torch.testing.assert_close(run_fullgraph(fn, x, compiled_log), fn(x, eager_log))
    assert compiled_log == eager_log == ["enter", "exit"]


def test_a_graph_break_inside_the_block_exits_once():
    def fn(x, log):
        with Scale(log, 2.0) as k:
            y = x * k
            print("inside")  # runs as Python: the rest of the block is a continuation
            y = y + 1
        return y

    x = torch.randn(3)
    eager_log, compiled_log = [], []
    torch.testing.assert_close(framejit.optimize(CompileCounter())(fn)(x, compiled_log), fn(x, eager_log))
    assert compiled_log == eager_log == ["enter", "exit"]


def _ranged(x):
    with torch.profiler.record_function("block"):
        y = x * 2
    with torch.autograd.profiler.record_function("second"), torch.autograd.profiler.profile():
        y = y + 1
    return y


def test_profiler_ranges_inside_compiled_code_do_nothing_and_the_graph_stays_whole():
    # as under torch.compile: the ranges are not recorded around a graph's ops, and they break nothing
    cnt = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.optimize(cnt, nopython=True)(_ranged)(x), _ranged(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 2)


@contextlib.contextmanager
def _scaled(factor):
    yield factor * 2


def uses_a_generator_context_manager(x):
    manager = _scaled(3)
    with manager as factor:
        y = x * factor
    return y + 1


def next_past_the_end_is_caught(x):
    it = iter([1])
    next(it)
    try:
        next(it)
    except StopIteration:
        x = x + 1
    return x


@pytest.mark.parametrize("fn", [uses_a_generator_context_manager, next_past_the_end_is_caught])
def test_stop_iteration_caught_in_the_trace_keeps_one_graph(fn):
    """contextlib's __exit__ catches the StopIteration its generator ends with: the block stays in the graph."""
    counter = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.compile(fn, backend=counter)(x), fn(x))
    assert counter.frame_count == 1
    assert framejit.explain(fn)(x).break_reasons == []


class _EqualsAnything:
    scale = 3.0

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def test_an_object_equal_to_everything_is_not_taken_for_a_grad_mode_switch():
    """The builder tells torch.no_grad by identity: an argument whose __eq__ answers True stays a user object."""

    def fn(x, obj):
        return x * obj.scale, obj is torch.no_grad, len({obj})

    framejit.reset()
    report = framejit.explain(fn)(torch.ones(2), _EqualsAnything())
    assert [str(b.reason) for b in report.break_reasons if "scale" in str(b.reason)] == []
    got = framejit.compile(fn, backend="eager")(torch.ones(2), _EqualsAnything())
    assert got[1:] == (False, 1) and same(got[0], torch.full((2,), 3.0))


class _GradSwitch:
    """A user's grad-mode context manager written on torch._C._set_grad_enabled."""

    def __init__(self, mode):
        self.prev = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prev)


def _switches_in_a_user_context(x):
    with _GradSwitch(False):
        x = x + 1
        if torch.is_grad_enabled():
            x = x * 2
    return x - 1


def _decorates_in_the_trace(x):
    def inner(y):
        return y.sin()

    off = torch.no_grad()(inner)
    on_again = torch.set_grad_enabled(False)(inner)  # made: grad off; applied: back on
    return off(x) + x, on_again(x), torch.is_grad_enabled(), off


def _leaves_grad_off(x):
    torch._C._set_grad_enabled(False)
    return x * 2


@pytest.mark.parametrize("fn", [_switches_in_a_user_context, _decorates_in_the_trace, _leaves_grad_off])
def test_grad_mode_switched_by_set_grad_enabled_or_a_decorator_is_one_graph_as_eager(fn):
    x = torch.rand(2, 3, requires_grad=True)
    counter = CompileCounter()
    try:
        want = fn(x)
        eager_mode_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        got = framejit.optimize(counter, nopython=True)(fn)(x)
        assert torch.is_grad_enabled() == eager_mode_after
    finally:
        torch.set_grad_enabled(True)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(want, got, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w)
            assert g.requires_grad == w.requires_grad
        elif callable(w):  # the decorated function, made again after the graph: it runs in no_grad
            assert not g(x).requires_grad and torch.is_grad_enabled()
        else:
            assert g == w
    assert counter.frame_count == 1
