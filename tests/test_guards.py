"""Guards and the cache: what recompiles, what hits, the size limit, run(), reset(), guard hooks,
threads, and freeing compiled functions and modules."""
import gc
import threading
import warnings
import weakref

import pytest
import torch
from torch import nn

import framejit
from framejit import cache
from framejit.testing import CompileCounter, same


def _body(x, y):
    return torch.sin(x) * 2 + y


def _compiled(cnt=None, fn=_body, **kwargs):
    cnt = cnt if cnt is not None else CompileCounter()
    return cnt, framejit.optimize(cnt, **kwargs)(fn)


class _RuntimeCounter:
    """A backend that counts compiles and also how often the compiled graphs run."""

    def __init__(self):
        self.frame_count = 0
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1

        def run(*args):
            self.calls += 1
            return gm.forward(*args)
        return run


# ---------------------------------------------------------------------------------------------
# what recompiles


def test_same_shape_new_values_hit_the_cache():
    cnt, f = _compiled()
    for _ in range(5):
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        assert same(f(x, y), _body(x, y))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_new_dtype_recompiles(dtype):
    cnt, f = _compiled()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    assert same(f(x, y), _body(x, y))
    x2, y2 = x.to(dtype), y.to(dtype)
    assert same(f(x2, y2), _body(x2, y2), tol=1e-2)
    assert cnt.frame_count == 2
    f(x, y)
    f(x2, y2)
    assert cnt.frame_count == 2


def test_new_shape_recompiles():
    cnt, f = _compiled()
    for shape in [(3, 4), (5, 4), (3, 4, 2), (7,)]:
        x, y = torch.randn(shape), torch.randn(shape)
        assert same(f(x, y), _body(x, y))
    assert cnt.frame_count == 4
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    assert same(f(x, y), _body(x, y))
    assert cnt.frame_count == 4


def test_new_stride_recompiles_and_is_correct():
    cnt, f = _compiled()
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    assert same(f(x, y), _body(x, y))
    xt, yt = torch.randn(6, 4).t(), torch.randn(6, 4).t()
    assert same(f(xt, yt), _body(xt, yt))
    assert cnt.frame_count == 2


def test_new_requires_grad_recompiles():
    cnt, f = _compiled()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = f(x, y)
    assert not out.requires_grad
    xg = x.clone().requires_grad_(True)
    out = f(xg, y)
    assert cnt.frame_count == 2
    assert out.requires_grad
    assert same(out, _body(xg, y))
    out.sum().backward()
    xr = x.clone().requires_grad_(True)
    _body(xr, y).sum().backward()
    assert same(xg.grad, xr.grad)


def test_grad_mode_change_recompiles():
    cnt, f = _compiled()
    x = torch.randn(3, 4, requires_grad=True)
    y = torch.randn(3, 4)
    out = f(x, y)
    assert out.requires_grad
    with torch.no_grad():
        out2 = f(x, y)
    assert cnt.frame_count == 2
    assert not out2.requires_grad
    assert same(out2, out.detach())
    with torch.no_grad():
        f(x, y)
    f(x, y)
    assert cnt.frame_count == 2


def _helper(x):
    return x + 1


def _helper_other(x):
    return x * 10


def _calls_global_helper(x):
    return _helper(x).cos()


def test_rebound_global_function_recompiles():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_calls_global_helper)
    x = torch.randn(4)
    g = globals()
    saved = g["_helper"]
    try:
        assert same(f(x), (x + 1).cos())
        assert cnt.frame_count == 1
        g["_helper"] = _helper_other
        assert same(f(x), (x * 10).cos()), "the compiled code must follow the rebound global"
        assert cnt.frame_count == 2
        g["_helper"] = saved
        assert same(f(x), (x + 1).cos())
        assert cnt.frame_count == 2
    finally:
        g["_helper"] = saved


_SCALE = 2.0


def _uses_global_scalar(x):
    return x * _SCALE


def test_rebound_global_scalar_recompiles():
    global _SCALE
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_uses_global_scalar)
    x = torch.randn(4)
    try:
        assert same(f(x), x * 2.0)
        _SCALE = 3.0
        assert same(f(x), x * 3.0)
        assert cnt.frame_count == 2
    finally:
        _SCALE = 2.0


def test_int_argument_is_specialised():
    cnt = CompileCounter()

    def fn(x, n):
        return x * n + n

    f = framejit.optimize(cnt)(fn)
    x = torch.randn(4)
    assert same(f(x, 2), fn(x, 2))
    assert same(f(x, 3), fn(x, 3))
    assert cnt.frame_count == 2
    assert same(f(x, 2), fn(x, 2))
    assert same(f(x, 3), fn(x, 3))
    assert cnt.frame_count == 2
    # the int is a constant in the graph, not an input
    for gm in cnt.graphs:
        assert len([n for n in gm.graph.nodes if n.op == "placeholder"]) == 1


