"""Graph breaks: closures and cells across a break.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import brk, differential, observe_events
from tests.helpers import assert_equal, targets


# --- closures and cells ---


def make_counter_fn():
    count = 0

    def fn(x):
        nonlocal count
        count += 1
        y = x * count
        brk()
        count += 10
        return y + count

    return fn, lambda: count


def test_nonlocal_counter_across_break():
    eager_fn, eager_count = make_counter_fn()
    comp_fn, comp_count = make_counter_fn()
    compiled = framejit.optimize(CompileCounter())(comp_fn)
    for _ in range(3):
        x = torch.randn(3)
        assert_equal(compiled(x), eager_fn(x))
        assert comp_count() == eager_count()


def cells_across_break(x):
    k = 0

    def bump():
        nonlocal k
        k += 1
        return k

    bump()
    scale = lambda t: t * k  # noqa: E731
    y = scale(x)
    brk()
    bump()
    z = scale(y)
    inner = lambda t: t + k  # noqa: E731
    return inner(z), k


def test_cells_and_inner_functions_across_break():
    differential(cells_across_break, (torch.randn(3),), observe=observe_events, repeat=2)


def closure_defined_before_break(x):
    offset = x.sum()

    def add_offset(t):
        return t + offset

    brk()
    return add_offset(x * 2)


def test_inner_function_defined_before_break_called_after():
    cnt = differential(closure_defined_before_break, (torch.randn(3),), repeat=3)
    # [sum] before the break, [mul, add] after it; later calls (a new closure object each time,
    # same code and same kinds of cell contents) hit both entries
    assert cnt.frame_count == 2, [targets(g) for g in cnt.graphs]


def bound_method_and_lambda_locals(x):
    m = x.mul
    g = lambda t: t - 1  # noqa: E731
    it = iter([x, x * 2])
    first = next(it)
    brk()
    return m(3) + g(first) + next(it)


def test_bound_method_lambda_iterator_locals_across_break():
    differential(bound_method_and_lambda_locals, (torch.randn(3),), repeat=2)


def bound_tensor_method_across_break(x):
    m = x.mul
    brk()
    return m(2) + 1


def test_bound_tensor_method_live_across_break_is_traced():
    cnt = differential(bound_tensor_method_across_break, (torch.randn(3),), repeat=2)
    # nothing before the break; the continuation calls the bound method and adds: one graph of two ops
    assert cnt.frame_count == 1 and cnt.op_count == 2, [targets(g) for g in cnt.graphs]
    out = framejit.explain(bound_tensor_method_across_break)(torch.randn(3))
    assert out.graph_break_count == 1, [r.reason for r in out.break_reasons]


def except_body_after_raise(x):
    try:
        raise ValueError("v")
    except ValueError:
        x = x * 2
    return x + 1


def test_except_body_after_a_break_is_captured():
    cnt = differential(except_body_after_raise, (torch.randn(3),), repeat=2)
    # whatever breaks at the raise, the handler's continuation is a frame like any other: x * 2, x + 1
    assert cnt.op_count == 2, [targets(g) for g in cnt.graphs]


CELL_LOG: list = []


def cell_read_by_a_replayed_append(x, z):
    CELL_LOG.append(z)  # replayed after the graph: its value is loaded from the cell z...
    z = x[-1]  # ...which the trace also wrote (z is a cell: inner reads it)
    brk()

    def inner():
        return z

    return inner() * 2


def test_a_replayed_write_reads_a_cell_before_the_trace_writes_it():
    CELL_LOG.clear()
    differential(
        cell_read_by_a_replayed_append,
        (torch.randn(3, 4), torch.randn(4)),
        observe=lambda: [t.clone() for t in CELL_LOG],
        before=CELL_LOG.clear,
    )


def unbound_cell_after_break(x, bind):
    def inner():
        return r + x  # noqa: F821 - r is a cell of the function, bound below or never

    brk()
    if bind:
        r = x * 2
    try:
        got = r  # an empty cell of this frame: eager raises UnboundLocalError, not NameError
    except UnboundLocalError as e:
        got = str(e)
    n = inner() if bind else None
    del r  # raises UnboundLocalError when never bound
    return got, n


def test_an_empty_cell_of_the_frame_raises_unbound_local_error_after_a_break():
    # after the break the cell is the continuation's parameter, a cell of its own frame as in eager (not a free
    # variable, which would raise NameError "cannot access free variable")
    differential(unbound_cell_after_break, (torch.randn(3), True), (torch.randn(3), False), repeat=2)


class Base(torch.nn.Module):
    def forward(self, x):
        return x + 1


class SelfInACell(Base):
    def forward(self, x):
        training = lambda: self.training  # noqa: E731 (self is a cell of forward)
        brk()
        return super().forward(x) * 2 + training()


def test_zero_argument_super_after_a_break_where_self_is_a_cell():
    # zero-argument super() reads the frame's first local, through its cell: the continuation keeps self first
    cnt = differential(SelfInACell().forward, (torch.randn(3),), repeat=2)
    assert cnt.frame_count == 1, [targets(g) for g in cnt.graphs]


def cell_read_through_frame_locals(x):
    y = x + 1
    inner = lambda: y  # noqa: E731
    brk()
    import inspect

    seen = inspect.currentframe().f_locals["y"]
    y = y * 3
    return seen, inner()


def test_a_cell_reads_as_its_contents_in_the_continuations_frame_locals():
    differential(cell_read_through_frame_locals, (torch.randn(3),), repeat=2)
