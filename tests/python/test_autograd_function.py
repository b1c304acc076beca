"""torch.autograd.Function subclasses called in compiled code: the forward is one graph node calling the real
Function, the backward runs in autograd; outputs and gradients equal eager for eager, aot_eager and inductor."""

import pytest
import torch

import framejit
from framejit.exc import Unsupported
from framejit.testing import CompileCounter, CompileCounterWithBackend
from tests.helpers import assert_equal, clone, run_fullgraph


class ScaledSquare(torch.autograd.Function):
    """x * x * k with a tensor saved for backward and a Python attribute on ctx."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * ctx.k, None


class ClampGrad(torch.autograd.Function):
    """Identity forward whose backward clamps the gradient: its gradient differs from the forward's ops'."""

    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.clamp(-ctx.bound, ctx.bound), None


class SplitWithIndices(torch.autograd.Function):
    """Several outputs, one of them marked non-differentiable; gradients only for inputs that need one."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        idx = torch.argmax(a, dim=-1)
        ctx.mark_non_differentiable(idx)
        return a * b, a + b, idx

    @staticmethod
    def backward(ctx, g_prod, g_sum, g_idx):
        a, b = ctx.saved_tensors
        ga = g_prod * b + g_sum if ctx.needs_input_grad[0] else None
        gb = (g_prod * a + g_sum) * 3 if ctx.needs_input_grad[1] else None  # deliberately not the true gradient
        return ga, gb


class CubeSetupContext(torch.autograd.Function):
    """The newer style: forward without ctx, setup_context saves what backward needs."""

    @staticmethod
    def forward(x, scale):
        return x**3 * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2 * ctx.scale + 1.0, None  # the +1 shows the custom backward ran


class ReadsAValue(torch.autograd.Function):
    """A forward that needs a tensor's value as a Python number: it cannot run on fake tensors."""

    @staticmethod
    def forward(ctx, x):
        return x * float(x.sum())

    @staticmethod
    def backward(ctx, grad):
        return grad


