"""Tensor subclasses that dispatch their ops in Python (traceable wrapper subclasses: TwoTensor here, DTensor in
test_dtensor.py) are graph inputs of their own type: their ops run through the subclass's dispatch on the fakes, the
graph takes the subclass, its metadata and inner tensors are guarded, and AOTAutograd desugars it. What cannot be
traced (a subclass with its own __torch_function__, an attribute of torch's subclass that is no tensor method) is a
break naming the type."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import framejit
from framejit.testing import CompileCounter


def two(n: int = 3) -> TwoTensor:
    return TwoTensor(torch.randn(n), torch.randn(n))


class Pair(TwoTensor):
    """A user's subclass with Python methods of its own (traced as any Python code)."""

    def total(self):
        return self.a + self.b

    @property
    def gap(self):
        return self.a - self.b


class Logged(TwoTensor):
    """A wrapper subclass with a __torch_function__ of its own (not traced)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def inputs_of(seen: list[type]):
    def backend(gm, example_inputs):
        seen.extend(type(x) for x in example_inputs)
        return gm.forward

    return backend


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_wrapper_subclass_is_one_graph_of_its_type_equal_to_eager(backend):
    def fn(t, x):
        return t * 2 + x.sin(), t.a.cos(), (t + 1).sum()

    t, x = two(), torch.randn(3)
    expected = fn(t, x)
    got = framejit.compile(fn, backend=backend, fullgraph=True)(t, x)
    assert type(got[0]) is TwoTensor and type(got[2]) is TwoTensor
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
        if isinstance(e, TwoTensor):
            torch.testing.assert_close(g.b, e.b)
    seen: list[type] = []
    framejit.compile(fn, backend=inputs_of(seen))(t, x)
    assert seen == [TwoTensor, torch.Tensor]


def test_gradients_through_a_wrapper_subclass_equal_eager_under_aot_eager():
    def fn(t):
        return (t.sin() * 3).sum()

    a, b = torch.randn(4), torch.randn(4)
    eager = TwoTensor(a.clone().requires_grad_(), b.clone().requires_grad_())
    compiled = TwoTensor(a.clone().requires_grad_(), b.clone().requires_grad_())
    fn(eager).backward()
    framejit.compile(fn, backend="aot_eager")(compiled).backward()
    assert type(compiled.grad) is TwoTensor
    torch.testing.assert_close(compiled.grad.a, eager.grad.a)
    torch.testing.assert_close(compiled.grad.b, eager.grad.b)


def test_inner_tensors_sharing_storage_recompile_and_a_subclass_input_is_written_as_in_eager():
    counter, failures = CompileCounter(), []
    fn = framejit.optimize(counter, guard_fail_fn=failures.append)(lambda t: t.add_(1) * 2)
    t = two()
    expected = TwoTensor(t.a.clone(), t.b.clone())
    torch.testing.assert_close(fn(t), expected.add_(1) * 2)
    torch.testing.assert_close(t.b, expected.b)
    fn(two())
    assert counter.frame_count == 1
    x = torch.randn(3)
    shared, eager = TwoTensor(x, x), TwoTensor(x.clone(), x.clone())  # one inner tensor twice: written twice
    eager.b = eager.a
    torch.testing.assert_close(fn(shared), eager.add_(1) * 2)
    torch.testing.assert_close(shared.a, eager.a)
    assert counter.frame_count == 2
    assert "(L['t'].a, L['t'].b)" in failures[-1].reason, failures[-1].reason


def test_a_users_subclass_methods_and_properties_are_traced():
    def fn(p):
        return p.total() * p.gap

    p = Pair(torch.randn(3), torch.randn(3))
    counter = CompileCounter()
    torch.testing.assert_close(framejit.compile(fn, backend=counter, fullgraph=True)(p), fn(p))
    assert counter.frame_count == 1


def test_a_subclass_with_its_own_torch_function_breaks_naming_its_type_and_matches_eager():
    def fn(t, x):
        y = x.sin()  # a graph before the subclass is used
        return t * 2 + 1, y

    t, x = Logged(torch.randn(3), torch.randn(3)), torch.randn(3)
    for e, g in zip(fn(t, x), framejit.compile(fn, backend=CompileCounter())(t, x)):
        torch.testing.assert_close(g, e)
    reasons = [b.reason for b in framejit.explain(fn)(t, x).break_reasons]
    assert any("Logged, a tensor subclass with its own dispatch" in r and "__torch_function__" in r for r in reasons)
