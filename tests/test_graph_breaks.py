"""Graph breaks (issue 3): continuations, explain(), fullgraph errors, the debug view.

Every behavioural test is differential: the function compiled with framejit must give
what eager Python gives (values, dtypes, requires_grad, nesting), leave its arguments
and the globals it touches in the same state, raise the same exception, and leave
grad mode as eager does. Graph counts are derived in the comments next to each
assertion from the rule "a frame (or continuation) compiles one graph iff the part
traced before its break, or up to its return, contains a tensor op".
"""
from __future__ import annotations

import ast
import contextlib
import copy
import dis
import functools
import inspect
import linecache
import logging
import math
import operator
import textwrap
import traceback
import types
import zlib

import pytest
import torch

import framejit
from framejit import eval_frame, graph_break
from framejit._C import _hook
from framejit.testing import CompileCounter, EagerAndRecordGraphs, same

from tests import break_corpus

THIS_FILE = __file__

# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------


def clone(value):
    """Fresh copies of tensors and containers; other objects shallow-copied when they have a __dict__."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, Box):
        return Box(**clone(vars(value)))
    return value


class Box:
    """A plain user object (attributes compared by value)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __eq__(self, other):
        return type(other) is Box and _equal(vars(self), vars(other))

    def __repr__(self):
        return f"Box({vars(self)!r})"


def _equal(a, b) -> bool:
    try:
        assert_equal(a, b)
        return True
    except AssertionError:
        return False


def assert_equal(actual, expected, path="result"):
    """Recursive equality: tensors by dtype/shape/requires_grad/values; containers by type and items."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__} instead of a tensor"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}"
        assert same(actual.detach(), expected.detach(), equal_nan=True), f"{path}: {actual} != {expected}"
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (x, y) in enumerate(zip(actual, expected)):
            assert_equal(x, y, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_equal(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, float) and isinstance(actual, float):
        assert same(actual, expected, equal_nan=True), f"{path}: {actual} != {expected}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r} != {expected!r}"


def _run(fn, args, kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 (compared with eager's)
        return ("raised", e)


class _InternalErrors(logging.Handler):
    """Collects framejit's 'internal error ... running it as Python' warnings: a fallback that hides a bug."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "internal error" in message:
            self.messages.append(message)


@contextlib.contextmanager
def no_internal_errors():
    handler = _InternalErrors()
    logger = logging.getLogger("framejit")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not handler.messages, handler.messages


def differential(fn, *arg_sets, backend=None, kwargs=None, before=None, observe=None, repeat=1):
    """Run `fn` eagerly and compiled (same backend object for every call) on clones of each
    argument tuple; compare results / exceptions, the arguments afterwards, `observe()` (global
    state) and grad mode afterwards. Returns the backend (a CompileCounter by default)."""
    backend = backend if backend is not None else CompileCounter()
    compiled = framejit.optimize(backend)(fn)
    kwargs = kwargs or {}
    for _ in range(repeat):
        for args in arg_sets:
            results = []
            for f in (fn, compiled):
                EVENTS.clear()
                if before is not None:
                    before()
                call_args, call_kwargs = clone(args), clone(kwargs)
                with no_internal_errors():
                    outcome = _run(f, call_args, call_kwargs)
                seen = observe() if observe is not None else None
                results.append((outcome, call_args, call_kwargs, seen, torch.is_grad_enabled()))
            (e_out, e_args, e_kw, e_seen, e_grad), (c_out, c_args, c_kw, c_seen, c_grad) = results
            assert c_out[0] == e_out[0], f"eager {e_out}, compiled {c_out}"
            if e_out[0] == "raised":
                assert type(c_out[1]) is type(e_out[1]) and str(c_out[1]) == str(e_out[1]), (e_out, c_out)
            else:
                assert_equal(c_out[1], e_out[1])
            assert_equal(c_args, e_args, "arguments after the call")
            assert_equal(c_kw, e_kw, "keyword arguments after the call")
            assert_equal(c_seen, e_seen, "observed state after the call")
            assert c_grad == e_grad, "grad mode after the call"
    return backend


