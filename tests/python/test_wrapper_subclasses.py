"""Tensor subclasses that dispatch their ops in Python (wrapper subclasses: DTensor, TwoTensor...) are not traced
as plain tensors: the code that uses one runs as Python, and the break says which type and where."""

from __future__ import annotations

import torch
from torch.testing._internal.two_tensor import TwoTensor

import framejit
from framejit.testing import CompileCounter


def test_a_wrapper_subclass_argument_breaks_naming_its_type_and_matches_eager():
    def fn(t, x):
        y = x.sin()  # a graph before the subclass is used
        return t * 2 + 1, t.a.cos(), y

    t = TwoTensor(torch.randn(3), torch.randn(3))
    x = torch.randn(3)
    expected = fn(t, x)
    counter = CompileCounter()
    got = framejit.compile(fn, backend=counter)(t, x)
    assert type(got[0]) is TwoTensor
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    report = framejit.explain(fn)(t, x)
    reasons = [b.reason for b in report.break_reasons]
    assert any("TwoTensor, a tensor subclass with its own dispatch" in r for r in reasons), reasons
    assert any("(at .a)" in r for r in reasons), reasons
    assert counter.frame_count >= 1  # the sin is still compiled


def test_no_graph_gets_a_wrapper_subclass_input():
    seen = []

    def inputs(gm, example_inputs):
        seen.extend(type(x) for x in example_inputs)
        return gm.forward

    def fn(t):
        return (t + 1).sum()

    t = TwoTensor(torch.randn(4), torch.randn(4))
    torch.testing.assert_close(framejit.compile(fn, backend=inputs)(t), fn(t))
    assert TwoTensor not in seen
