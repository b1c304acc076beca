"""In-place writes eager refuses or computes in memory order.

Writes whose inputs share the written tensor's memory: the trace breaks before them and eager runs them
(framejit/variables/aliased_writes.py); writes that do not partly overlap stay in the graph. Writes autograd
refuses (into a row of `for row in t`, where t requires grad; a use of a row after t was written): the break raises
eager's error in their place.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import differential


def shifted_add(x):
    y = x * 2
    y[1:] += y[:-1]  # partial overlap: eager raises
    return y


def shifted_copy(x):
    y = x * 2
    y[1:] = y[:-1]
    return y


def shifted_add_caught(x, log):
    y = x * 2
    try:
        y[1:].add_(y[:-1])
    except RuntimeError as e:
        log.append(str(e)[:40])
    finally:
        log.append("finally")
    return y + 1


def expanded_write(x):
    y = x * 2
    y[:, None].expand(4, 2, 3).add_(1)  # the written tensor overlaps itself
    return y


def out_overlapping(x):
    y = x * 2
    torch.add(y[:-1], 1, out=y[1:])
    return y


@pytest.mark.parametrize("fn", [shifted_add, shifted_copy, expanded_write, out_overlapping])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_partly_overlapping_write_raises_as_in_eager(fn, backend):
    for requires_grad in (False, True):
        differential(fn, (torch.randn(4, 3, requires_grad=requires_grad),), backend=backend)


def test_the_users_try_catches_the_overlap_error_and_the_finally_runs():
    cnt = differential(shifted_add_caught, (torch.randn(4, 3), []))
    assert cnt.frame_count == 2  # y = x * 2 before the write; y + 1 after it


def disjoint_rows(x):
    y = x * 2
    y[0].add_(y[1])  # same storage, disjoint memory: eager allows it
    y[2] = y[3]
    return y.sum(0)


def same_memory(x):
    y = x * 2
    y.mul_(y)  # one and the same memory: eager allows it
    y += y
    return y


def other_tensor(x, buf):
    buf[1:] = x[:-1]
    buf.add_(x)
    return buf * 2


def masks_combined(m, a):
    # `&` / `|` are operator.and_ / or_: named like in-place ops, but they write nothing
    return m.view(2, 3, 1) & m.view(2, 1, 3) & a, m.view(6) | m.view(6)


def strided_columns_of_other_rows(freq):
    # strided (not dense) views of one tensor whose spans do not meet: nothing overlaps (a multi-axis rotary table)
    freq = freq * 1
    first = freq[0]
    for row, offset in ((1, 1), (2, 2)):
        first[..., offset:9:3] = freq[row, ..., offset:9:3]
    return torch.cat((first, first), dim=-1)


def strided_column_divided_in_place(x):
    grid = x.unsqueeze(0) + 0.5
    grid[..., 0] /= 4  # setitem(grid, (..., 0), grid[..., 0] after /=): a strided view written back into itself
    grid[..., 1] *= grid[..., 1]
    return grid


@pytest.mark.parametrize(
    "fn, args",
    [
        (strided_column_divided_in_place, (torch.randn(3, 4, 2),)),
        (strided_columns_of_other_rows, (torch.randn(3, 2, 4, 9),)),
        (disjoint_rows, (torch.randn(4, 3),)),
        (same_memory, (torch.randn(4, 3),)),
        (other_tensor, (torch.randn(4, 3), torch.zeros(4, 3))),
        (masks_combined, (torch.rand(2, 3) > 0.5, torch.ones(2, 3, 3, dtype=torch.bool))),
    ],
)
def test_writes_that_do_not_partly_overlap_stay_in_one_graph(fn, args):
    cnt = differential(fn, args)
    assert cnt.frame_count == 1


def listed_rows(x):
    y = x * 2
    y[[1, 3]] = y[[0, 2]] * 2  # a copy of rows: no overlap
    y[[0, 2]] = y[1]  # index_put_ into y from a row of y: eager refuses any overlap
    return y


def test_advanced_indexing_from_the_same_tensor_matches_eager():
    differential(listed_rows, (torch.randn(4, 3),))


def test_the_break_reason_names_the_overlap():
    explained = framejit.explain(shifted_add_caught)(torch.randn(4, 3), [])
    reasons = [str(b.reason) for b in explained.break_reasons]
    assert any("shares memory with one of its inputs" in r for r in reasons), reasons


def test_dynamic_sizes_overlap_check_adds_no_guard():
    cnt = CompileCounter()
    fn = framejit.compile(disjoint_rows, backend=cnt, dynamic=True)
    for n in (4, 5, 6):
        x = torch.randn(n, 3)
        torch.testing.assert_close(fn(x), disjoint_rows(x))
    assert cnt.frame_count == 1


def write_into_a_row(x):
    y = x * 2
    for row in y:  # unbind's views: autograd refuses a write into one
        row.add_(1)
    return y


def write_into_a_row_caught(x, log):
    y = x * 2
    log.append("before")
    try:
        for row in y:
            row.mul_(2)
    except RuntimeError as e:
        log.append(str(e)[:30])
    return y.sum()


def use_a_row_after_writing_the_base(x, log):
    y = x * 2
    for row in y:  # the second row is used after its base was written: autograd refuses, in the second iteration
        log.append(row.shape[0])  # (done once, as in eager, before the error)
        y.sub_(row * row)
    return y


def write_grad_into_a_row_without_grad(x, table):
    for row in table:  # rows of a tensor without grad have no history: eager's error says "created in no_grad mode"
        last = row.to(torch.float32)  # (the row itself: AOTAutograd returns it made again, without unbind's mark)
    last[last > 1] = x.max()
    return last


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_write_autograd_refuses_raises_as_in_eager(backend):
    # fuzz 9625 of seed 3200000: that wording of autograd's refusal was not known, and under aot_eager the graph's
    # row (made again from its base) took the write
    differential(
        write_grad_into_a_row_without_grad,
        (torch.randn(3, 4, requires_grad=True) * 1, torch.randn(4, 4)),
        backend=backend,
    )
    differential(write_into_a_row, (torch.randn(3, 4, requires_grad=True),), backend=backend)
    differential(write_into_a_row, (torch.randn(3, 4),), backend=backend)  # no autograd: the rows are written
    differential(write_into_a_row_caught, (torch.randn(3, 4, requires_grad=True), []), backend=backend)
    differential(use_a_row_after_writing_the_base, (torch.randn(3, 4, requires_grad=True), []), backend=backend)
    differential(use_a_row_after_writing_the_base, (torch.randn(3, 4), []), backend=backend)
