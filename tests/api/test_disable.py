"""framejit.disable as a decorator (recursive or not) and as a context manager."""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import graph_targets


# ---------------------------------------------------------------------------------------------
# disable


@pytest.mark.parametrize(
    "decorator, marked", [(framejit.disable, "framejit.disable"), (torch.compiler.disable, "torch.compiler.disable")]
)
def test_disable_decorator_is_not_inlined(decorator, marked):
    @decorator
    def hidden(x):
        return torch.sin(x) * 5

    def caller(x):
        return hidden(x.cos()) + 1

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(caller)
    x = torch.randn(4)
    for _ in range(2):
        assert same(f(x), torch.sin(x.cos()) * 5 + 1)
    assert torch.sin not in graph_targets(cnt), "a disabled function must not be traced into a graph"
    assert cnt.frame_count == 2  # caller before and after the call: the function itself is never captured
    reasons = [b.reason for b in framejit.explain(caller)(x).break_reasons]
    assert len(reasons) == 1 and reasons[0].endswith(f"hidden, marked {marked}")
    g = framejit.optimize_assert(CompileCounter())(caller)
    with pytest.raises(framejit.exc.Unsupported):
        g(x)


def test_disable_decorator_on_called_frame_is_not_captured():
    @framejit.disable
    def hidden(x):
        return torch.sin(x) * 5

    cnt = CompileCounter()
    x = torch.randn(4)
    with framejit.optimize(cnt):
        out = hidden(x)
    assert same(out, torch.sin(x) * 5)
    assert cnt.frame_count == 0


def test_disable_recursive_covers_callees():
    def leaf(x):
        return x.exp() - 1

    @framejit.disable
    def mid(x):
        return leaf(x) * 2

    cnt = CompileCounter()
    x = torch.randn(3)
    with framejit.optimize(cnt):
        assert same(mid(x), (x.exp() - 1) * 2)
    assert cnt.frame_count == 0


def test_disable_context_manager_stops_capture():
    cnt = CompileCounter()

    def fn(x):
        return torch.sigmoid(x) + 2

    x = torch.randn(4)
    with framejit.optimize(cnt):
        with framejit.disable():
            assert same(fn(x), torch.sigmoid(x) + 2)
        assert cnt.frame_count == 0
        assert same(fn(x), torch.sigmoid(x) + 2)  # capture resumes after the inner block
    assert cnt.frame_count == 1


def test_disable_non_recursive():
    def leaf(x):
        return x.exp() - 1

    def mid(x):
        return leaf(x) * 2

    framejit.disable(mid, recursive=False)
    cnt = CompileCounter()
    x = torch.randn(3)
    with framejit.optimize(cnt):
        assert same(mid(x), (x.exp() - 1) * 2)
    assert cnt.frame_count == 1  # leaf is still captured
    assert torch.Tensor.exp in graph_targets(cnt) or "exp" in graph_targets(cnt)
