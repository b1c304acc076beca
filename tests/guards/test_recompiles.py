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