def _compare_with_grads(fn, backend, *inputs):
    """fn compiled (fullgraph) with `backend` gives eager's outputs and input gradients; returns the counter."""
    eager_in, compiled_in = clone(inputs), clone(inputs)
    expected = fn(*eager_in)
    cnt = CompileCounterWithBackend(backend)
    actual = framejit.optimize(cnt, nopython=True)(fn)(*compiled_in)
    assert_equal(actual, expected)
    sum(o.float().sum() for o in torch.utils._pytree.tree_leaves(expected) if o.requires_grad).backward()
    sum(o.float().sum() for o in torch.utils._pytree.tree_leaves(actual) if o.requires_grad).backward()
    for a, e in zip(compiled_in, eager_in):
        if isinstance(e, torch.Tensor) and e.requires_grad:
            assert_equal(a.grad, e.grad, "grad")
    assert cnt.frame_count == 1
    return cnt


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_in_graph_backward_from_the_function(backend):
    def fn(x, y):
        return ClampGrad.apply(ScaledSquare.apply(x.sin(), 3.0) * y, 0.5).sum(0)

    _compare_with_grads(fn, backend, torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_several_outputs_non_differentiable_and_needs_input_grad(backend):
    def fn(a, b):
        prod, total, idx = SplitWithIndices.apply(a, b)
        return prod + total, idx

    out = _compare_with_grads(fn, backend, torch.randn(2, 5, requires_grad=True), torch.randn(2, 5))
    assert out.frame_count == 1
    # both inputs need a gradient: the (deliberately wrong) gradient of b proves the Function's backward ran
    _compare_with_grads(fn, backend, torch.randn(2, 5, requires_grad=True), torch.randn(2, 5, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_setup_context_style(backend):
    def fn(x):
        return CubeSetupContext.apply(x + 1, 2.0).relu()

    _compare_with_grads(fn, backend, torch.randn(6, requires_grad=True))


def test_inductor_simple_case():
    def fn(x):
        return ScaledSquare.apply(x * 2, 0.5) + 1

    _compare_with_grads(fn, "inductor", torch.randn(8, requires_grad=True))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_parameter_gradients_through_a_module(backend):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return ClampGrad.apply(ScaledSquare.apply(self.fc(x), 2.0), 0.1).sum()

    torch.manual_seed(0)
    eager_net = Net()
    compiled_net = Net()
    compiled_net.load_state_dict(eager_net.state_dict())
    x = torch.randn(3, 4)
    cnt = CompileCounterWithBackend(backend)
    compiled = framejit.optimize(cnt, nopython=True)(compiled_net)
    expected, actual = eager_net(x), compiled(x)
    assert_equal(actual, expected)
    expected.backward()
    actual.backward()
    for (name, p), q in zip(compiled_net.named_parameters(), eager_net.parameters()):
        assert_equal(p.grad, q.grad, name)
    assert cnt.frame_count == 1


def test_one_node_calls_the_function_and_no_grad_result_matches():
    def fn(x):
        return ScaledSquare.apply(x, 2.0) - x

    cnt = CompileCounter()
    x = torch.randn(3, requires_grad=True)
    assert_equal(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))
    (graph,) = cnt.graphs
    assert [n.target.__name__ for n in graph.graph.nodes if n.op == "call_function"][0] == "ScaledSquare_apply"
    with torch.no_grad():  # grad mode is guarded: a new entry whose result needs no grad
        assert_equal(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))
    assert cnt.frame_count == 2


def test_apply_read_as_a_value_and_another_class_recompiles():
    holder = {"apply": ScaledSquare.apply}

    def fn(x):
        return holder["apply"](x, 3.0)

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(fn)
    x = torch.randn(3, requires_grad=True)
    assert_equal(compiled(x), fn(x))
    holder["apply"] = CubeSetupContext.apply
    assert_equal(compiled(x), fn(x))  # the class is guarded by identity through its source
    assert cnt.frame_count == 2


def test_a_forward_that_cannot_run_on_fakes_is_a_graph_break():
    def fn(x):
        y = x + 1
        return ReadsAValue.apply(y) * 2

    x = torch.randn(4)
    cnt = CompileCounter()
    assert_equal(framejit.optimize(cnt)(fn)(x), fn(x))
    # the graph before the call and the one after it; the Function then runs as Python, and its forward is a frame
    # like any other (a graph, a break at .item(), a continuation)
    assert cnt.frame_count == 4
    out = framejit.explain(fn)(x)
    assert "autograd.Function ReadsAValue" in out.break_reasons[0].reason
    assert "data-dependent" in out.break_reasons[0].reason
    with pytest.raises(Unsupported, match="autograd.Function ReadsAValue"):
        framejit.optimize(CompileCounter(), nopython=True)(fn)(x)
    framejit.reset()
    x = torch.randn(4, requires_grad=True)
    compiled_x = clone(x)
    framejit.optimize(CompileCounter())(fn)(compiled_x).sum().backward()
    fn(x).sum().backward()
    assert_equal(compiled_x.grad, x.grad, "grad")


def test_run_fullgraph_of_a_function_with_a_tensor_and_a_tuple_argument():
    class AddAll(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, shifts):
            return x + sum(shifts)

        @staticmethod
        def backward(ctx, grad):
            return grad * 10, None

    def fn(x):
        return AddAll.apply(x, (1.0, 2.0))

    x = torch.randn(3)
    assert_equal(run_fullgraph(fn, x), fn(x))


class _DoubleWithUnitGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + x

    @staticmethod
    def backward(ctx, grad):
        return grad  # not the true derivative: proof that this backward runs


def test_apply_reached_through_an_instance_of_the_function():
    def fn(x):
        return _DoubleWithUnitGrad().apply(x) * 3  # an older idiom: apply is a classmethod

    x1 = torch.randn(2, 3, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    out, expected = run_fullgraph(fn, x1), fn(x2)
    out.sum().backward()
    expected.sum().backward()
    assert_equal(out, expected)
    assert_equal(x1.grad, x2.grad)
