"""allow_in_graph / disallow_in_graph / assume_constant_result."""

import random

import pytest
import torch

import framejit
from framejit import cache
from framejit.testing import CompileCounter, CompileCounterWithBackend, same

from tests.helpers import graph_targets


# ---------------------------------------------------------------------------------------------
# allow_in_graph / disallow_in_graph / assume_constant_result


def test_allow_in_graph_makes_one_opaque_node():
    def noisy(x):
        print("noisy called")
        return x + 1

    def fn(x):
        return noisy(x.sin()).cos()

    x = torch.randn(4)
    with pytest.raises(framejit.exc.Unsupported):
        framejit.optimize_assert(CompileCounter())(fn)(x)

    framejit.allow_in_graph(noisy)
    framejit.reset()
    cnt = CompileCounter()
    f = framejit.optimize_assert(cnt)(fn)
    assert same(f(x), (x.sin() + 1).cos())
    assert cnt.frame_count == 1
    nodes = [n for n in cnt.graphs[0].graph.nodes if n.target is noisy]
    assert len(nodes) == 1 and nodes[0].op == "call_function"
    assert cnt.op_count == 3  # sin, noisy, cos


def test_allowed_function_is_not_captured_when_the_graph_runs():
    """The compiled graph runs with capture off: the opaque node's function is not compiled on its own."""

    def scale(x):
        return x * 3

    framejit.allow_in_graph(scale)

    def fn(x):
        return scale(x.sin()).cos()

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), (x.sin() * 3).cos())
    assert cnt.frame_count == 1
    assert not cache.entries(scale.__code__)


def test_disallow_in_graph_raises_under_fullgraph():
    def helper(x):
        return x + 1

    def fn(x):
        return helper(x) * 2

    x = torch.randn(4)
    cnt = CompileCounter()
    assert same(framejit.optimize_assert(cnt)(fn)(x), (x + 1) * 2)
    assert cnt.frame_count == 1

    framejit.disallow_in_graph(helper)
    framejit.reset()
    with pytest.raises(framejit.exc.Unsupported):
        framejit.optimize_assert(CompileCounter())(fn)(x)
    framejit.reset()
    assert same(framejit.optimize(CompileCounter())(fn)(x), (x + 1) * 2)


def test_assume_constant_result():
    calls = []

    @framejit.assume_constant_result
    def magic():
        calls.append(1)
        return random.Random(0).randint(2, 9)

    value = random.Random(0).randint(2, 9)

    def fn(x):
        return x * magic()

    cnt = CompileCounter()
    f = framejit.optimize_assert(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), x * value)
    n_calls = len(calls)
    assert same(f(torch.ones(3)), torch.ones(3) * value)
    assert cnt.frame_count == 1
    assert len(calls) == n_calls, "the constant's function is not called again on a cache hit"
    assert magic not in graph_targets(cnt)


# ---------------------------------------------------------------------------------------------
# a function allowed in the graph for what it does stays there and runs


def _adds_one_in_place(t):
    t.add_(1)  # returns None: it is there for its write


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_an_allowed_function_that_returns_none_runs_in_the_graph(backend):
    framejit.allow_in_graph(_adds_one_in_place)
    try:

        def fn(x):
            _adds_one_in_place(x)
            return x * 2

        counter = CompileCounterWithBackend(backend)
        compiled = framejit.compile(fn, backend=counter, fullgraph=True)
        for _ in range(3):
            x, want_x = torch.zeros(3), torch.zeros(3)
            assert same(compiled(x), fn(want_x))
            assert same(x, want_x)
        assert counter.frame_count == 1
        assert _adds_one_in_place in graph_targets(counter)
    finally:
        framejit.disallow_in_graph(_adds_one_in_place)


def test_a_torch_distributed_call_breaks_without_suggesting_allow_in_graph():
    import torch.distributed as dist

    def fn(x):
        dist.all_reduce(x)
        return x * 2

    with pytest.raises(framejit.exc.Unsupported) as info:
        framejit.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
    message = str(info.value).split("from user code:")[0]  # (the user stack names this file)
    assert "all_reduce" in message and "torch.distributed" in message
    assert "allow_in_graph" not in message
