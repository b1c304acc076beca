"""Guards and the cache: what recompiles and what hits, and the cache size limit."""

import warnings

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same


def _body(x, y):
    return torch.sin(x) * 2 + y


def _compiled(cnt=None, fn=_body, **kwargs):
    cnt = cnt if cnt is not None else CompileCounter()
    return cnt, framejit.optimize(cnt, **kwargs)(fn)


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


def _writes_then_reads(row, x):
    row.add_(1)
    return x * 2


def test_inputs_that_become_views_of_one_another_recompile_with_the_reason():
    # AOTAutograd compiles for the inputs' aliasing: code for distinct tensors, run on a row and its matrix, would
    # read the matrix before the write
    failures = []
    f = framejit.optimize("aot_eager", guard_fail_fn=failures.append)(_writes_then_reads)
    for aliased in (False, True, False, True):
        x = torch.zeros(3, 2)
        row = x[0] if aliased else torch.zeros(2)  # storage offset 0 either way
        want_x = x.clone()
        want = _writes_then_reads(want_x[0] if aliased else row.clone(), want_x)
        assert same(f(row, x), want)
    assert len(failures) == 1, [f.reason for f in failures]
    assert "share storage" in failures[0].reason and "(L['row'], L['x'])" in failures[0].reason, failures[0].reason


def test_the_same_sharing_hits_the_cache():
    cnt, f = _compiled(fn=_writes_then_reads)
    for i in range(4):
        x = torch.zeros(3, 2)
        assert same(f(x[0], x), _writes_then_reads(*(lambda c: (c[0], c))(torch.zeros(3, 2))))
    assert cnt.frame_count == 1


def test_inductor_writes_the_row_it_is_given_under_symbolic_sizes():
    # AOTAutograd's cache key leaves out the storage offsets of aliased inputs: a second row must not reuse the
    # code compiled for the first
    def write_row(row, x):
        row[row > 0] = torch.sum(row)
        return x * 2

    f = framejit.compile(write_row, backend="inductor")
    for n, i in [(3, 1), (5, 2), (5, 3), (5, 4)]:  # the second size makes dim 0 symbolic
        x = torch.randn(n, 8)
        want_x = x.clone()
        want = write_row(want_x[i], want_x)
        torch.testing.assert_close(f(x[i], x), want)
        torch.testing.assert_close(x, want_x, msg=f"n={n}, row {i}")


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


def test_int_argument_is_specialised_with_dynamic_false():
    cnt = CompileCounter()

    def fn(x, n):
        return x * n + n

    f = framejit.optimize(cnt, dynamic=False)(fn)  # by default a varying int becomes symbolic (test_dynamic_shapes)
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

    f = framejit.optimize(cnt, dynamic=False)(fn)  # every size compiles anew
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


class _Scale:
    def __init__(self, k):
        self.k = k


def _scaled(x, a, b, c):
    a.k = a.k + 1  # a write through one name is seen through the others when two are one object
    return x * a.k + x * b.k + x * c.k


def test_objects_of_one_type_kept_apart_by_one_check_and_an_alias_recompiles():
    cnt, f = _compiled(fn=_scaled)
    x = torch.randn(3)
    assert same(f(x, _Scale(1), _Scale(2), _Scale(3)), _scaled(x, _Scale(1), _Scale(2), _Scale(3)))
    entry = framejit.cache.compiled_frames(_scaled.__code__)[0]
    assert entry.check_fn_source.count("___all_distinct(") == 1 and " is not " not in entry.check_fn_source
    one, eager_one = _Scale(5), _Scale(5)
    assert same(f(x, one, one, _Scale(7)), _scaled(x, eager_one, eager_one, _Scale(7)))
    assert cnt.frame_count == 2 and one.k == eager_one.k == 6


@pytest.mark.parametrize("change", ["forward_hook", "forward_pre_hook", "backward_hook", "instance_forward"])
def test_each_module_hook_or_instance_forward_added_after_compiling_is_seen(change):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    cnt, f = _compiled(fn=model)
    x = torch.randn(3, 4, requires_grad=True)
    assert same(f(x), model(x))
    entry = framejit.cache.compiled_frames(type(model).forward.__code__)[0]
    assert "___modules_without_hooks(" in entry.check_fn_source
    seen = []
    layer = model[2]
    if change == "forward_hook":
        layer.register_forward_hook(lambda mod, inp, out: out * 3)
    elif change == "forward_pre_hook":
        layer.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
    elif change == "backward_hook":
        layer.register_full_backward_hook(lambda mod, gin, gout: seen.append(gout[0].shape))
    else:
        layer.forward = lambda inp: inp[:, :2] * 5
    got, expected = f(x), model(x)
    assert same(got, expected)
    got.sum().backward()
    assert cnt.frame_count == 2 or change == "backward_hook"  # (a backward hook: the module call runs as Python)
    assert seen == ([torch.Size([3, 2])] if change == "backward_hook" else [])


