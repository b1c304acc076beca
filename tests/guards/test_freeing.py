"""Freeing compiled functions and modules, entries per module instance, and what recompiles when
a module or a global it reads changes."""

import copy
import gc
import warnings
import weakref

import pytest
import torch
from torch import nn

import framejit
from framejit import cache
from framejit.testing import CompileCounter, same


# ---------------------------------------------------------------------------------------------
# freeing


def test_deleted_compiled_function_is_freed():
    def make():
        def fn(x):
            return x.cos() + 1

        return fn

    fn = make()
    opt = framejit.optimize("eager")(fn)
    x = torch.randn(3)
    assert same(opt(x), fn(x))
    r_fn, r_opt = weakref.ref(fn), weakref.ref(opt)
    del fn, opt
    gc.collect()
    assert r_fn() is None
    assert r_opt() is None


def test_deleted_compiled_function_freed_with_counter_backend():
    cnt = CompileCounter()

    def make():
        def fn(x):
            return x.cos() + 1

        return fn

    fn = make()
    opt = framejit.optimize(cnt)(fn)
    opt(torch.randn(3))
    r_fn, r_opt = weakref.ref(fn), weakref.ref(opt)
    del fn, opt
    cnt.clear()
    gc.collect()
    assert r_fn() is None and r_opt() is None


class _Freeable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


@pytest.mark.parametrize("form", ["optimize", "compile"])
def test_deleted_optimized_module_is_freed(form):
    mod = _Freeable()
    opt = framejit.optimize("eager")(mod) if form == "optimize" else framejit.compile(mod, backend="eager")
    x = torch.randn(2, 4)
    assert same(opt(x), mod(x))
    code = _Freeable.forward.__code__
    assert cache.entries(code), "the forward code should have a cache entry"
    r_mod, r_opt = weakref.ref(mod), weakref.ref(opt)
    r_weight = weakref.ref(mod.lin.weight)
    del mod, opt
    gc.collect()
    assert r_mod() is None
    assert r_opt() is None
    assert r_weight() is None
    assert not cache.entries(code), "the dead module's cache entry must be dropped"


def test_entries_for_two_module_instances_are_separate_and_freed():
    a, b = _Freeable(), _Freeable()
    cnt = CompileCounter()
    oa, ob = framejit.optimize(cnt)(a), framejit.optimize(cnt)(b)
    x = torch.randn(2, 4)
    assert same(oa(x), a(x))
    assert same(ob(x), b(x))
    assert not same(a(x), b(x))
    code = _Freeable.forward.__code__
    n = len(cache.entries(code))
    assert n >= 1
    del a, oa
    cnt.clear()
    gc.collect()
    assert same(ob(x), b(x))
    if n == 2:
        assert len(cache.entries(code)) == 1


def test_module_hooks_registered_after_compiling_are_guarded():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    failures = []
    cnt = CompileCounter()
    opt = framejit.optimize(cnt, guard_fail_fn=failures.append)(model)
    x = torch.randn(3, 4)
    opt(x)
    handle = model[2].register_forward_hook(lambda mod, inputs, out: out * 100)
    assert same(opt(x), model(x))  # the hook runs
    assert "L['self']._modules['2']: hooks were registered (_forward_hooks)" in failures[0].reason
    model.register_forward_pre_hook(lambda mod, inputs: (inputs[0] + 1,))  # on the compiled module itself
    assert same(opt(x), model(x))
    handle.remove()
    assert same(opt(x), model(x))


def _cast_to_autocast_dtype(a):
    return a.to(torch.get_autocast_dtype("cpu"))


def test_folded_global_query_is_guarded_on_its_answer():
    failures = []
    cnt = CompileCounter()
    f = framejit.optimize(cnt, guard_fail_fn=failures.append)(_cast_to_autocast_dtype)
    x = torch.randn(2)
    before = torch.get_autocast_dtype("cpu")
    try:
        assert f(x).dtype == before
        other = torch.float16 if before != torch.float16 else torch.bfloat16
        torch.set_autocast_dtype("cpu", other)  # autocast itself stays off
        assert f(x).dtype == other == _cast_to_autocast_dtype(x).dtype
        assert failures[0].reason == f"get_autocast_dtype('cpu') now returns {other!r}"
    finally:
        torch.set_autocast_dtype("cpu", before)
    assert f(x).dtype == before and cnt.frame_count == 2


