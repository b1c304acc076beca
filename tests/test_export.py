"""framejit.export: one standalone graph module that takes fn's arguments and returns what fn returns."""

import inspect
import operator

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


def _sum_of_first_items(a, b, c):
    return a[0].item() + b[0].item() + c[0].item()


def _count_and_a_constant(x):
    n = x.nonzero().shape[0]  # 2 at export time, as is the constant beside it
    return n, 2, x * n


@pytest.mark.parametrize(
    "fn, make_args",
    [
        (_sum_of_first_items, lambda: [torch.randn(4) for _ in range(3)]),
        (_count_and_a_constant, lambda: [torch.tensor([1.0, 0.0, float(torch.randint(0, 3, ()))])]),
    ],
)
def test_numbers_the_graph_computes_are_outputs_of_the_exported_graph_not_constants(fn, make_args):
    gm, _ = framejit.export(fn, *[torch.tensor([1.0, 0.0, 3.0]) for _ in range(3)][: len(make_args())])
    for _ in range(4):
        args = make_args()
        assert same(gm(*args), fn(*args))


_LINEAR = nn.Linear(2, 2)


def _add_t_relu_linear(x):
    x = x + 1
    y = x.t()
    y = y.relu()
    return {"y": _LINEAR(y), "n": 3}


def test_every_node_of_an_export_carries_the_users_stack_trace():
    gm, _ = framejit.export(_add_t_relu_linear, torch.randn(2))
    traced = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    assert traced and all(n.stack_trace for n in traced)
    assert "x = x + 1" in next(n for n in traced if n.target is operator.add).stack_trace


def test_aten_graph_export_is_aten_ops_with_stack_traces_and_the_same_pytrees():
    x = torch.randn(2)
    gm, _ = framejit.export(_add_t_relu_linear, x, aten_graph=True)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert all(isinstance(n.target, torch._ops.OpOverload) for n in calls)
    assert torch.ops.aten.addmm.default in [n.target for n in calls]
    assert all(n.stack_trace for n in calls)
    assert "y = y.relu()" in next(n for n in calls if n.target is torch.ops.aten.relu.default).stack_trace
    for _ in range(2):
        x = torch.randn(2)
        assert same(gm(x), _add_t_relu_linear(x))


def test_aten_graph_export_applies_the_decomposition_table():
    def cos_for_t(x):  # a decomposition that changes the result: proof it ran
        return x.cos()

    x = torch.randn(3, 2)
    gm, _ = framejit.export(
        lambda x: x.t() + 1, x, aten_graph=True, decomposition_table={torch.ops.aten.t.default: cos_for_t}
    )
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.cos.default in targets and torch.ops.aten.t.default not in targets
    torch.testing.assert_close(gm(x), x.cos() + 1)


def test_aten_graph_export_with_dynamic_shapes_runs_other_sizes():
    batch = framejit.Dim("batch", min=2, max=64)
    gm, _ = framejit.export(lambda x: (x * 2).sum(0), torch.randn(4, 3), aten_graph=True, dynamic_shapes=({0: batch},))
    for n in (2, 9):
        x = torch.randn(n, 3)
        torch.testing.assert_close(gm(x), (x * 2).sum(0))


@pytest.mark.parametrize("error", [framejit.exc.UserError, AssertionError])  # (AssertionError: TorchDynamo's)
def test_decomposition_table_without_aten_graph_is_a_clear_error(error):
    with pytest.raises(error, match="aten_graph=True"):
        framejit.export(lambda x: x + 1, torch.randn(2), decomposition_table={})
