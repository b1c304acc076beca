"""A custom torch.autograd.Function called in compiled code is one graph op: the graph calls its apply, so its own
forward and backward run (a backend that traces the graph, AOTAutograd, traces through both)."""
import pytest
import torch

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend
from tests.helpers import run_fullgraph


class ClippedGradSquare(torch.autograd.Function):
    """x * x * scale forward; a backward that is not the derivative of the forward (clipped, halved), so the
    test sees whether the user's backward ran."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (grad * x * ctx.scale).clamp(-0.5, 0.5), None


def fn(x, w):
    return ClippedGradSquare.apply(torch.tanh(x @ w), 3.0).sum(-1) + 1


def test_inference_is_one_graph():
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    with torch.no_grad():
        torch.testing.assert_close(run_fullgraph(fn, x, w), fn(x, w))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_training_uses_the_custom_backward(backend):
    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    fn(x, w).sum().backward()
    want = w.grad.clone()
    w.grad = None
    cnt = CompileCounterWithBackend(backend)
    framejit.optimize(cnt, nopython=True)(fn)(x, w).sum().backward()
    assert cnt.frame_count == 1
    torch.testing.assert_close(w.grad, want)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class Negate(Double):
    @staticmethod
    def forward(ctx, x):
        return -x


def test_another_function_class_is_another_guard():
    def call(f, x):
        return f.apply(x) + 1

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(call)
    x = torch.randn(3)
    for f in (Double, Negate, Double):
        torch.testing.assert_close(compiled(f, x), call(f, x))
    assert cnt.frame_count == 2