def test_many_instances_of_one_module_class_share_one_compile():
    """Regional compilation: each layer compiled on its own shares nn.Linear.forward's code object, and a module
    is guarded by its type and what is read of it (its parameters are graph inputs): one compile serves all."""
    failures = []
    cnt = CompileCounter()
    context = framejit.optimize(cnt, guard_fail_fn=failures.append)
    layers = [context(nn.Linear(4, 4)) for _ in range(12)]
    x = torch.randn(2, 4)
    want = x
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error")  # no cache size limit warning
        for layer in layers:
            x, want = layer(x), layer._orig_mod(want)
    assert same(x, want)
    assert cnt.frame_count == 1 and failures == []
    assert len(cache.compiled_frames(nn.Linear.forward.__code__)) == 1
    del layers[0]  # the instance that compiled it: its entry goes with it, the others compile once again
    gc.collect()
    with torch.no_grad():
        layers[0](x)
    assert cnt.frame_count == 2


def _copy_and_call(m, x):
    m_copy = copy.deepcopy(m)  # a break: the rest runs on a new module every call
    return m_copy(x)


def test_a_new_module_every_call_reuses_the_graph():
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(_copy_and_call)
    models = [nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 10)) for _ in range(2)]
    x = torch.randn(10)
    for m in models:
        for _ in range(5):
            assert same(compiled(m, x), m(x))
    assert cnt.frame_count == 1  # the continuation, for every copy of either model
    with torch.no_grad():
        relu = framejit.optimize(cnt)(lambda x, act: act(x) + 1)
        for _ in range(3):
            assert same(relu(x, nn.ReLU()), torch.relu(x) + 1)
    assert cnt.frame_count == 2


def test_layers_of_many_shapes_compiled_one_by_one_are_not_recompiles():
    # one entry per shape on nn.Linear.forward, each made for another layer: cache_size_limit counts entries per
    # module, so the ninth shape still compiles (the same-shape layers after them compile nothing)
    cnt = CompileCounter()
    context = framejit.optimize(cnt)
    layers = [context(nn.Linear(4 + i, 5 + i)) for i in range(12)] + [context(nn.Linear(4, 5)) for _ in range(3)]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error")  # no cache size limit warning
        for layer in layers:
            x = torch.randn(2, layer._orig_mod.in_features)
            assert same(layer(x), layer._orig_mod(x))
    assert cnt.frame_count == 12


def test_accumulated_cache_size_limit_bounds_all_entries_together():
    cnt = CompileCounter()
    layers = [framejit.optimize(cnt)(nn.Linear(4, n)) for n in (2, 3, 4, 5)]  # a shape each: a compile each
    with (
        framejit.config.patch(accumulated_cache_size_limit=3),
        pytest.warns(UserWarning, match="accumulated_cache_size_limit=3"),
    ):
        for layer in layers:
            out = layer(torch.randn(2, 4))
    assert cnt.frame_count == 3 and out.shape == (2, 5)  # the fourth runs as Python


class _WithClassConstant:
    k = 2

    def scaled(self, t):
        return t * self.k


def _calls_scaled(t, obj):
    return obj.scaled(t)


def test_instance_attribute_shadowing_a_class_attribute_read_in_a_method_recompiles():
    """Two names guarded absent from one __dict__ ('scaled' and 'k'): both guards are kept."""
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_calls_scaled)
    x = torch.ones(1)
    assert same(f(x, _WithClassConstant()), x * 2)
    shadowed = _WithClassConstant()
    shadowed.k = 9
    assert same(f(x, shadowed), x * 9) and cnt.frame_count == 2


class _Times3(nn.Module):
    def forward(self, t):
        return t * 3


_module_called_by_global = _Times3()


def _calls_global_module(t):
    return _module_called_by_global(t)


def test_forward_replaced_on_a_module_instance_recompiles():
    failures = []
    f = framejit.optimize(CompileCounter(), guard_fail_fn=failures.append)(_calls_global_module)
    x = torch.ones(1)
    assert same(f(x), x * 3)
    _module_called_by_global.forward = lambda t: t - 1
    try:
        assert same(f(x), x - 1)
        assert failures[0].reason == "G['_module_called_by_global']: forward was replaced on the instance"
    finally:
        del _module_called_by_global.forward
