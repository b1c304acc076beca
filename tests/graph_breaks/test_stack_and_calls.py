"""Graph breaks: values of every kind on the stack at a break, multiple breaks and nested calls, and
calls at the break.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import operator

import pytest
import torch

import framejit

from tests.graph_breaks.harness import differential, opaque_kw, opaque_star, plus100, rec
from tests.helpers import line_of, targets


# --- values of every kind on the stack ---


def combine(tup, lst, dct, tensor, fn, method, it, broken, *, scale):
    total = tensor + tup[0] * tup[1] + lst[0] * lst[1] + dct["k"] * dct["n"]
    total = total + fn(tensor) + method(tensor)
    for t in it:
        total = total + t
    return total + broken * scale


def stack_kinds(x, y):
    out = combine(
        (y, 2),
        [y, 3.0],
        {"k": y, "n": 4},
        y * 5,
        lambda t: t * 6,
        y.mul,
        iter([x, y]),
        plus100(x),
        scale=y * 7,
    )
    return out


def stack_method_null(x, lst):
    lst.append(plus100(x))  # method call: [list.append, self] below the break
    return torch.cat([x, plus100(x * 2), x + 1]).sum() + len(lst)


def stack_in_comprehension(x):
    return [plus100(t) * 2 for t in (x, x + 1, x * 3)]


def stack_in_fstring(x):
    y = x + 1
    label = f"{y.shape[0]}-{plus100(y).sum().item() > 0}-{y.dtype}"
    return y, label


def stack_binary_operands(x):
    y = x * 2
    return y + (x - 1) * plus100(y) - torch.relu(plus100(x))


STACK_CASES = [
    (stack_kinds, (torch.randn(3), torch.randn(3))),
    (stack_method_null, (torch.randn(3), [1])),
    (stack_in_comprehension, (torch.randn(3),)),
    (stack_in_fstring, (torch.randn(3),)),
    (stack_binary_operands, (torch.randn(3),)),
]


@pytest.mark.parametrize("fn, args", STACK_CASES, ids=[f.__name__ for f, _ in STACK_CASES])
def test_values_on_stack_at_break(fn, args):
    cnt = differential(fn, args, repeat=2)
    assert cnt.frame_count >= 1


def test_stack_kinds_graphs():
    cnt = differential(stack_kinds, (torch.randn(3), torch.randn(3)))
    # before the break: [mul] (y * 5, on the stack); the continuation computes y * 7 and inlines
    # combine whole (its lambda, bound method and iterator arguments included): one more graph
    assert cnt.frame_count == 2, [targets(g) for g in cnt.graphs]


# --- multiple breaks, nested calls ---


def multiple_breaks(x, log):
    a = x + 1
    rec(log, 1)
    b = a * 2
    rec(log, 2)
    c = b - 3
    rec(log, 3)
    return c


def test_multiple_breaks_in_one_function():
    cnt = differential(multiple_breaks, (torch.randn(3), []), repeat=2)
    # [add], [mul], [sub]; the last continuation only returns c: no graph
    assert [targets(g) for g in cnt.graphs] == [[operator.add], [operator.mul], [operator.sub]]
    out = framejit.explain(multiple_breaks)(torch.randn(3), [])
    assert out.graph_count == 3 and out.graph_break_count == 3
    assert [r.user_stack[-1].lineno for r in out.break_reasons] == [
        line_of(multiple_breaks, f"rec(log, {i})") for i in (1, 2, 3)
    ]


def level3(x, log):
    y = x * 3
    rec(log, "l3")
    return y + 3


def level2(x, log):
    y = x * 2
    z = level3(y, log)
    return z + 2


def level1(x, log):
    y = x + 1
    z = level2(y, log)
    return z * 5


def test_break_three_levels_deep():
    cnt = differential(level1, (torch.randn(3), []), repeat=2)
    # each of level1, level2, level3 compiles the graph before its break and its continuation
    assert cnt.frame_count == 6, [targets(g) for g in cnt.graphs]
    out = framejit.explain(level1)(torch.randn(3), [])
    assert out.graph_count == 6 and out.graph_break_count == 3
    rec_line = line_of(level3, 'rec(log, "l3")')
    assert [(f.name, f.lineno) for f in out.break_reasons[0].user_stack] == [
        ("level1", line_of(level1, "z = level2(y, log)")),
        ("level2", line_of(level2, "z = level3(y, log)")),
        ("level3", rec_line),
    ]
    assert all(r.user_stack[-1].lineno == rec_line for r in out.break_reasons)


# --- calls at the break ---


def kw_call_break(x):
    y = x + 1
    z = opaque_kw(y, scale=3, shift=x)
    return z * 2


def star_call_break(x):
    args = (x + 1, 3)
    z = opaque_star(*args)
    return z * 2


def starstar_call_break(x):
    kw = {"scale": 2, "shift": x}
    z = opaque_kw(x * 2, **kw)
    return z - 1


def star_and_kw_call_break(x):
    args = [x, x + 1]
    kw = {"a": 1}
    z = opaque_star(*args, b=2, **kw)
    return z / 2


CALL_CASES = [kw_call_break, star_call_break, starstar_call_break, star_and_kw_call_break]


@pytest.mark.parametrize("fn", CALL_CASES, ids=[f.__name__ for f in CALL_CASES])
def test_call_forms_at_break(fn):
    cnt = differential(fn, (torch.randn(3),), repeat=2)
    assert cnt.frame_count == 2  # one op before, one after