def test_module_attribute_change_recompiles():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2

        def forward(self, x):
            return x * self.scale

    cnt = CompileCounter()
    m = M()
    opt = framejit.optimize(cnt)(m)
    x = torch.randn(3)
    assert same(opt(x), x * 2)
    m.scale = 5
    assert same(opt(x), x * 5)
    assert cnt.frame_count == 2


# ---------------------------------------------------------------------------------------------
# cache_size_limit


def test_cache_size_limit_warns_once_and_runs_python():
    cnt = CompileCounter()

    def fn(x):
        return torch.tanh(x) - 1

    f = framejit.optimize(cnt)(fn)
    with framejit.config.patch(cache_size_limit=2):
        for n in (2, 3):
            x = torch.randn(n)
            assert same(f(x), fn(x))
        assert cnt.frame_count == 2
        x = torch.randn(4)
        with pytest.warns(UserWarning, match="cache_size_limit"):
            out = f(x)
        assert same(out, fn(x))
        assert cnt.frame_count == 2
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            for n in (5, 6, 7):
                x = torch.randn(n)
                assert same(f(x), fn(x))
        assert not [w for w in rec if "cache_size_limit" in str(w.message)], "warned more than once"
        assert cnt.frame_count == 2
        # the entries within the limit still hit
        x = torch.randn(3)
        assert same(f(x), fn(x))
        assert cnt.frame_count == 2


# ---------------------------------------------------------------------------------------------
# run() and reset()


def test_run_never_compiles_a_fresh_function():
    cnt = CompileCounter()

    def fresh(x):
        return torch.cos(x) + 3

    x = torch.randn(5)
    with framejit.optimize(cnt):
        with framejit.run():
            assert same(fresh(x), torch.cos(x) + 3)
            assert same(fresh(x * 2), torch.cos(x * 2) + 3)
    assert cnt.frame_count == 0
    assert same(framejit.run(fresh)(x), torch.cos(x) + 3)
    assert cnt.frame_count == 0
    assert not cache.entries(fresh.__code__)


def test_run_uses_existing_cache_entries_and_compiles_nothing_new():
    backend = _RuntimeCounter()

    def fn(x):
        return torch.sigmoid(x) * 4

    f = framejit.optimize(backend)(fn)
    x = torch.randn(6)
    assert same(f(x), fn(x))
    assert backend.frame_count == 1 and backend.calls == 1

    with framejit.run():
        assert same(fn(x), torch.sigmoid(x) * 4)  # the plain function: its code has a cache entry
    assert backend.calls == 2, "run() should use the existing cache entry"

    run_fn = framejit.run(fn)
    assert same(run_fn(x), fn(x))
    assert backend.calls >= 3

    x2 = torch.randn(2, 3)  # misses every guard: runs as Python, compiles nothing
    calls = backend.calls
    with framejit.run():
        assert same(fn(x2), torch.sigmoid(x2) * 4)
    assert same(run_fn(x2), torch.sigmoid(x2) * 4)
    assert backend.frame_count == 1
    assert backend.calls == calls


def test_reset_empties_everything():
    cnt = CompileCounter()

    def fn(x):
        return torch.exp(x) / 2

    f = framejit.optimize(cnt)(fn)
    x = torch.randn(4)
    f(x)
    f(x)
    assert cnt.frame_count == 1
    assert cache.entries(fn.__code__)
    framejit.reset()
    assert not cache.entries(fn.__code__)
    assert same(f(x), fn(x))
    assert cnt.frame_count == 2
    # also forgets skip marks / fallbacks: an unsupported function is retried after reset
    framejit.reset()
    assert same(f(x), fn(x))
    assert cnt.frame_count == 3


# ---------------------------------------------------------------------------------------------
# guard_fail_fn / guard_export_fn


@pytest.mark.parametrize("change, word", [
    (lambda x: x.double(), "dtype"),
    (lambda x: torch.randn(7), "shape"),
    (lambda x: x.clone().requires_grad_(True), "requires_grad"),
])
def test_guard_fail_fn_names_what_changed(change, word):
    failures = []
    cnt = CompileCounter()

    def fn(x):
        return x.relu() + 1

    f = framejit.optimize(cnt, guard_fail_fn=failures.append)(fn)
    x = torch.randn(5)
    f(x)
    assert failures == []
    x2 = change(x)
    assert same(f(x2), fn(x2))
    assert cnt.frame_count == 2
    assert len(failures) == 1
    assert word in failures[0].reason, failures[0].reason
    assert str(failures[0])


