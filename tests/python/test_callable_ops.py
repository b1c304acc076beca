"""torch functions that run a callable the program passes them (associative_scan): one graph node that calls the
real function with the callable, equal to eager in values and gradients; a callable that closes over a traced
tensor is a graph break that names it."""
import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend


def linear_recurrence(left, right):
    """h_t = a_t * h_{t-1} + b_t, as a state-space model's scan combines pairs."""
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def scan_with_a_module_level_function(a, b):
    return associative_scan(linear_recurrence, (a, b), dim=1, combine_mode="generic")[1].relu()


def scan_with_an_inner_function(a, b, w):
    def combine(left, right):  # made in the frame, closing over nothing
        return left[0] * right[0], right[0] * left[1] + right[1]
    h = torch.tanh(b @ w)
    _, states = associative_scan(combine, (a, h), dim=1, combine_mode="generic")
    return states.sum(-1) * 2


def inputs(requires_grad=False):
    torch.manual_seed(0)
    return torch.rand(2, 6, 4), torch.randn(2, 6, 4, requires_grad=requires_grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_an_inner_combine_function_is_one_graph_with_eager_values_and_gradients(backend):
    a, b = inputs(requires_grad=True)
    w = torch.randn(4, 4)
    want = scan_with_an_inner_function(a, b, w)
    want.sum().backward()
    want_grad, b.grad = b.grad, None
    cnt = CompileCounterWithBackend(backend)
    got = framejit.optimize(cnt, nopython=True)(scan_with_an_inner_function)(a, b, w)
    got.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(b.grad, want_grad)
    assert cnt.frame_count == 1


def test_a_module_level_combine_function_is_one_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    a, b = inputs()
    compiled = framejit.optimize(backend, nopython=True)(scan_with_a_module_level_function)
    torch.testing.assert_close(compiled(a, b), scan_with_a_module_level_function(a, b))
    torch.testing.assert_close(compiled(a, b), scan_with_a_module_level_function(a, b))  # from the cache
    assert len(graphs) == 1
    targets = [getattr(n.target, "__name__", n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets.count("associative_scan_of_linear_recurrence") == 1, targets


def test_an_inner_function_closing_over_constants_is_made_again_with_them():
    def f(a, b):
        scale = 0.5
        def combine(left, right):
            return left[0] * right[0] * scale, right[0] * left[1] + right[1]
        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")

    a, b = inputs()
    cnt = CompileCounter()
    for got, want in zip(framejit.optimize(cnt, nopython=True)(f)(a, b), f(a, b)):
        torch.testing.assert_close(got, want)
    assert cnt.frame_count == 1


def make_combine(weight):
    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] * weight + right[1]
    return combine


def test_a_closure_from_outside_is_guarded_by_identity():
    def f(combine, a, b):
        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")[1]

    a, b = inputs()
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(f)
    for weight in (1.0, 3.0):  # the same code, another cell: eager's answer, not the first function's
        combine = make_combine(weight)
        torch.testing.assert_close(compiled(combine, a, b), f(combine, a, b))
    assert cnt.frame_count == 2


def test_a_combine_function_closing_over_a_traced_tensor_breaks_and_names_it():
    def f(a, b, w):
        shift = w * 2
        def combine(left, right):
            return left[0] * right[0], right[0] * left[1] + right[1] + shift
        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")[1]

    a, b = inputs()
    w = torch.randn(4)
    reasons = [r.reason for r in framejit.explain(f)(a, b, w).break_reasons]
    assert any("associative_scan() of" in r and "closes over a traced value" in r for r in reasons), reasons
    torch.testing.assert_close(framejit.optimize("eager")(f)(a, b, w), f(a, b, w))