def line_of(fn, text, nth=0):
    """Absolute line number of the `nth` line of fn's source containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(lines) if text in line]
    assert len(hits) > nth, f"{text!r} not in {fn.__name__}"
    return hits[nth]


def graph_ops(gm):
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def targets(gm):
    return [n.target for n in graph_ops(gm)]


# Opaque helpers: calls to them are graph breaks (disallow_in_graph); framejit.disable(recursive=False)
# keeps their own frames from being captured, so they behave exactly like an opaque library call.
EVENTS: list = []


def opaque(fn):
    framejit.disable(fn, recursive=False)
    framejit.disallow_in_graph(fn)
    return fn


@opaque
def brk():
    EVENTS.append("brk")


@opaque
def rec(log, item):
    log.append(item)


@opaque
def plus100(t):
    return t + 100


@opaque
def opaque_kw(t, *, scale=1, shift=0):
    return t * scale + shift


@opaque
def opaque_star(*args, **kwargs):
    return sum(a for a in args if isinstance(a, torch.Tensor)) * len(args) + len(kwargs)


@opaque
def push(lst, value):
    lst.append(value)
    lst.insert(0, value * 10)


@opaque
def raise_value_error(log):
    log.append("raiser ran")
    raise ValueError("bad value from opaque code")


@opaque
def raise_key_error(t):
    raise KeyError("nope")


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


def observe_events():
    return list(EVENTS)


# ---------------------------------------------------------------------------------------------
# 1. the seeds' toy example
# ---------------------------------------------------------------------------------------------


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_toy_example_first_graph_is_everything_before_the_branch():
    rec_graphs = EagerAndRecordGraphs()
    f = framejit.optimize(rec_graphs)(toy_example)
    a, b = torch.randn(10), torch.ones(10)
    assert_equal(f(a, b), toy_example(a, b))
    first = rec_graphs.graphs[0]
    assert targets(first) == [torch.abs, operator.add, operator.truediv, "sum", operator.lt]
    ops = graph_ops(first)
    assert [n.op for n in ops] == ["call_function"] * 3 + ["call_method", "call_function"]
    placeholders = [n for n in first.graph.nodes if n.op == "placeholder"]
    assert [p.name for p in placeholders] == ["a", "b"]
    abs_, add, div, sum_, lt = ops
    assert abs_.args == (placeholders[0],) and add.args == (abs_, 1) and div.args == (placeholders[0], add)
    assert sum_.args == (placeholders[1],) and lt.args == (sum_, 0)
    (output,) = [n for n in first.graph.nodes if n.op == "output"]
    assert set(output.args[0]) == {div, lt}, "the graph returns x and the branch condition"


def test_toy_example_continuation_graphs():
    rec_graphs = EagerAndRecordGraphs()
    f = framejit.optimize(rec_graphs)(toy_example)
    a = torch.randn(10)
    neg, pos = -torch.ones(10), torch.ones(10)
    assert_equal(f(a, neg), toy_example(a, neg))  # branch taken: first graph + the `b * -1; x * b` graph
    assert len(rec_graphs.graphs) == 2
    taken = rec_graphs.graphs[1]
    assert targets(taken) == [operator.mul, operator.mul]
    names = {n.name: n for n in taken.graph.nodes if n.op == "placeholder"}
    assert set(names) == {"b", "x"}
    m1, m2 = graph_ops(taken)
    assert m1.args == (names["b"], -1), "b = b * -1"
    assert m2.args == (names["x"], m1), "x * b with the new b"
    assert_equal(f(a, pos), toy_example(a, pos))  # branch not taken: one more graph, `x * b`
    assert len(rec_graphs.graphs) == 3
    not_taken = rec_graphs.graphs[2]
    assert targets(not_taken) == [operator.mul]
    names = {n.name: n for n in not_taken.graph.nodes if n.op == "placeholder"}
    assert set(names) == {"b", "x"}
    assert set(graph_ops(not_taken)[0].args) == {names["x"], names["b"]}


def test_toy_example_100_random_calls():
    rec_graphs = EagerAndRecordGraphs()
    inputs = [(torch.randn(10), torch.randn(10)) for _ in range(100)]
    with framejit.optimize(rec_graphs):
        got = [toy_example(a, b) for a, b in inputs]
    for (a, b), r in zip(inputs, got):
        assert_equal(r, toy_example(a, b))
    signs = {bool(b.sum() < 0) for _, b in inputs}
    assert signs == {True, False}  # both branches were taken (seeded)
    # the first graph, plus one continuation graph per branch outcome; nothing recompiles
    assert len(rec_graphs.graphs) == 3


# ---------------------------------------------------------------------------------------------
# 2. the notebook's foo1 / foo2
# ---------------------------------------------------------------------------------------------


def foo1(a: torch.tensor, b: torch.tensor):
    x = a + b
    if b.sum() < 0:
        x = x * -1
    return x


def foo2(a: torch.tensor, b: torch.tensor):
    x = a + b
    if b.sum() < 0:
        x = x * -1
    if a.sum() < 0:
        x = x * -2
    x = 2 * x
    return x


def test_foo1_both_signs():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo1)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    assert_equal(f(a, b), foo1(a, b))
    # graph [add, sum, lt]; the not-taken continuation is `return x`: no tensor op, no graph
    assert cnt.frame_count == 1 and cnt.op_count == 3
    assert_equal(f(a, -b), foo1(a, -b))
    # the first entry hits; the taken continuation `x = x * -1` compiles [mul]
    assert cnt.frame_count == 2 and cnt.op_count == 4
    for args in ((-a, b), (-a, -b), (a, b), (a, -b)):  # the sign of a is irrelevant to foo1
        assert_equal(f(*args), foo1(*args))
    assert cnt.frame_count == 2


def test_foo2_all_four_sign_combinations():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo2)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    expected_counts = [
        # (a, b): [add, sum, lt]; continuation at `if a.sum()`: [sum, lt]; continuation at `x = 2 * x`: [mul]
        ((a, b), 3),
        # (-a, b): first two entries hit; continuation at `x = x * -2`: [mul, mul]
        ((-a, b), 4),
        # (a, -b): continuation at `x = x * -1`: [mul, sum, lt]; then `x = 2 * x` is the same
        # continuation code as in the first call (same offset, same live locals): a cache hit
        ((a, -b), 5),
        # (-a, -b): every continuation it reaches is already compiled
        ((-a, -b), 5),
    ]
    for args, count in expected_counts:
        assert_equal(f(*args), foo2(*args))
        assert cnt.frame_count == count, (args, cnt.frame_count)


def test_foo2_other_order():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo2)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    # (-a, -b): [add, sum, lt], [mul, sum, lt], [mul, mul]
    assert_equal(f(-a, -b), foo2(-a, -b))
    assert cnt.frame_count == 3
    # (a, b): [sum, lt] at `if a.sum()`, [mul] at `x = 2 * x`
    assert_equal(f(a, b), foo2(a, b))
    assert cnt.frame_count == 5
    for args in ((-a, b), (a, -b)):
        assert_equal(f(*args), foo2(*args))
    assert cnt.frame_count == 5
    framejit.reset()  # a reset forgets everything: the same sequence compiles again from scratch
    cnt2 = CompileCounter()
    assert_equal(framejit.optimize(cnt2)(foo2)(-a, -b), foo2(-a, -b))
    assert cnt2.frame_count == 3


# ---------------------------------------------------------------------------------------------
# 3. explain
# ---------------------------------------------------------------------------------------------


def test_explain_toy_example():
    a, b = torch.randn(10), torch.randn(10)
    out = framejit.explain(toy_example)(a, b)
    assert out.graph_count == 2 and len(out.graphs) == 2
    assert out.graph_break_count == 1 and len(out.break_reasons) == 1
    assert out.ops_per_graph[0] == [torch.abs, operator.add, operator.truediv, "sum", operator.lt]
    assert out.op_count == sum(map(len, out.ops_per_graph))
    reason = out.break_reasons[0]
    assert "tensor" in reason.reason.lower()
    last = reason.user_stack[-1]
    assert last.filename == THIS_FILE and last.name == "toy_example"
    assert last.lineno == line_of(toy_example, "if b.sum() < 0:")
    assert last.line.strip() == "if b.sum() < 0:"
    assert out.out_guards, "guards of the compiled frames are reported"
    assert any("'a'" in str(g) for g in out.out_guards)
    text = str(out)
    for heading in ("Graph Count: 2", "Graph Break Count: 1", "Break Reasons:", "Ops per Graph:", "Out Guards:"):
        assert heading in text
    assert text.index("Graph Count") < text.index("Break Reasons") < text.index("Ops per Graph") \
        < text.index("Out Guards")


def test_explain_printed(capsys):
    print(framejit.explain(toy_example)(torch.randn(10), torch.randn(10)))
    printed = capsys.readouterr().out
    assert "Graph Count: 2" in printed and "Graph Break Count: 1" in printed
    assert str(line_of(toy_example, "if b.sum() < 0:")) in printed


def test_explain_positional_form():
    a, b = torch.randn(10), torch.randn(10)
    out = framejit.explain(toy_example, a, b)
    assert out.graph_count == 2 and out.graph_break_count == 1


def test_explain_with_kwargs():
    out = framejit.explain(toy_example)(a=torch.randn(10), b=torch.randn(10))
    assert out.graph_count == 2 and out.graph_break_count == 1


def test_explain_leaves_cache_for_later_compiles():
    a, b = torch.randn(10), torch.randn(10)
    framejit.explain(toy_example)(a, b)
    cnt = CompileCounter()
    assert_equal(framejit.optimize(cnt)(toy_example)(a, b), toy_example(a, b))
    assert cnt.frame_count == 2, "explain left nothing in the cache that stops a later compile"


def test_explain_leaves_existing_entries():
    a, b = torch.randn(10), torch.randn(10)
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(toy_example)
    f(a, b)
    count = cnt.frame_count
    assert count == 2
    framejit.explain(toy_example)(a, b)
    framejit.explain(toy_example)(a, b)
    assert_equal(f(a, b), toy_example(a, b))
    assert cnt.frame_count == count, "entries compiled before explain are still there"


def early_exit(x, flag):
    if flag:
        return x + 1
    return None


def test_nothing_to_compile_does_not_stop_later_compiles():
    """A call of a code that has entries but, this time, nothing to compile (a continuation whose
    rest has no tensor op, say) must not make the code run as Python for every later input."""
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(early_exit)
    f(torch.ones(2), True)  # [add]
    f(torch.ones(2), False)  # nothing to compile
    assert_equal(f(torch.ones(3), True), early_exit(torch.ones(3), True))  # a new shape: [add] again
    assert cnt.frame_count == 2
    assert framejit.explain(early_exit)(torch.ones(4), True).graph_count == 1


def break_then_no_tensor(x, n):
    y = x * 2
    brk()
    out = [n] * n  # the continuation touches no tensor
    return out


def test_continuation_without_tensors_is_not_an_internal_error():
    cnt = differential(break_then_no_tensor, (torch.randn(3), 2), (torch.randn(3), 3), repeat=2)
    assert cnt.frame_count == 1  # [mul]; the continuation has nothing to compile


def test_explain_no_break_function():
    def no_break(x):
        return torch.relu(x) + 1

    out = framejit.explain(no_break)(torch.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.break_reasons == []
    cnt = CompileCounter()
    framejit.optimize(cnt)(no_break)(torch.randn(3))
    assert cnt.frame_count == 1


def test_explain_twice_reports_the_same():
    a, b = torch.randn(10), -torch.ones(10)
    one = framejit.explain(toy_example)(a, b)
    two = framejit.explain(toy_example)(a, b)
    assert (one.graph_count, one.graph_break_count, one.ops_per_graph) == \
        (two.graph_count, two.graph_break_count, two.ops_per_graph)


# ---------------------------------------------------------------------------------------------
# 4. fullgraph / nopython errors
# ---------------------------------------------------------------------------------------------


def _assert_names_source(err, fn, text):
    msg = str(err)
    line = line_of(fn, text)
    assert THIS_FILE in msg, msg
    assert f"line {line}" in msg, msg
    assert text in msg, msg


def test_fullgraph_toy_example_raises_user_error():
    f = framejit.compile(toy_example, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(framejit.exc.UserError) as info:
        f(torch.randn(10), torch.randn(10))
    assert isinstance(info.value, framejit.exc.Unsupported)
    _assert_names_source(info.value, toy_example, "if b.sum() < 0:")
    assert "toy_example" in str(info.value)
    msg = str(info.value).lower()
    assert "fullgraph" in msg or "torch.cond" in msg, "the error suggests what to do"


@pytest.mark.parametrize("make", ["nopython", "optimize_assert"])
def test_nopython_variants_raise(make):
    cnt = CompileCounter()
    ctx = framejit.optimize(cnt, nopython=True) if make == "nopython" else framejit.optimize_assert(cnt)
    with pytest.raises(framejit.exc.Unsupported) as info:
        ctx(toy_example)(torch.randn(10), torch.randn(10))
    _assert_names_source(info.value, toy_example, "if b.sum() < 0:")


def fg_print(x, log):
    log.append("before")
    y = x + 1
    print("hello from fg_print")
    return y


def fg_disallowed(x, log):
    log.append("before")
    y = x + 1
    brk()
    return y


def fg_item(x, log):
    log.append("before")
    y = x.sum() + 1
    v = y.item()
    return x * v


@pytest.mark.parametrize("fn, text", [(fg_print, 'print("hello from fg_print")'), (fg_disallowed, "brk()"),
                                      (fg_item, "v = y.item()")])
def test_fullgraph_other_breaks(fn, text, capsys):
    log = []
    f = framejit.compile(fn, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(framejit.exc.Unsupported) as info:
        f(torch.randn(3), log)
    _assert_names_source(info.value, fn, text)
    assert fn.__name__ in str(info.value)
    assert log == [], "under fullgraph nothing of the function ran"
    assert EVENTS == []
    assert "hello from fg_print" not in capsys.readouterr().out


def test_fullgraph_error_is_raised_again_on_next_call():
    f = framejit.compile(fg_disallowed, backend=CompileCounter(), fullgraph=True)
    for _ in range(2):
        with pytest.raises(framejit.exc.Unsupported):
            f(torch.randn(3), [])


def test_fullgraph_break_inside_inlined_function_names_both_frames():
    def helper(t):
        return t.sum().item()

    def outer(x):
        y = x * 2
        return y + helper(y)

    f = framejit.compile(outer, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(framejit.exc.Unsupported) as info:
        f(torch.randn(3))
    msg = str(info.value)
    assert "outer" in msg and "helper" in msg
    assert f"line {line_of(outer, 'return y + helper(y)')}" in msg
    assert f"line {line_of(helper, 'return t.sum().item()')}" in msg


# ---------------------------------------------------------------------------------------------
# 5. what breaks
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


def b_stdlib_copy(x):
    y = x + 1
    pair = copy.copy([y, x])  # break-here
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
    (b_stdlib_copy, "copy"),
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


def test_functools_reduce_with_tensor_lambda():
    def fn(x):
        y = x + 1
        z = functools.reduce(lambda p, q: p * q, [x, y, y])
        return z + 1

    cnt = differential(fn, (torch.randn(3),))
    # [add] before the break; the lambda's own frame, called from reduce, is captured: [mul]
    # (its second call hits the same entry); [add] after the break
    assert cnt.frame_count == 3
    assert [targets(g) for g in cnt.graphs] == [[operator.add], [operator.mul], [operator.add]]
    out = framejit.explain(fn)(torch.randn(3))
    assert out.graph_break_count == 1 and "reduce" in out.break_reasons[0].reason


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
    assert cnt.frame_count >= 1
    out = framejit.explain(fn)(torch.randn(3), [])
    assert out.graph_break_count >= 1


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
    assert [(f.name, f.lineno) for f in first.user_stack] == [("caller_of_breaking_callee", call_line),
                                                              ("callee_breaks", brk_line)]
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


# ---------------------------------------------------------------------------------------------
# 6. hard cases
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


@pytest.mark.parametrize("fn, args", [
    (loop_for_range, (torch.randn(3), 4)),
    (loop_for_list, (torch.randn(3), [torch.randn(3) for _ in range(3)])),
    (loop_tensor_rows_brk, (torch.randn(4, 3),)),
    (loop_while_brk, (torch.randn(3), 3)),
], ids=["range", "list", "tensor_rows", "while"])
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


# --- grad mode and with-blocks ---


def nograd_break(x):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        brk()
        w = z + y
        inside = torch.is_grad_enabled()
    v = w + y
    return y, z, w, v, inside


def nograd_tensor_branch(x):
    with torch.no_grad():
        z = x * 3
        if z.sum() > 0:
            z = z + 1
        w = z * x
    return z, w, x * 2


def nested_grad_modes(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            brk()
            c = x * 4
            in_enable = torch.is_grad_enabled()
        d = x * 5
        brk()
        e = x * 6
        in_no_grad = torch.is_grad_enabled()
    f = x * 7
    return a, b, c, d, e, f, in_enable, in_no_grad


def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        a = x * 2
        brk()
        b = a + x
    return a, b, x + 1


def break_in_with_of_user_context(x, log):
    class Ctx:
        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, *exc):
            log.append("exit")
            return False

    with Ctx():
        y = x + 1
        rec(log, "inside")
        y = y * 2
    return y


GRAD_CASES = [nograd_break, nograd_tensor_branch, nested_grad_modes, set_grad_enabled_block]


@pytest.mark.parametrize("fn", GRAD_CASES, ids=[f.__name__ for f in GRAD_CASES])
@pytest.mark.parametrize("outer", ["grad", "no_grad"])
def test_break_in_grad_mode_blocks(fn, outer):
    args = [(torch.randn(3, requires_grad=True),), (-torch.ones(3, requires_grad=True),)]
    if outer == "grad":
        differential(fn, *args, observe=observe_events, repeat=2)
    else:
        with torch.no_grad():
            differential(fn, *args, observe=observe_events, repeat=2)
        assert torch.is_grad_enabled()


def test_ops_after_break_in_no_grad_are_still_no_grad():
    cnt = CompileCounter()
    x = torch.randn(3, requires_grad=True)
    y, z, w, v, inside = framejit.optimize(cnt)(nograd_break)(x)
    assert (y.requires_grad, z.requires_grad, w.requires_grad, v.requires_grad) == (True, False, False, True)
    assert inside is False and torch.is_grad_enabled()
    # before the break: [mul, mul] (+ grad-mode switches); continuation: w, v
    all_targets = [t for g in cnt.graphs for t in targets(g)]
    assert all_targets.count(operator.add) == 2 and cnt.frame_count == 2


def test_break_in_user_context_manager():
    differential(break_in_with_of_user_context, (torch.randn(3), []), repeat=2)


def test_grad_mode_restored_when_break_raises_inside_no_grad():
    def fn(x, log):
        with torch.no_grad():
            y = x * 2
            raise_value_error(log)
            y = y + 1
        return y

    differential(fn, (torch.randn(3, requires_grad=True), []), repeat=2)


# --- try / except / finally ---


def try_except_catches(x, log):
    y = x + 1
    try:
        log.append("before")
        raise_value_error(log)
        log.append("not reached")
        y = y * 100
    except ValueError as e:
        log.append(f"caught {e}")
        y = y * 2
    finally:
        log.append("finally")
        y = y + 0.5
    return y * 3


def try_finally_propagates(x, log):
    y = x + 1
    try:
        log.append("try")
        raise_value_error(log)
    finally:
        log.append("finally")
        y = y * 2
        log.append(y.shape[0])
    return y


def try_except_wrong_type(x, log):
    y = x + 1
    try:
        raise_value_error(log)
    except KeyError:
        log.append("wrong handler")
    finally:
        log.append("finally")
    return y


def try_nested(x, log):
    y = x * 2
    try:
        try:
            rec(log, "inner try")
            raise_value_error(log)
        finally:
            log.append("inner finally")
            y = y + 1
    except ValueError:
        log.append("outer except")
        y = y * 3
    rec(log, "after")
    return y - 1


def try_break_no_exception(x, log):
    y = x + 1
    try:
        rec(log, "in try")
        y = y * 2
    except Exception:
        log.append("never")
    else:
        rec(log, "else")
        y = y + 3
    finally:
        rec(log, "finally")
    return y


def try_in_loop(x, log):
    y = x
    for i in range(3):
        try:
            if i == 1:
                raise_value_error(log)
            rec(log, i)
            y = y + i
        except ValueError:
            log.append("caught")
            y = y * 2
    return y


def try_break_in_handler(x, log):
    y = x + 1
    try:
        raise_value_error(log)
    except ValueError:
        rec(log, "handler")
        y = y * 2
    return y


TRY_CASES = [try_except_catches, try_finally_propagates, try_except_wrong_type, try_nested, try_break_no_exception,
             try_in_loop, try_break_in_handler]


@pytest.mark.parametrize("fn", TRY_CASES, ids=[f.__name__ for f in TRY_CASES])
def test_break_in_try(fn):
    differential(fn, (torch.randn(3), []), repeat=2)


def test_try_except_catches_log_order():
    log = []
    framejit.optimize(CompileCounter())(try_except_catches)(torch.randn(3), log)
    assert log == ["before", "raiser ran", "caught bad value from opaque code", "finally"]


# --- exceptions propagate ---


def user_fn_raises(x):
    y = x + 1
    raise_key_error(y)  # raises-here
    return y


def user_fn_raises_after_break(x):
    y = x + 1
    brk()
    z = y[100]  # raises-here
    return z


@pytest.mark.parametrize("fn, exc_type", [(user_fn_raises, KeyError), (user_fn_raises_after_break, IndexError)])
def test_exception_propagates_with_user_traceback(fn, exc_type):
    differential(fn, (torch.randn(3),))
    f = framejit.optimize(CompileCounter())(fn)
    with pytest.raises(exc_type) as info:
        f(torch.randn(3))
    frames = traceback.extract_tb(info.value.__traceback__)
    line = line_of(fn, "# raises-here")
    assert any(fr.filename == THIS_FILE and fr.lineno == line for fr in frames), frames
    assert any(fr.name == fn.__name__ for fr in frames), frames


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
    assert [r.user_stack[-1].lineno for r in out.break_reasons] == \
        [line_of(multiple_breaks, f"rec(log, {i})") for i in (1, 2, 3)]


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
        ("level1", line_of(level1, "z = level2(y, log)")), ("level2", line_of(level2, "z = level3(y, log)")),
        ("level3", rec_line)]
    assert all(r.user_stack[-1].lineno == rec_line for r in out.break_reasons)


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


# --- mutation by the unsupported part ---


def mutated_argument(x, lst):
    lst.append(x + 1)
    push(lst, x * 2)
    return torch.stack(lst).sum(0) + len(lst)


def mutated_local(x):
    buf = [x]
    push(buf, x * 2)
    buf.append(x - 1)
    push(buf, buf[-1])
    return torch.stack(buf), len(buf)


GLOBAL_LOG: list = []


def mutated_global(x):
    GLOBAL_LOG.append(x + 1)
    push(GLOBAL_LOG, x * 2)
    return GLOBAL_LOG[0] + GLOBAL_LOG[-1] * len(GLOBAL_LOG)


def mutated_dict(x, d):
    d["a"] = x + 1
    opaque_setitem(d, "b", x * 3)
    return d["a"] + d["b"] + len(d)


@opaque
def opaque_setitem(d, k, v):
    d[k] = v
    d.pop("gone", None)


def mutated_object(x, obj):
    obj.value = x + 1
    opaque_setattr(obj)
    return obj.value * obj.extra


@opaque
def opaque_setattr(obj):
    obj.value = obj.value * 10
    obj.extra = 3


def test_unsupported_call_mutates_argument_list():
    differential(mutated_argument, (torch.randn(3), [torch.zeros(3)]), repeat=2)


def test_unsupported_call_mutates_local_list():
    differential(mutated_local, (torch.randn(3),), repeat=2)


def test_unsupported_call_mutates_global_list():
    def reset_log():
        GLOBAL_LOG.clear()
    differential(mutated_global, (torch.randn(3),), before=reset_log, observe=lambda: list(GLOBAL_LOG), repeat=2)


def test_unsupported_call_mutates_dict():
    differential(mutated_dict, (torch.randn(3), {"gone": 1}), repeat=2)


def test_unsupported_call_mutates_object():
    differential(mutated_object, (torch.randn(3), Box(value=None, extra=None)), repeat=2)


def test_side_effects_before_break_are_visible_to_unsupported_code():
    seen = []

    @opaque
    def snapshot(lst, d):
        seen.append((len(lst), sorted(d)))

    def fn(x, lst, d):
        lst.append(x)
        d["new"] = x * 2
        snapshot(lst, d)
        return x + 1

    framejit.optimize(CompileCounter())(fn)(torch.randn(3), [], {})
    assert seen == [(1, ["new"])]


# --- other frames and state across a break ---


def varargs_fn(x, *args, **kwargs):
    y = x + sum(args)
    brk()
    return y * kwargs["k"] + len(args)


def test_break_in_function_with_varargs():
    cnt = differential(varargs_fn, (torch.randn(3), torch.ones(3), 2.0), kwargs={"k": 3}, repeat=2)
    assert cnt.frame_count == 2


def inplace_input(x, y):
    x.add_(1)
    brk()
    y.mul_(x)
    return x * 2


def test_in_place_mutation_of_inputs_across_break():
    differential(inplace_input, (torch.randn(3), torch.randn(3)), repeat=2)


COUNTER = 0


def rebinds_global(x):
    global COUNTER
    COUNTER = COUNTER + 1
    brk()
    COUNTER = COUNTER * 10
    return x * COUNTER


def test_global_rebinding_across_break():
    def reset_counter():
        global COUNTER
        COUNTER = 0
    differential(rebinds_global, (torch.randn(3),), before=reset_counter, observe=lambda: COUNTER)


def unbound_local_at_break(x, flag):
    if flag:
        late = x * 2
    brk()
    if flag:
        return late + 1
    late = x - 1
    return late


def test_local_unbound_at_break():
    differential(unbound_local_at_break, (torch.randn(3), True), (torch.randn(3), False), repeat=2)


def deleted_local(x):
    tmp = x * 2
    del tmp
    brk()
    try:
        return tmp  # noqa: F821
    except UnboundLocalError:
        return x + 1


def test_deleted_local_stays_deleted_across_break():
    differential(deleted_local, (torch.randn(3),))


def recursive_with_break(x, depth):
    if depth == 0:
        return x
    y = x * 2
    brk()
    return recursive_with_break(y, depth - 1) + 1


def test_recursive_function_with_break():
    differential(recursive_with_break, (torch.randn(3), 3), observe=observe_events, repeat=2)


class BreakingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        brk()
        if h.sum() > 0:
            h = h * 2
        return self.b(h)


def test_module_forward_with_breaks_and_gradients():
    torch.manual_seed(0)
    mod = BreakingModule()
    opt = framejit.optimize(CompileCounter())(mod)
    for x in (torch.randn(3, 4), torch.randn(3, 4) - 5):
        expected = mod(x)
        got = opt(x)
        assert_equal(got, expected)
        expected.sum().backward()
        eager_grads = [p.grad.clone() for p in mod.parameters()]
        mod.zero_grad()
        got.sum().backward()
        assert_equal([p.grad for p in mod.parameters()], eager_grads)
        mod.zero_grad()


def test_gradients_flow_through_graphs_on_both_sides_of_a_break():
    def fn(x, w):
        h = x * w
        brk()
        return (h.sin() * w).sum()

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    eager = fn(x, w)
    (eager_grad,) = torch.autograd.grad(eager, w)
    got = framejit.optimize(CompileCounter())(fn)(x, w)
    assert got.requires_grad
    (got_grad,) = torch.autograd.grad(got, w)
    assert_equal(got, eager)
    assert_equal(got_grad, eager_grad)


# ---------------------------------------------------------------------------------------------
# 7. the corpus: a brk() before every statement of every statement list
# ---------------------------------------------------------------------------------------------

CORPUS_HITS: list = []


@opaque
def corpus_brk():
    CORPUS_HITS.append(1)


def _statement_lists(tree):
    """Every statement list in the function, in a fixed walk order."""
    lists = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                lists.append(value)
    return lists


def _variants(fn):
    source = textwrap.dedent(inspect.getsource(fn))
    count = sum(len(lst) for lst in _statement_lists(ast.parse(source)))
    for k in range(count):
        tree = ast.parse(source)
        seen = 0
        for lst in _statement_lists(tree):
            if seen + len(lst) > k:
                lst.insert(k - seen, ast.Expr(ast.Call(ast.Name("brk", ast.Load()), [], [])))
                break
            seen += len(lst)
        ast.fix_missing_locations(tree)
        yield f"{fn.__name__}-{k}", ast.unparse(tree)


CORPUS_VARIANTS = [v for fn in break_corpus.CORPUS for v in _variants(fn)]
CORPUS_INPUTS = [
    (torch.tensor([0.5, 1.0, 1.5, 2.0]), 3),
    (torch.tensor([-1.0, -2.0, 0.5, -0.25]), 1),
    (torch.tensor([0.25, -0.5, 0.75, -1.0], requires_grad=True), 0),
    (torch.tensor([0.5, 1.0, 1.5, 2.0]), 2),
]


def _load_variant(name, source):
    filename = f"/framejit_corpus/{name}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "brk": corpus_brk, "__name__": f"framejit_corpus_{name}"}
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace[name.rsplit("-", 1)[0]]
    brk_line = 1 + [line.strip() for line in source.splitlines()].index("brk()")
    return fn, filename, brk_line


def _code_with_line(code, line):
    """The code object (fn's own or a nested one) whose own instructions include `line`."""
    if any(ins.positions.lineno == line for ins in dis.get_instructions(code) if ins.positions):
        return code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found = _code_with_line(const, line)
            if found is not None:
                return found
    return None


def _run_counting(f, args):
    CORPUS_HITS.clear()
    outcome = _run(f, clone(args), {})
    return outcome, len(CORPUS_HITS), torch.is_grad_enabled()


@pytest.mark.parametrize("name, source", CORPUS_VARIANTS, ids=[n for n, _ in CORPUS_VARIANTS])
def test_corpus(name, source):
    """Eager and compiled agree (results, exceptions, number of brk() calls, grad mode after), and
    explain() reports a graph break whenever brk() ran."""
    fn, filename, brk_line = _load_variant(name, source)
    for args in CORPUS_INPUTS:  # explain first, on a fresh cache (conftest resets framejit)
        CORPUS_HITS.clear()
        out = framejit.explain(fn)(*clone(args))
        if CORPUS_HITS:
            assert out.graph_break_count >= 1, f"brk() ran {len(CORPUS_HITS)} times"
    compiled = framejit.optimize(CompileCounter())(fn)
    for args in CORPUS_INPUTS + CORPUS_INPUTS[:1]:  # the last one: a second call with the same guards
        (e_kind, e_val), e_hits, e_grad = _run_counting(fn, args)
        with no_internal_errors():
            (c_kind, c_val), c_hits, c_grad = _run_counting(compiled, args)
        assert (c_kind, c_hits, c_grad) == (e_kind, e_hits, e_grad), (e_val, c_val)
        if e_kind == "ok":
            assert_equal(c_val, e_val)
        else:
            assert type(c_val) is type(e_val) and str(c_val) == str(e_val)


@pytest.mark.parametrize("name, source", CORPUS_VARIANTS, ids=[n for n, _ in CORPUS_VARIANTS])
def test_corpus_continuation_captured(name, source):
    """The break is made at brk() itself (explain names its line), and the continuation that
    starts right after the call is a frame the hook captured (compiled, or found nothing to
    compile), not one given up to run as Python."""
    fn, filename, brk_line = _load_variant(name, source)
    ran = False
    for args in CORPUS_INPUTS:
        CORPUS_HITS.clear()
        out = framejit.explain(fn)(*clone(args))
        if CORPUS_HITS:
            ran = True
            assert any(r.user_stack and r.user_stack[-1].filename == filename and r.user_stack[-1].lineno == brk_line
                       for r in out.break_reasons), [(r.reason, r.user_stack[-1:]) for r in out.break_reasons]
    if not ran:
        pytest.skip("brk() is not reached by these inputs")
    framejit.reset()
    compiled = framejit.optimize(CompileCounter())(fn)
    for args in CORPUS_INPUTS:
        _run(compiled, clone(args), {})
    code = _code_with_line(fn.__code__, brk_line)
    instructions = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    calls = [k for k, i in enumerate(instructions)
             if i.opname == "CALL" and i.positions.lineno == brk_line]
    after = instructions[calls[0] + 1].offset
    resumes = [c for (offset, _, _), c in graph_break._RESUME_CODES.get(code, {}).items() if offset == after]
    assert resumes, f"no continuation was made after brk() (offset {after}); the frame ran as Python"
    for resume in resumes:
        # a continuation inside a loop is compiled once per loop position (the rest of the loop is
        # unrolled), so a long loop may reach cache_size_limit: it was still captured if it has entries
        assert resume not in eval_frame._fallback or isinstance(_hook.get_extra(resume), list) \
            and _hook.get_extra(resume), f"{resume.co_name} was given up and ran as Python"
        assert _hook.get_extra(resume) is not None, f"{resume.co_name} was never seen by the hook"


# ---------------------------------------------------------------------------------------------
# 8. the debug view
# ---------------------------------------------------------------------------------------------


def _check_debug_output(out):
    assert "ORIGINAL BYTECODE" in out
    assert "MODIFIED BYTECODE" in out
    assert "__compiled_fn_" in out
    modified = out[out.index("MODIFIED BYTECODE"):]
    assert "__resume_at_" in modified.split("GUARDS")[0], "the toy example's modified code calls continuations"
    assert "GUARDS" in out and "TENSOR_MATCH" in out and "L['a']" in out
    assert "class GraphModule" in out and "torch.abs(a)" in out, "the traced graph is printed readably"
    assert "b * -1" in out, "the continuation's graph is printed too"
    line = line_of(toy_example, "if b.sum() < 0:")
    assert any(f":{line}" in text and "tensor" in text.lower() and "TENSOR_MATCH" not in text
               for text in out.splitlines()), "the break reason names the `if` line and the tensor"
    assert "if b.sum() < 0:" in out


def _recompile_lines(out):
    return [line for line in out.splitlines() if "recompil" in line.lower()]


def test_debug_view_config(capsys):
    with framejit.config.patch(debug=True):
        f = framejit.optimize(CompileCounter())(toy_example)
        f(torch.randn(10), -torch.ones(10))
        first = capsys.readouterr().out
        f(torch.randn(10, dtype=torch.float64), -torch.ones(10, dtype=torch.float64))
        second = capsys.readouterr().out
    _check_debug_output(first)
    assert not _recompile_lines(first)
    lines = _recompile_lines(second)
    assert lines, second[:2000]
    assert any("toy_example" in line and "L['a']" in line and "dtype" in line and "float64" in line
               for line in lines), lines
    f(torch.randn(10), -torch.ones(10))
    assert capsys.readouterr().out == "", "nothing printed once debug is off (and nothing recompiled)"


def test_debug_view_env(capsys, monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "bytecode,guards,graph,breaks,recompiles")
    f = framejit.optimize(CompileCounter())(toy_example)
    f(torch.randn(10), -torch.ones(10))
    first = capsys.readouterr().out
    _check_debug_output(first)
    f(torch.randn(10, dtype=torch.float64), -torch.ones(10, dtype=torch.float64))
    lines = _recompile_lines(capsys.readouterr().out)
    assert any("L['a']" in line and "float64" in line for line in lines), lines


def test_debug_view_env_selects_sections(capsys, monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "guards")
    framejit.optimize(CompileCounter())(toy_example)(torch.randn(10), -torch.ones(10))
    out = capsys.readouterr().out
    assert "GUARDS" in out
    assert "ORIGINAL BYTECODE" not in out and "class GraphModule" not in out


def test_no_debug_output_by_default(capsys, monkeypatch):
    monkeypatch.delenv("FRAMEJIT_LOGS", raising=False)
    framejit.optimize(CompileCounter())(toy_example)(torch.randn(10), -torch.ones(10))
    assert capsys.readouterr().out == ""


# ---------------------------------------------------------------------------------------------
# 9. continuations are cached per (code, offset, stack layout)
# ---------------------------------------------------------------------------------------------


def test_continuations_are_reused():
    code = toy_example.__code__
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(toy_example)
    for _ in range(60):
        a, b = torch.randn(10), torch.randn(10)
        assert_equal(f(a, b), toy_example(a, b))
    resumes = graph_break._RESUME_CODES.get(code, {})
    assert len(resumes) == 2
    assert cnt.frame_count == 3
    # one continuation at the instruction after the jump (the taken branch), one at the jump's target
    (jump,) = [i for i in dis.get_instructions(code) if i.opname.startswith("POP_JUMP")]
    after = next(i.offset for i in dis.get_instructions(code) if i.offset > jump.offset and i.opname != "CACHE")
    offsets = {offset for offset, _, _ in resumes}
    assert offsets == {after, jump.argval}
    names = {c.co_name for c in resumes.values()}
    assert all(n.startswith("__resume_at_") for n in names)
    assert {int(n.split("_")[4]) for n in names} == offsets, "the name carries the offset it resumes at"
    framejit.reset()  # a new compile after reset builds no new continuation code for the same keys
    framejit.optimize(CompileCounter())(toy_example)(torch.randn(10), torch.randn(10))
    assert len(graph_break._RESUME_CODES.get(code, {})) == 2


def test_loop_break_reuses_one_continuation():
    code = loop_while_brk.__code__
    differential(loop_while_brk, (torch.randn(3), 6), observe=observe_events)
    assert len(graph_break._RESUME_CODES.get(code, {})) == 1, "every iteration resumes at the same place"


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
