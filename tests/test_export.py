"""framejit.export: one standalone graph module that takes fn's arguments and returns what fn returns."""
import inspect

import pytest
import torch
from torch import nn

import framejit
from framejit import cache
from framejit.testing import CompileCounter, same

from tests.helpers import Box


def _nested(x, ys, k=2, *, scale=3.0):
    a = x.sin() * scale
    return {"a": a, "pair": (ys[0] + a, ys[1]), "k": k, "x": x}


def test_export_takes_and_returns_the_same_pytrees_as_fn():
    x, ys = torch.randn(3), [torch.randn(3), torch.randn(3)]
    gm, guards = framejit.export(_nested, x, ys, 2, scale=3.0)
    assert isinstance(gm, torch.fx.GraphModule) and guards
    x2, ys2 = torch.randn(3), [torch.randn(3), torch.randn(3)]  # new values, same shapes
    got, want = gm(x2, ys2, 2, scale=3.0), _nested(x2, ys2, 2, scale=3.0)
    assert set(got) == set(want) and same(got["a"], want["a"]) and same(got["pair"][0], want["pair"][0])
    assert got["pair"][1] is ys2[1] and got["x"] is x2  # inputs returned as they are
    assert got["k"] == 2
    ops = [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert len(ops) == 3  # sin, mul, add


def test_export_module_holds_parameters_shared_with_the_original():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    gm, _ = framejit.export(model, torch.randn(2, 4))
    x = torch.randn(2, 4)
    assert same(gm(x), model(x))
    assert {id(p) for p in gm.parameters()} == {id(p) for p in model.parameters()}
    with torch.no_grad():
        model[0].weight.add_(1.0)  # shared: the exported module sees the update
    assert same(gm(x), model(x))
    assert list(inspect.signature(gm.forward).parameters) == ["input"]  # Sequential.forward's own name


def test_export_leaves_the_cache_as_it_found_it():
    def f(x):
        return x.cos() + 1

    framejit.export(f, torch.randn(3))
    assert cache.entries(f.__code__) == []
    cnt = CompileCounter()
    framejit.optimize(cnt)(f)(torch.randn(3))
    assert cnt.frame_count == 1


def _branches_on_data(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_export_of_a_graph_break_raises_naming_the_line():
    with pytest.raises(framejit.exc.Unsupported) as info:
        framejit.export(_branches_on_data, torch.randn(2))
    assert any(f.name == "_branches_on_data" for f in info.value.user_stack)
    assert "test_export.py" in str(info.value)


def test_export_refuses_a_tensor_hidden_in_an_opaque_argument():
    def f(box):
        return box.t + 1

    with pytest.raises(framejit.exc.UserError, match=r"L\['box'\].t.*pass the tensor itself"):
        framejit.export(f, Box(t=torch.randn(2)))


def test_export_without_tensor_ops_returns_inputs_and_constants():
    def f(x, n):
        return x, n * 2

    gm, _ = framejit.export(f, torch.randn(2), 3)
    x = torch.ones(2)
    out = gm(x, 3)
    assert out[0] is x and out[1] == 6


def test_export_refuses_an_argument_that_aliases_another_or_a_global():
    x = torch.randn(3, 4)
    with pytest.raises(framejit.exc.UserError, match=r"reads one object under two names \(L\['b'\] is L\['a'\]\)"):
        framejit.export(lambda a, b: a + b, x, x)
    with pytest.raises(framejit.exc.UserError, match=r"G\['GLOBAL_T'\] is L\['a'\]"):
        framejit.export(lambda a: a + GLOBAL_T, GLOBAL_T)


GLOBAL_T = torch.randn(4)
training = torch.randn(4)  # the name of an nn.Module attribute


def test_export_returns_read_tensors_as_the_shared_objects():
    model = nn.Linear(4, 4)
    gm, _ = framejit.export(lambda a: (a * GLOBAL_T, GLOBAL_T, model.bias), torch.randn(4))
    a = torch.randn(4)
    product, glob, bias = gm(a)
    assert same(product, a * GLOBAL_T) and glob is GLOBAL_T and bias is model.bias
    gm, _ = framejit.export(lambda a: a + training, torch.randn(4))  # held under a name nn.Module does not use
    assert same(gm(a), a + training) and gm.training is True


def test_export_of_an_optimized_callable_exports_what_it_wraps():
    cnt = CompileCounter()
    lin = nn.Linear(4, 4)
    gm, _ = framejit.export(framejit.compile(lin, backend=cnt), torch.randn(2, 4))
    gm2, _ = framejit.export(framejit.optimize(cnt)(_cos_plus_one), torch.randn(3))
    x = torch.randn(2, 4)
    assert same(gm(x), lin(x)) and same(gm2(x[0, :3]), x[0, :3].cos() + 1)
    assert cnt.frame_count == 0  # the wrappers' own backend never ran


def _cos_plus_one(x):
    return x.cos() + 1


def test_export_of_a_builtin_says_there_is_no_python_code():
    with pytest.raises(framejit.exc.UserError, match="not a Python function"):
        framejit.export(torch.cos, torch.randn(3))