def test_modules_without_hooks_reads_what_the_python_check_reads():
    from framejit._C import _tensor_guard

    check = _tensor_guard.modules_without_hooks
    plain, hooked = nn.Linear(2, 2), nn.Linear(2, 2)
    hooked.register_forward_hook(lambda *a: None)
    assert check(b"\x03\x03", plain, plain) is True
    assert check(b"\x00", hooked) is True and check(b"\x01", hooked) is False  # forward dicts only with flag 1
    hooked._forward_hooks.clear()
    hooked.forward = hooked.forward
    assert check(b"\x01", hooked) is True and check(b"\x02", hooked) is False
    with pytest.raises(AttributeError):
        check(b"\x00", object())  # not a module: the guard raises, which is a miss
    with pytest.raises(TypeError):
        check(b"\x00\x00", plain)


class _Config:
    def __init__(self):
        self.scale, self.shift, self.mode, self.flag = 2, 0.5, "add", True
        self.table = {"a": 1, "b": (1, 2)}


def _configured(x, cfg):
    y = x * cfg.scale + cfg.shift if cfg.flag else x
    y = y + cfg.table["a"] * cfg.table["b"][1]
    return y + 1 if cfg.mode == "add" else y - 1


@pytest.mark.parametrize(
    "change",
    [
        ("scale", 3),
        ("scale", 2.0),
        ("shift", 1.5),
        ("mode", "sub"),
        ("flag", False),
        ("table", "a", 5),
        ("table", "b", (1, 3)),
    ],
)
def test_attributes_and_items_checked_in_one_call_still_see_each_change(change):
    cnt, f = _compiled(fn=_configured)
    cfg, x = _Config(), torch.randn(3)
    assert same(f(x, cfg), _configured(x, cfg))
    entry = framejit.cache.compiled_frames(_configured.__code__)[0]
    assert entry.check_fn_source.count("___values_match(") == 2  # cfg's attributes, cfg.table's items
    if len(change) == 2:
        setattr(cfg, *change)
    else:
        cfg.table[change[1]] = change[2]
    assert same(f(x, cfg), _configured(x, cfg))
    assert cnt.frame_count == 2


def test_values_match_reads_what_the_python_checks_read():
    import weakref
    from framejit._C import _tensor_guard

    def check(entries, obj):
        return _tensor_guard.values_match(_tensor_guard.make_value_spec(entries), obj)

    cfg = _Config()
    cfg.fn, cfg.cls = _scaled, _Scale
    attr, item, absent = 0, 1, 2
    equal, identical, weakly, code = 0, 1, 2, 3
    spec = (
        (attr, "scale", equal, 2, int),
        (attr, "flag", identical, True, None),
        (attr, "cls", weakly, weakref.ref(_Scale), None),
        (attr, "fn", code, _scaled.__code__, type(_scaled)),
    )
    assert check(spec, cfg) is True
    assert check(((item, "a", equal, 1, int), (absent, "c", identical, None, None)), cfg.table) is True
    assert check(((absent, "a", identical, None, None),), cfg.table) is False
    assert check(((attr, "scale", equal, 2.0, float),), cfg) is False  # 2 == 2.0, but not of the type traced
    cfg.flag, cfg.cls, cfg.fn = 1, _Config, _configured
    for entry in spec[1:]:
        assert check((entry,), cfg) is False
    cfg.fn = lambda: None
    cfg.fn.__code__ = _scaled.__code__.replace(co_name="other")
    assert check(spec[3:], cfg) is False
    with pytest.raises(AttributeError):
        check(((attr, "missing", equal, 1, int),), cfg)  # the guard raises: a miss
    with pytest.raises(KeyError):
        check(((item, "missing", equal, 1, int),), cfg.table)
    with pytest.raises(ValueError):
        _tensor_guard.make_value_spec(((attr, "scale", 9, 2, int),))  # an unknown mode is refused when made
