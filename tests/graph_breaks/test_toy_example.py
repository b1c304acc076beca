"""Graph breaks: the seeds' toy example: its graphs, explain(), fullgraph / nopython errors that name this
file and line, the debug view, and continuations cached per (code, offset, stack layout).

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import dis
import operator

import pytest
import torch

import framejit
from framejit import break_resume
from framejit.codeobj import code_label
from framejit.testing import CompileCounter, EagerAndRecordGraphs

from tests.graph_breaks.harness import EVENTS, brk, differential
from tests.helpers import assert_equal, graph_ops, line_of, targets


THIS_FILE = __file__  # the file the functions below are defined in, as tracebacks and errors name it


# ---------------------------------------------------------------------------------------------
# the seeds' toy example
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
# explain
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
    assert (
        text.index("Graph Count") < text.index("Break Reasons") < text.index("Ops per Graph") < text.index("Out Guards")
    )


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
    assert (one.graph_count, one.graph_break_count, one.ops_per_graph) == (
        two.graph_count,
        two.graph_break_count,
        two.ops_per_graph,
    )


# ---------------------------------------------------------------------------------------------
# fullgraph / nopython errors
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
    v = y.tolist()  # (.item() stays in the graph under fullgraph: an unbacked symbol)
    return x * v


@pytest.mark.parametrize(
    "fn, text", [(fg_print, 'print("hello from fg_print")'), (fg_disallowed, "brk()"), (fg_item, "v = y.tolist()")]
)
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
        return t.sum().tolist()

    def outer(x):
        y = x * 2
        return y + helper(y)

    f = framejit.compile(outer, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(framejit.exc.Unsupported) as info:
        f(torch.randn(3))
    msg = str(info.value)
    assert "outer" in msg and "helper" in msg
    assert f"line {line_of(outer, 'return y + helper(y)')}" in msg
    assert f"line {line_of(helper, 'return t.sum().tolist()')}" in msg


# ---------------------------------------------------------------------------------------------
# the debug view
# ---------------------------------------------------------------------------------------------


def _check_debug_output(out):
    assert "ORIGINAL BYTECODE" in out
    assert "MODIFIED BYTECODE" in out
    assert "__compiled_fn_" in out
    modified = out[out.index("MODIFIED BYTECODE") :]
    assert "__resume_at_" in modified.split("GUARDS")[0], "the toy example's modified code calls continuations"
    assert "GUARDS" in out and "TENSOR_MATCH" in out and "L['a']" in out
    assert "class GraphModule" in out and "torch.abs(a)" in out, "the traced graph is printed readably"
    assert "b * -1" in out, "the continuation's graph is printed too"
    line = line_of(toy_example, "if b.sum() < 0:")
    assert any(
        f":{line}" in text and "tensor" in text.lower() and "TENSOR_MATCH" not in text for text in out.splitlines()
    ), "the break reason names the `if` line and the tensor"
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
    assert any(
        "toy_example" in line and "L['a']" in line and "dtype" in line and "float64" in line for line in lines
    ), lines
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
# continuations are cached per (code, offset, stack layout)
# ---------------------------------------------------------------------------------------------


def test_continuations_are_reused():
    code = toy_example.__code__
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(toy_example)
    for _ in range(60):
        a, b = torch.randn(10), torch.randn(10)
        assert_equal(f(a, b), toy_example(a, b))
    resumes = break_resume._RESUME_CODES.get(code, {})
    assert len(resumes) == 2
    assert cnt.frame_count == 3
    # one continuation at the instruction after the jump (the taken branch), one at the jump's target
    (jump,) = [i for i in dis.get_instructions(code) if i.opname.startswith("POP_JUMP")]
    after = next(i.offset for i in dis.get_instructions(code) if i.offset > jump.offset and i.opname != "CACHE")
    offsets = {offset for offset, _, _ in resumes}
    assert offsets == {after, jump.argval}
    assert {c.co_name for c in resumes.values()} == {"toy_example"}, "tracebacks show the user's function"
    names = {code_label(c) for c in resumes.values()}
    assert all(n.startswith("__resume_at_") for n in names)
    assert {int(n.split("_")[4]) for n in names} == offsets, "the name carries the offset it resumes at"
    framejit.reset()  # a new compile after reset builds no new continuation code for the same keys
    framejit.optimize(CompileCounter())(toy_example)(torch.randn(10), torch.randn(10))
    assert len(break_resume._RESUME_CODES.get(code, {})) == 2
