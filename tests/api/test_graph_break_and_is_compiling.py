"""framejit.graph_break() and framejit.is_compiling(), and torch's own torch._dynamo.graph_break() met in traced
code: a requested break splits the graph with a reason naming the call, fullgraph refuses it, and eagerly both do
nothing (is_compiling answers False)."""

import ast
import os
import pathlib

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import line_of, torch_compile_side_by_side


def _split(x):
    y = x.sin()
    framejit.graph_break()
    return y.cos()


def _split_with_message(x):
    y = x.sin()
    framejit.graph_break("keep the loss out")
    return y.cos()


def test_called_eagerly_does_nothing():
    x = torch.randn(4)
    assert framejit.graph_break() is None
    assert framejit.graph_break("any message") is None
    assert same(_split(x), x.sin().cos())


def test_splits_the_frame_into_two_graphs():
    cnt = CompileCounter()
    x = torch.randn(4)
    assert same(framejit.optimize(cnt)(_split)(x), x.sin().cos())
    assert cnt.frame_count == 2
    assert cnt.op_count == 2
    assert same(framejit.optimize(cnt)(_split)(x), x.sin().cos())
    assert cnt.frame_count == 2, "the second call runs the cache"


def test_explain_names_the_call_its_message_and_line():
    out = framejit.explain(_split_with_message)(torch.randn(4))
    assert out.graph_count == 2 and out.graph_break_count == 1
    (reason,) = out.break_reasons
    assert "framejit.graph_break() called (keep the loss out)" in reason.reason
    assert reason.user_stack[-1].filename == __file__
    assert reason.user_stack[-1].lineno == line_of(_split_with_message, "framejit.graph_break(")


@pytest.mark.parametrize("form", ["fullgraph", "optimize_assert"])
def test_fullgraph_raises_naming_the_call(form):
    x = torch.randn(4)
    compiled = (
        framejit.compile(_split_with_message, backend="eager", fullgraph=True)
        if form == "fullgraph"
        else framejit.optimize_assert(CompileCounter())(_split_with_message)
    )
    with pytest.raises(framejit.exc.Unsupported) as info:
        compiled(x)
    msg = str(info.value)
    assert "graph break requested: framejit.graph_break() called (keep the loss out)" in msg
    assert f"line {line_of(_split_with_message, 'framejit.graph_break(')}" in msg
    assert os.path.basename(__file__) in msg
    assert info.value.code == framejit.exc.BreakCode.USER_BREAK


def test_a_break_in_an_inlined_helper_breaks_the_caller_then_the_helper():
    """As torch.compile: the caller breaks at the helper's call, whose frame then breaks at the request (3 graphs)."""

    def helper(y):
        framejit.graph_break()
        return y * 2

    def fn(x):
        return helper(x.sin()).cos()

    cnt = CompileCounter()
    x = torch.randn(4)
    assert same(framejit.optimize(cnt)(fn)(x), (x.sin() * 2).cos())
    assert (cnt.frame_count, cnt.op_count) == (3, 3)
    out = framejit.explain(fn)(x)
    assert out.graph_break_count == 2
    assert all("framejit.graph_break() called" in r.reason for r in out.break_reasons)


def test_torch_dynamo_graph_break_is_the_same_break():
    """As torch.compile does (torch's optimizers call it in `_use_grad`); counted against torch.compile."""

    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    x = torch.randn(4)
    cnt, theirs = CompileCounter(), CompileCounter()
    assert same(framejit.optimize(cnt)(fn)(x), x.sin().cos())
    with torch_compile_side_by_side():
        assert same(torch.compile(fn, backend=theirs)(x), x.sin().cos())
    assert cnt.frame_count == theirs.frame_count == 2
    (reason,) = framejit.explain(fn)(x).break_reasons
    assert "torch._dynamo.graph_break() called" in reason.reason
    with pytest.raises(framejit.exc.Unsupported, match=r"torch\._dynamo\.graph_break\(\) called"):
        framejit.compile(fn, backend="eager", fullgraph=True)(x)


def test_torch_dynamo_graph_break_is_recognised_by_name_without_importing_it():
    """framejit's code never imports torch._dynamo to find it: a function called graph_break whose code is in
    TorchDynamo's files is the break (here a stand-in compiled under that file name)."""
    namespace: dict = {}
    where = pathlib.Path(torch.__file__).parent / "_dynamo" / "decorators.py"
    exec(compile("def graph_break(msg=''):\n    pass\n", str(where), "exec"), namespace)
    graph_break = namespace["graph_break"]

    def fn(x):
        y = x + 1
        graph_break()
        return y * 2

    assert framejit.explain(fn)(torch.ones(2)).graph_break_count == 1
    root = pathlib.Path(framejit.__file__).parent
    for name in ("policy.py", "markers.py", "variables/callables.py", "variables/builder.py"):
        tree = ast.parse((root / name).read_text())
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imported if m.startswith("torch._dynamo")], name


def test_is_compiling_is_false_eagerly_and_true_in_traced_code():
    def fn(x):
        if framejit.is_compiling():
            return x + 1
        return x - 1

    x = torch.randn(4)
    assert framejit.is_compiling() is False
    assert same(fn(x), x - 1)
    cnt = CompileCounter()
    assert same(framejit.optimize(cnt)(fn)(x), x + 1)
    assert cnt.frame_count == 1, "the branch is folded at trace time: one graph, no break"
    assert framejit.explain(fn)(x).graph_break_count == 0


def test_is_compiling_agrees_with_torch_compiler_is_compiling():
    def fn(x):
        return x * 2 if framejit.is_compiling() == torch.compiler.is_compiling() else x

    x = torch.randn(4)
    assert same(framejit.optimize(CompileCounter())(fn)(x), x * 2)
    assert same(fn(x), x * 2)


def test_is_compiling_is_false_in_a_part_that_runs_as_python():
    """After a break, the call that broke runs as Python: there is_compiling() answers False."""
    seen = []

    def record():
        seen.append(framejit.is_compiling())
        print(end="")  # an opaque call: the helper runs as Python

    def fn(x):
        framejit.disable(record)()
        return x + 1

    framejit.optimize(CompileCounter())(fn)(torch.randn(2))
    assert seen == [False]
