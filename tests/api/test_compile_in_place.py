"""framejit.compile_in_place(module, ...), framejit's `module.compile(...)`: calls of the module itself run compiled
and the module stays the same object, its state_dict keys unchanged (no OptimizedModule wrapper)."""

import copy

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import torch_compile_side_by_side


def _mlp():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


class Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        print(end="")  # a graph break
        return y.relu()


def test_the_module_stays_itself_and_its_calls_run_compiled():
    mod = _mlp()
    eager = copy.deepcopy(mod)
    keys = list(mod.state_dict())
    cnt = CompileCounter()
    assert framejit.compile_in_place(mod, backend=cnt) is mod
    assert list(mod.state_dict()) == keys
    assert not isinstance(mod, framejit.OptimizedModule)
    x = torch.randn(5, 3)
    assert same(mod(x), eager(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 3)
    assert same(mod(x), eager(x))
    assert cnt.frame_count == 1, "the second call runs the cache"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


def test_the_same_state_dict_and_graph_count_as_torchs_module_compile():
    import torch._dynamo.testing

    ours, theirs = Block(), Block()
    theirs.load_state_dict(ours.state_dict())
    a, b = CompileCounter(), torch._dynamo.testing.CompileCounter()
    framejit.compile_in_place(ours, backend=a)
    x = torch.randn(2, 3)
    with torch_compile_side_by_side():
        theirs.compile(backend=b)
        assert same(ours(x), theirs(x))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["lin.weight", "lin.bias"]
    assert a.frame_count == b.frame_count == 1


def test_a_torch_layer_is_captured():
    """nn.Linear's forward is torch's code, which framejit does not capture unless handed it."""
    lin = nn.Linear(3, 3)
    cnt = CompileCounter()
    framejit.compile_in_place(lin, backend=cnt)
    x = torch.randn(2, 3)
    assert same(lin(x), torch.nn.functional.linear(x, lin.weight, lin.bias))
    assert cnt.frame_count == 1


def test_training_gives_eager_gradients():
    mod, eager = _mlp(), _mlp()
    eager.load_state_dict(mod.state_dict())
    framejit.compile_in_place(mod, backend="aot_eager")
    x = torch.randn(4, 3)
    mod(x).sum().backward()
    eager(x).sum().backward()
    for p, q in zip(mod.parameters(), eager.parameters()):
        assert same(p.grad, q.grad)


def test_a_child_compiled_in_place_is_inlined_into_its_compiled_parent():
    parent = nn.Sequential(_mlp(), nn.Tanh())
    framejit.compile_in_place(parent[0], backend=CompileCounter())
    cnt = CompileCounter()
    x = torch.randn(2, 3)
    assert same(framejit.optimize(cnt)(parent)(x), parent[1](parent[0]._call_impl(x)))
    assert (cnt.frame_count, cnt.op_count) == (1, 4)


def test_fullgraph_and_breaks():
    x = torch.randn(2, 3)
    mod = Breaks()
    framejit.compile_in_place(mod, backend="eager", fullgraph=True)
    with pytest.raises(framejit.exc.Unsupported, match="print"):
        mod(x)
    cnt = CompileCounter()
    framejit.compile_in_place(mod, backend=cnt)  # compiling again replaces the first
    assert same(mod(x), mod.lin(x).relu())
    assert cnt.frame_count == 2


def test_undone_by_clearing_compiled_call_impl_and_off_when_disabled(monkeypatch):
    mod = _mlp()
    cnt = CompileCounter()
    framejit.compile_in_place(mod, backend=cnt)
    mod._compiled_call_impl = None
    mod(torch.randn(2, 3))
    assert cnt.frame_count == 0
    framejit.compile_in_place(mod, backend=cnt, disable=True)
    assert mod._compiled_call_impl is None
    monkeypatch.setenv("FRAMEJIT_DISABLE", "1")
    framejit.compile_in_place(mod, backend=cnt)
    assert mod._compiled_call_impl is None


def test_set_stance_force_eager_applies():
    mod = _mlp()
    cnt = CompileCounter()
    framejit.compile_in_place(mod, backend=cnt)
    with framejit.set_stance("force_eager"):
        mod(torch.randn(2, 3))
    assert cnt.frame_count == 0


def test_misuse_is_an_error():
    with pytest.raises(TypeError, match="compile_in_place expects an nn.Module, got function"):
        framejit.compile_in_place(lambda x: x)
    with pytest.raises(ValueError, match="unknown backend 'nosuch'"):
        framejit.compile_in_place(_mlp(), backend="nosuch")
