"""assume_constant_result: the function runs once at trace time, on the real values of that call (a
tensor the graph computes is computed for it), and its answer, tensors, lists and dicts of them included, is a
constant of the graph. An exported graph keeps the answer it saw whatever it is later called with."""

from __future__ import annotations

import operator

import torch

import framejit
from framejit.testing import CompileCounter

CALLS: list[str] = []


@framejit.assume_constant_result
def nonzero_twice(x):
    CALLS.append("nonzero_twice")
    return [torch.nonzero(x), torch.nonzero(x)]


class ScalesByConstants(torch.nn.Module):
    def forward(self, x):
        y = torch.tensor([0.5])
        rows = []
        for element in nonzero_twice(x):
            for item in element:
                rows.append(y * item)
        return rows


class ConstantDict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    @framejit.assume_constant_result
    def powers(self, x):
        CALLS.append("powers")
        return {"x": x, "x^2": x * x}

    def forward(self, x):
        h = self.linear(x)  # computed by the graph: its real value is computed for the call
        elements = self.powers(h)
        return torch.tensor([0.5]) * elements["x"] * elements["x^2"]


@framejit.assume_constant_result
def nothing(x):
    return None


def branches_on_none(x):
    if nothing(x) is None:
        return x + 1
    return x - 1


def test_exported_lists_of_constant_tensors_keep_what_they_were():
    module = ScalesByConstants()
    x = torch.tensor([1.0, 1.0])
    gm, _ = framejit.export(module, x)
    expected = module(x)
    for other in (x, torch.tensor([0.0, 3.0]), torch.ones(2, 2, 2)):  # the answer does not depend on the input
        for got, want in zip(gm(other), expected, strict=True):
            torch.testing.assert_close(got, want)


def test_exported_dict_of_constants_from_a_method_on_a_module():
    module = ConstantDict()
    x = torch.tensor([2.0, 2.0])
    gm, _ = framejit.export(module, x)
    torch.testing.assert_close(gm(torch.randn(2)), module(x))


def test_control_flow_on_a_constant_none():
    x = torch.randn(3)
    gm, _ = framejit.export(branches_on_none, x)
    torch.testing.assert_close(gm(x), x + 1)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [operator.add]


def test_compiled_constant_tensors_are_computed_once_and_reused():
    module, counter = ConstantDict(), CompileCounter()
    x = torch.tensor([2.0, 2.0])
    expected = module(x)
    CALLS.clear()
    compiled = framejit.compile(module, backend=counter)
    torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(compiled(torch.randn(2)), expected)  # assumed constant: not recomputed
    assert CALLS == ["powers"] and counter.frame_count == 1
    graph_constants = [n for gm in counter.graphs for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(graph_constants) == 2


def test_the_constant_functions_real_arguments_are_copies():
    @framejit.assume_constant_result
    def writes_into(t):
        t.add_(100)  # into the copy the trace made, never the caller's tensor
        return t.sum()

    def fn(x):
        return x * writes_into(x)

    x = torch.ones(3)
    out = framejit.compile(fn, backend="aot_eager")(x)
    torch.testing.assert_close(x, torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 303.0))
