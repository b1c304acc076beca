"""The tensor idioms optimizer code is made of, in user code: reading an input's .grad, addcdiv_/addcmul_ scaled
by a 0-d tensor, and a frame piece that only switches grad mode (no graph is compiled for it)."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


def _compiled(fn):
    counter = CompileCounter()
    return framejit.compile(fn, backend=counter), counter


def sgd_by_hand(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)


def test_reading_grad_of_inputs_steps_as_eager_and_guards_none():
    def make():
        torch.manual_seed(0)
        return [torch.randn(3, requires_grad=True) for _ in range(3)]

    eager, traced = make(), make()
    compiled, counter = _compiled(sgd_by_hand)
    for params in (eager, traced):
        (params[0] * params[1]).sum().backward()  # params[2] gets no grad
    sgd_by_hand(eager, 0.1)
    compiled(traced, 0.1)
    assert all(same(a, b) for a, b in zip(traced, eager))
    assert counter.frame_count == 1
    for params in (eager, traced):
        params[2].sum().backward()  # now it has one: the None guard fails
    sgd_by_hand(eager, 0.1)
    compiled(traced, 0.1)
    assert all(same(a, b) for a, b in zip(traced, eager))
    assert counter.frame_count == 2


def test_grad_of_a_tensor_the_graph_computes_breaks_with_a_reason():
    def f(x):
        y = x * 2
        return y.grad

    reasons = [r.reason for r in framejit.explain(f)(torch.randn(2, requires_grad=True)).break_reasons]
    assert reasons == ["reading .grad of a tensor the graph computes"]


@pytest.mark.parametrize("name", ["addcdiv_", "addcmul_", "addcdiv", "addcmul"])
def test_scaled_products_with_a_tensor_scale_stay_in_the_graph(name):
    def f(p, a, b, step):
        scale = -0.1 / (1 - 0.9**step)  # a 0-d tensor, as an optimizer's step size under compile
        return getattr(p, name)(a, b, value=scale)

    def inputs():
        torch.manual_seed(0)
        return torch.randn(4), torch.randn(4), torch.rand(4) + 0.5, torch.tensor(3.0)

    compiled, counter = _compiled(f)
    expected_args, args = inputs(), inputs()
    expected = f(*expected_args)
    got = compiled(*args)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(args[0], expected_args[0])  # the in-place forms wrote their input, as eager
    assert counter.frame_count == 1
    assert framejit.explain(f)(*inputs()).break_reasons == []


def test_a_piece_that_only_switches_grad_mode_compiles_no_graph():
    def f(x):
        torch.set_grad_enabled(False)
        print("a break")  # the piece before it only switched grad mode: no graph for it
        y = x * 2
        torch.set_grad_enabled(True)
        return y

    compiled, counter = _compiled(f)
    x = torch.randn(3, requires_grad=True)
    out = compiled(x)
    assert torch.is_grad_enabled()
    assert same(out, x.detach() * 2) and not out.requires_grad  # x * 2 ran without grad, as in eager
    assert counter.frame_count == 1
