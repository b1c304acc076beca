"""Graph breaks: breaks inside loops.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit import break_resume

from tests.graph_breaks.harness import brk, differential, observe_events
from tests.helpers import targets


# ---------------------------------------------------------------------------------------------
# hard cases
# ---------------------------------------------------------------------------------------------

# --- loops ---


def loop_for_range(x, n):
    acc = x * 0
    for i in range(n):
        acc = acc + x * i
        brk()
        acc = acc * 2
    return acc


def loop_for_list(x, ts):
    acc = x * 0
    for t in ts:
        acc = acc + t
        brk()
        acc = acc - 1
    return acc


def loop_enumerate_zip(x, ts, ks):
    acc = x * 0
    for i, (t, k) in enumerate(zip(ts, ks)):
        acc = acc + t * k
        brk()
        acc = acc + i
    return acc


def loop_dict_items(x, d):
    acc = x * 0
    for key, value in d.items():
        acc = acc + value
        brk()
        acc = acc * len(key)
    return acc


def loop_tensor_rows(x):
    out = []
    for row in x:
        r = row * 2
        if r.sum() > 0:
            out.append(r)
        else:
            out.append(-r)
    return torch.stack(out)


def loop_tensor_rows_brk(x):
    total = x[0] * 0
    for row in x:
        total = total + row
        brk()
        total = total * 0.5
    return total


def loop_while_tensor_cond(x):
    i = 0
    while x.sum() < 10:
        x = x + 1
        i += 1
    return x, i


def loop_while_brk(x, n):
    i = 0
    while i < n:
        x = x * 1.5
        brk()
        i += 1
    return x, i


def loop_nested(x, n):
    acc = x * 0
    for i in range(n):
        for j in range(2):
            acc = acc + i * j
            if acc.sum() > 3:
                acc = acc - 1
    return acc


LOOP_CASES = [
    (loop_for_range, (torch.randn(3), 4)),
    (loop_for_range, (torch.randn(3), 0)),
    (loop_for_list, (torch.randn(3), [torch.randn(3) for _ in range(3)])),
    (loop_enumerate_zip, (torch.randn(3), [torch.randn(3) for _ in range(3)], [1, 2, 3])),
    (loop_dict_items, (torch.randn(3), {"a": torch.randn(3), "bb": torch.randn(3)})),
    (loop_tensor_rows, (torch.randn(5, 3),)),
    (loop_tensor_rows_brk, (torch.randn(4, 3),)),
    (loop_while_tensor_cond, (torch.randn(3),)),
    (loop_while_brk, (torch.randn(3), 3)),
    (loop_nested, (torch.ones(3) * 0.1, 3)),
]


@pytest.mark.parametrize("fn, args", LOOP_CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(LOOP_CASES)])
def test_break_in_loop(fn, args):
    differential(fn, args, observe=observe_events, repeat=2)


@pytest.mark.parametrize(
    "fn, args",
    [
        (loop_for_range, (torch.randn(3), 4)),
        (loop_for_list, (torch.randn(3), [torch.randn(3) for _ in range(3)])),
        (loop_tensor_rows_brk, (torch.randn(4, 3),)),
        (loop_while_brk, (torch.randn(3), 3)),
    ],
    ids=["range", "list", "tensor_rows", "while"],
)
def test_loop_continuation_is_captured(fn, args):
    """The continuation after a break inside a loop body is itself captured: the op after
    `brk()` (first line of the continuation) lands in a graph, not only in Python."""
    out = framejit.explain(fn)(*args)  # first, on a fresh cache
    assert out.graph_break_count >= 2, "the continuation's own trace reaches the next brk()"
    framejit.reset()
    cnt = differential(fn, args, observe=observe_events)
    assert cnt.frame_count >= 2, [targets(g) for g in cnt.graphs]


def test_long_loop_with_break_does_not_recurse():
    """A break in each of 3000 iterations must not nest 3000 continuation frames (RecursionError)."""
    differential(loop_for_range, (torch.randn(3), 3000), observe=observe_events)
    differential(loop_while_brk, (torch.randn(3), 3000), observe=observe_events)


# ---------------------------------------------------------------------------------------------
# continuations are cached per (code, offset, stack layout): a loop resumes at one place


def test_loop_break_reuses_one_continuation():
    code = loop_while_brk.__code__
    differential(loop_while_brk, (torch.randn(3), 6), observe=observe_events)
    assert len(break_resume._RESUME_CODES.get(code, {})) == 1, "every iteration resumes at the same place"


def _writes_into_rows(x):
    t = torch.sin(x)
    for row in t:  # the rows are unbind's views, as Tensor.__iter__ makes them
        row[-1].add_(1)
    return t


def test_rows_of_an_iterated_tensor_are_unbinds_views():
    # autograd refuses an in-place write into a view of a multi-output view (unbind), not into a plain select
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="function that returns multiple views") as eager_error:
        _writes_into_rows(x)
    with pytest.raises(RuntimeError) as error:
        framejit.compile(_writes_into_rows, backend="eager")(x)
    assert str(error.value) == str(eager_error.value)
    with torch.no_grad():
        torch.testing.assert_close(framejit.compile(_writes_into_rows, backend="eager")(x), _writes_into_rows(x))
