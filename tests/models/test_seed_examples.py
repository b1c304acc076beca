"""The seeds' examples of whole-model capture: cos/sin/add, a mock module, Linear + ReLU."""

import operator

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import BACKEND_KINDS, make_backend, targets


# ---------------------------------------------------------------------------------------------
# the seeds' examples


def _op_names(gm):
    """A readable op name per node: call_module nodes become their module's class name."""
    names = []
    for n in gm.graph.nodes:
        if n.op == "call_module":
            names.append(type(gm.get_submodule(n.target)).__name__.lower())
        elif n.op in ("call_function", "call_method"):
            names.append(getattr(n.target, "__name__", str(n.target)).lower())
    return names


def test_seed_cos_sin_add_graph():
    cnt = CompileCounter()

    @framejit.optimize(cnt)
    def fn(x, y):
        a = torch.cos(x)
        b = torch.sin(y)
        return a + b

    x, y = torch.randn(10), torch.randn(10)
    assert same(fn(x, y), torch.cos(x) + torch.sin(y))
    assert cnt.frame_count == 1
    (gm,) = cnt.graphs
    assert targets(gm) == [torch.cos, torch.sin, operator.add]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2


class MockModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


@pytest.mark.parametrize("form", ["optimize", "compile"])
def test_seed_mock_module_cos_then_relu(form):
    cnt = CompileCounter()
    mod = MockModule()
    opt = framejit.optimize(cnt)(mod) if form == "optimize" else framejit.compile(mod, backend=cnt)
    x = torch.randn(10)
    assert same(opt(x), mod(x))
    assert cnt.frame_count == 1
    names = _op_names(cnt.graphs[0])
    assert len(names) == 2, names
    assert names[0] == "cos"
    assert "relu" in names[1]


class LinearRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 2)

    def forward(self, x):
        return torch.nn.functional.relu(self.lin(x))


@pytest.mark.parametrize("backend_kind", BACKEND_KINDS)
def test_seed_linear_relu_fullgraph(backend_kind):
    mod = LinearRelu()
    backend = make_backend(backend_kind)
    opt = framejit.compile(mod, fullgraph=True, backend=backend)
    inp = torch.randn(8, 10)
    out = opt(inp)
    assert same(out, mod(inp))
    assert out.requires_grad  # autograd flows through the compiled graph
    if isinstance(backend, CompileCounter):
        assert backend.frame_count == 1
        assert backend.op_count >= 2
