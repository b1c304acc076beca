"""Graph breaks: what breaks a graph, and where the break is reported.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import copy
import functools
import itertools
import math
import operator
import zlib

import pytest
import torch

import framejit

from tests.graph_breaks.harness import brk, differential, observe_events, plus100
from tests.helpers import Box, line_of, targets


THIS_FILE = __file__  # the file the functions below are defined in, as tracebacks and errors name it


# ---------------------------------------------------------------------------------------------
# what breaks
# ---------------------------------------------------------------------------------------------


def b_item(x):
    y = x + 1
    v = y.sum().item()  # break-here
    return y * v


def b_tolist(x):
    y = x * 2
    values = y.tolist()  # break-here
    return y + values[0]


def b_bool(x):
    y = x.sum() > 0
    flag = bool(y)  # break-here
    return x * 2 if flag else x * 3


def b_int(x):
    y = x.sum() * 0 + 3
    k = int(y)  # break-here
    return x * k + 1


def b_float(x):
    y = x.sum()
    v = float(y)  # break-here
    return x * v


def b_print(x):
    y = x + 1
    print("b_print says", 42)  # break-here
    return y * 2


def b_math_floor(x):
    y = x + 1.5
    k = math.floor(y.sum())  # break-here
    return y * k


def b_c_function(x):
    y = x + 1
    crc = zlib.crc32(b"framejit")  # break-here
    return y * (crc % 7)


def b_disallowed(x):
    y = x + 1
    z = plus100(y)  # break-here
    return z * 2


def b_deepcopy_of_tensors(x):
    y = x + 1
    pair = copy.deepcopy([y, x])  # break-here: a tensor's deep copy is an autograd-aware clone
    return pair[0] * pair[1]


def b_if_tensor(x):
    y = x - 1
    if y.sum() > 0:  # break-here
        return y * 2
    return y * 3


# (fn, inputs, reason fragment); each has one tensor op before the break and one after: two graphs
SIMPLE_BREAKS = [
    (b_item, "item"),
    (b_tolist, "tolist"),
    (b_bool, "bool"),
    (b_int, "int"),
    (b_float, "float"),
    (b_print, "print"),
    (b_math_floor, "floor"),
    (b_c_function, "crc32"),
    (b_disallowed, "plus100"),
    (b_deepcopy_of_tensors, "copying"),
    (b_if_tensor, "tensor"),
]


@pytest.mark.parametrize("fn, fragment", SIMPLE_BREAKS, ids=[f.__name__ for f, _ in SIMPLE_BREAKS])
def test_simple_break(fn, fragment, capsys):
    inputs = [(torch.tensor([0.5, 1.0, 2.0]),), (torch.tensor([-3.0, 1.0, -2.0]),)]
    cnt = differential(fn, *inputs[:1])
    # the graph before the break and the graph of the continuation
    assert cnt.frame_count == 2, [targets(g) for g in cnt.graphs]
    out = framejit.explain(fn)(*inputs[0])
    assert out.graph_count == 2 and out.graph_break_count == 1
    reason = out.break_reasons[0]
    assert fragment in reason.reason, reason.reason
    frame = reason.user_stack[-1]
    assert (frame.filename, frame.name, frame.lineno) == (THIS_FILE, fn.__name__, line_of(fn, "# break-here"))
    differential(fn, *inputs, repeat=2)  # other values (branches), and cache hits on repeat
    capsys.readouterr()


def test_print_output_is_the_same(capsys):
    differential(b_print, (torch.ones(2),))
    out = capsys.readouterr().out
    assert out.count("b_print says 42\n") == 2  # once eager, once compiled


def test_functools_reduce_with_tensor_lambda_is_traced():
    def fn(x):
        y = x + 1
        z = functools.reduce(lambda p, q: p * q, [x, y, y])
        return z + 1

    cnt = differential(fn, (torch.randn(3),))
    # reduce over a list folds now, calling the lambda on each pair: one graph, no break
    assert cnt.frame_count == 1
    assert [targets(g) for g in cnt.graphs] == [[operator.add, operator.mul, operator.mul, operator.add]]
    out = framejit.explain(fn)(torch.randn(3))
    assert out.graph_break_count == 0


def test_itertools_chain_over_an_iterator_breaks_the_graph():
    def fn(x):
        return sum(itertools.chain(iter([x, x + 1]), [x * 2]))

    differential(fn, (torch.randn(3),))  # equal to eager, with the break
    out = framejit.explain(fn)(torch.randn(3))
    assert out.graph_break_count >= 1 and "itertools.chain over an iterator" in out.break_reasons[0].reason


def test_methodcaller_is_a_break():
    def fn(x):
        y = x + 1
        m = operator.methodcaller("add", 1)
        return m(y) * 2

    cnt = differential(fn, (torch.randn(3),))
    assert cnt.frame_count >= 1
    out = framejit.explain(fn)(torch.randn(3))
    assert out.graph_break_count >= 1


def test_raise_and_catch_in_compiled_function():
    def fn(x, log):
        y = x + 1
        try:
            log.append("try")
            raise ValueError("boom")
        except ValueError as e:
            log.append(str(e))
            y = y * 2
        return y + 1

    cnt = differential(fn, (torch.randn(3), []), repeat=2)
    assert cnt.frame_count == 1  # raised and caught in the trace: one graph (the log writes replayed after it)
    out = framejit.explain(fn)(torch.randn(3), [])
    assert out.graph_break_count == 0


def test_del_attribute_breaks():
    def fn(x, obj):
        y = x + 1
        del obj.attr  # break-here
        return y * 2

    cnt = differential(fn, (torch.randn(3), Box(attr=1, other=2)), repeat=2)
    # DELETE_ATTR is not traced: [add] before it, [mul] after it
    assert cnt.frame_count == 2
    out = framejit.explain(fn)(torch.randn(3), Box(attr=1))
    assert out.graph_break_count == 1
    assert out.break_reasons[0].user_stack[-1].lineno == line_of(fn, "# break-here")


def test_unbreakable_frame_runs_once_as_python():
    """Whatever framejit does with a frame it cannot break, side effects happen exactly once."""

    def fn(x, log, obj):
        log.append("start")
        y = x + 1
        del obj.attr
        log.append("end")
        return y * 2

    differential(fn, (torch.randn(3), [], Box(attr=1)), repeat=2)


def callee_breaks(x):
    y = x * 2
    brk()
    return y + 1


def caller_of_breaking_callee(x):
    a = x - 1
    b = callee_breaks(a)
    return b * 3


def test_break_inside_inlined_function():
    cnt = differential(caller_of_breaking_callee, (torch.randn(3),), observe=observe_events)
    # caller: [sub] then break at the call; callee as its own frame: [mul], break, [add];
    # caller's continuation: [mul]
    assert cnt.frame_count == 4
    assert [targets(g) for g in cnt.graphs] == [[operator.sub], [operator.mul], [operator.add], [operator.mul]]
    out = framejit.explain(caller_of_breaking_callee)(torch.randn(3))
    assert out.graph_count == 4 and out.graph_break_count == 2
    call_line = line_of(caller_of_breaking_callee, "b = callee_breaks(a)")
    brk_line = line_of(callee_breaks, "brk()")
    first, second = out.break_reasons
    assert [(f.name, f.lineno) for f in first.user_stack] == [
        ("caller_of_breaking_callee", call_line),
        ("callee_breaks", brk_line),
    ]
    assert [(f.name, f.lineno) for f in second.user_stack] == [("callee_breaks", brk_line)]


def gen_with_break(x):
    yield x + 1
    brk()
    yield x * 2


def test_generator_function_runs_as_python():
    def fn(x):
        y = x - 1
        return [t + y for t in gen_with_break(x)]

    differential(fn, (torch.randn(3),), observe=observe_events, repeat=2)