def test_guard_fail_fn_on_grad_mode():
    failures = []

    def fn(x):
        return x * 3

    f = framejit.optimize(CompileCounter(), guard_fail_fn=failures.append)(fn)
    x = torch.randn(3, requires_grad=True)
    f(x)
    with torch.no_grad():
        f(x)
    assert len(failures) == 1
    assert "grad" in failures[0].reason.lower()


def _linear_then_autocast_query(x, w):
    y = x @ w
    return y + 1 if torch.is_autocast_enabled("cpu") else y - 1


def test_autocast_state_is_guarded_and_its_query_folds():
    failures = []
    cnt = CompileCounter()
    f = framejit.optimize(cnt, guard_fail_fn=failures.append)(_linear_then_autocast_query)
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    assert same(f(x, w), _linear_then_autocast_query(x, w))
    assert cnt.frame_count == 1  # is_autocast_enabled() folded: no break
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = f(x, w), _linear_then_autocast_query(x, w)
    assert got.dtype == want.dtype == torch.bfloat16 and same(got, want)
    assert cnt.frame_count == 2
    assert "autocast changed: now on for cpu (bfloat16)" in failures[0].reason, failures[0].reason
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f(x, w)
    assert same(f(x, w), _linear_then_autocast_query(x, w))
    assert cnt.frame_count == 2  # both entries hit


def test_guard_export_fn_receives_readable_guards():
    exported = []

    def fn(x, n):
        return x.sin() * n

    f = framejit.optimize(CompileCounter(), guard_export_fn=exported.append)(fn)
    f(torch.randn(3), 4)
    assert len(exported) == 1
    guards = list(exported[0])
    kinds = {g.kind for g in guards}
    assert "TENSOR_MATCH" in kinds
    assert kinds & {"EQUALS", "CONSTANT_MATCH"}, kinds
    text = "\n".join(str(g) for g in guards)
    assert "TENSOR_MATCH" in text and "x" in text
    assert all("\n" not in str(g) and str(g).strip() for g in guards)
    f(torch.randn(4), 4)
    assert len(exported) == 2


# ---------------------------------------------------------------------------------------------
# threads


def test_compiled_function_from_four_threads():
    cnt = CompileCounter()

    def fn(x, y):
        a = torch.matmul(x, y)
        return torch.relu(a) + x.sum()

    f = framejit.optimize(cnt)(fn)
    n_threads, n_calls = 4, 50
    barrier = threading.Barrier(n_threads)
    errors = []
    results = [0] * n_threads

    def worker(i):
        try:
            gen = torch.Generator().manual_seed(i)
            size = 3 + i % 2  # two threads share a shape, two another
            barrier.wait()
            for _ in range(n_calls):
                x = torch.randn(size, size, generator=gen)
                y = torch.randn(size, size, generator=gen)
                if not same(f(x, y), fn(x, y)):
                    errors.append(f"thread {i}: wrong result")
                    return
                results[i] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert results == [n_calls] * n_threads
    assert 1 <= cnt.frame_count <= 2 * n_threads


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


def test_compiling_many_instances_of_one_module_class_is_not_recompiling():
    """Regional compilation: each layer compiled on its own shares nn.Linear.forward's code object."""
    failures = []
    cnt = CompileCounter()
    layers = [framejit.optimize(cnt, guard_fail_fn=failures.append)(nn.Linear(4, 4)) for _ in range(12)]
    x = torch.randn(2, 4)
    want = x
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cache size limit warning
        for layer in layers:
            x, want = layer(x), layer._orig_mod(want)
    assert same(x, want)
    assert cnt.frame_count == 12 and failures == []  # a first compile per instance, not a recompile
    frames = cache.compiled_frames(nn.Linear.forward.__code__)
    assert len(frames) == 12
    for frame in frames:  # the identity check of `self` comes first: other layers' entries miss at once
        assert frame.check_fn_source.index("id(___a0)") < frame.check_fn_source.index("___check_tensors")


def test_accumulated_cache_size_limit_bounds_all_instances_together():
    cnt = CompileCounter()
    layers = [framejit.optimize(cnt)(nn.Linear(4, 4)) for _ in range(4)]
    with framejit.config.patch(accumulated_cache_size_limit=3), \
            pytest.warns(UserWarning, match="accumulated_cache_size_limit=3"):
        for layer in layers:
            out = layer(torch.randn(2, 4))
    assert cnt.frame_count == 3 and out.shape == (2, 4)  # the fourth runs as Python


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
