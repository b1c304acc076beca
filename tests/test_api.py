"""The public API (API.md): optimize/compile forms, optimize_assert/fullgraph, disable, allow/disallow_in_graph,
assume_constant_result, config, backends registry, errors, testing helpers, debug output."""
import asyncio
import inspect
import logging
import os
import random

import pytest
import torch
from torch import nn

import framejit
from framejit import cache
from framejit.testing import CompileCounter, CompileCounterWithBackend, EagerAndRecordGraphs, same


def _graph_targets(cnt):
    return [n.target for gm in cnt.graphs for n in gm.graph.nodes
            if n.op in ("call_function", "call_method", "call_module")]


def _line_of(fn, snippet):
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if snippet in line:
            return start + i
    raise AssertionError(f"{snippet!r} not in {fn.__name__}")


# ---------------------------------------------------------------------------------------------
# optimize: decorator, module wrapper, context manager


def test_optimize_as_decorator():
    cnt = CompileCounter()

    @framejit.optimize(cnt)
    def fn(a, b):
        return torch.mm(a, b).tanh()

    a, b = torch.randn(3, 4), torch.randn(4, 2)
    assert same(fn(a, b), torch.mm(a, b).tanh())
    assert cnt.frame_count == 1
    assert cnt.op_count == 2
    assert fn.__name__ == "fn"  # functools.wraps


def test_optimize_decorates_a_method():
    cnt = CompileCounter()

    class Thing:
        def __init__(self):
            self.k = 3

        @framejit.optimize(cnt)
        def go(self, x):
            return x * self.k

    t = Thing()
    x = torch.randn(4)
    assert same(t.go(x), x * 3)
    assert cnt.frame_count == 1


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x):
        return self.lin(x).relu() + self.offset


def test_optimize_module_wrapper_shares_parameters_and_state():
    cnt = CompileCounter()
    mod = _Net()
    opt = framejit.optimize(cnt)(mod)
    assert isinstance(opt, framejit.OptimizedModule)
    assert isinstance(opt, nn.Module)
    assert opt._orig_mod is mod
    x = torch.randn(2, 4)
    assert same(opt(x), mod(x))
    assert cnt.frame_count == 1

    params_opt = list(opt.parameters())
    params_mod = list(mod.parameters())
    assert len(params_opt) == len(params_mod)
    assert all(a is b for a, b in zip(params_opt, params_mod))
    ptrs_opt = {t.data_ptr() for t in opt.state_dict().values()}
    ptrs_mod = {t.data_ptr() for t in mod.state_dict().values()}
    assert ptrs_opt == ptrs_mod

    with torch.no_grad():
        mod.lin.weight.add_(1.0)
        mod.offset.fill_(0.5)
    assert same(opt(x), mod(x)), "an in-place parameter change must show in the compiled module"
    with torch.no_grad():
        next(opt.parameters()).mul_(-1)
    assert same(opt(x), mod(x))
    assert same(opt.state_dict()[[k for k in opt.state_dict() if k.endswith("lin.weight")][0]],
                mod.lin.weight)
    # attribute access falls through to the original
    assert opt.lin is mod.lin
    assert opt.training == mod.training


def test_compile_module_wrapper_is_optimized_module():
    mod = _Net()
    opt = framejit.compile(mod, backend="eager")
    assert isinstance(opt, framejit.OptimizedModule)
    assert opt._orig_mod is mod
    x = torch.randn(2, 4)
    assert same(opt(x), mod(x))


def _inner_for_ctx(x):
    return torch.sin(x) + torch.cos(x)


def test_optimize_as_context_manager_captures_called_frames_only():
    cnt = CompileCounter()
    x = torch.randn(5)
    with framejit.optimize(cnt):
        y = x * 7  # in the frame holding the `with`: not captured
        out = _inner_for_ctx(y)
    assert same(out, _inner_for_ctx(x * 7))
    assert cnt.frame_count == 1
    targets = _graph_targets(cnt)
    assert torch.sin in targets and torch.cos in targets
    assert not any(getattr(t, "__name__", str(t)) == "mul" for t in targets)
    # after the block, plain calls are not captured
    _inner_for_ctx(torch.randn(9))
    assert cnt.frame_count == 1


def test_optimize_context_manager_nested_calls_inlined():
    cnt = CompileCounter()

    def outer(x):
        return _inner_for_ctx(x) * 2

    x = torch.randn(3)
    with framejit.optimize(cnt):
        out = outer(x)
    assert same(out, _inner_for_ctx(x) * 2)
    assert cnt.frame_count == 1  # _inner_for_ctx is inlined into outer's graph


def test_optimize_disable_flag_is_identity():
    def fn(x):
        return x + 1

    assert framejit.optimize(CompileCounter(), disable=True)(fn) is fn
    assert framejit.compile(fn, disable=True) is fn


# ---------------------------------------------------------------------------------------------
# compile forms


def _poly(x):
    return x * x - 3 * x + 1


def test_compile_forms():
    x = torch.randn(6)

    c1 = CompileCounter()
    f1 = framejit.compile(_poly, backend=c1)
    assert same(f1(x), _poly(x)) and c1.frame_count == 1

    c3 = CompileCounter()

    @framejit.compile(backend=c3, fullgraph=True)
    def f3(x):
        return x * x - 3 * x + 1

    assert same(f3(x), _poly(x)) and c3.frame_count == 1

    c4 = CompileCounter()
    f4 = framejit.compile(backend=c4)(_poly)
    framejit.reset()
    assert same(f4(x), _poly(x)) and c4.frame_count == 1


def test_compile_default_backend_without_args():
    """compile(fn) and bare @compile use the default backend, "inductor"."""
    f = framejit.compile(_poly)
    x = torch.randn(4)
    assert same(f(x), _poly(x))

    @framejit.compile
    def f2(x):
        return x * x - 3 * x + 1

    assert same(f2(x), _poly(x))


# ---------------------------------------------------------------------------------------------
# optimize_assert / nopython / fullgraph on a data-dependent branch


def _data_dependent(x):
    y = x.cos()
    if x.sum() > 0:
        return y + 1
    return y - 1


def _eager_data_dependent(x):
    return x.cos() + 1 if x.sum() > 0 else x.cos() - 1


def _assert_names_user_line(err):
    msg = str(err)
    assert os.path.basename(__file__) in msg, msg
    assert str(_line_of(_data_dependent, "if x.sum() > 0")) in msg, msg


@pytest.mark.parametrize("form", ["optimize_assert", "nopython", "fullgraph", "compile_decorator"])
def test_data_dependent_branch_raises_under_fullgraph(form):
    cnt = CompileCounter()
    if form == "optimize_assert":
        f = framejit.optimize_assert(cnt)(_data_dependent)
    elif form == "nopython":
        f = framejit.optimize(cnt, nopython=True)(_data_dependent)
    elif form == "fullgraph":
        f = framejit.compile(_data_dependent, backend=cnt, fullgraph=True)
    else:
        f = framejit.compile(backend=cnt, fullgraph=True)(_data_dependent)
    with pytest.raises(framejit.exc.Unsupported) as info:
        f(torch.ones(4))
    _assert_names_user_line(info.value)
    assert isinstance(info.value, framejit.exc.FramejitError)
    # still raises on the next call (no silent fallback cached)
    with pytest.raises(framejit.exc.Unsupported):
        f(torch.ones(4))


def test_data_dependent_branch_runs_as_python_with_info_log(caplog):
    caplog.set_level(logging.INFO, logger="framejit")
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_data_dependent)
    for x in (torch.ones(4), -torch.ones(4), torch.randn(4)):
        assert same(f(x), _eager_data_dependent(x))
    records = [r for r in caplog.records if r.name.startswith("framejit") and r.levelno == logging.INFO]
    assert records, "the reason for running as Python should be logged at INFO"
    assert any("_data_dependent" in r.getMessage() for r in records)


def test_fullgraph_after_fallback_still_raises():
    f = framejit.optimize(CompileCounter())(_data_dependent)
    x = torch.ones(3)
    assert same(f(x), _eager_data_dependent(x))
    g = framejit.optimize_assert(CompileCounter())(_data_dependent)
    with pytest.raises(framejit.exc.Unsupported):
        g(x)


# ---------------------------------------------------------------------------------------------
# disable


def test_disable_decorator_is_not_inlined():
    @framejit.disable
    def hidden(x):
        return torch.sin(x) * 5

    def caller(x):
        return hidden(x.cos()) + 1

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(caller)
    x = torch.randn(4)
    assert same(f(x), torch.sin(x.cos()) * 5 + 1)
    assert torch.sin not in _graph_targets(cnt), "a disabled function must not be traced into a graph"
    g = framejit.optimize_assert(CompileCounter())(caller)
    with pytest.raises(framejit.exc.Unsupported):
        g(x)


def test_disable_decorator_on_called_frame_is_not_captured():
    @framejit.disable
    def hidden(x):
        return torch.sin(x) * 5

    cnt = CompileCounter()
    x = torch.randn(4)
    with framejit.optimize(cnt):
        out = hidden(x)
    assert same(out, torch.sin(x) * 5)
    assert cnt.frame_count == 0


def test_disable_recursive_covers_callees():
    def leaf(x):
        return x.exp() - 1

    @framejit.disable
    def mid(x):
        return leaf(x) * 2

    cnt = CompileCounter()
    x = torch.randn(3)
    with framejit.optimize(cnt):
        assert same(mid(x), (x.exp() - 1) * 2)
    assert cnt.frame_count == 0


def test_disable_context_manager_stops_capture():
    cnt = CompileCounter()

    def fn(x):
        return torch.sigmoid(x) + 2

    x = torch.randn(4)
    with framejit.optimize(cnt):
        with framejit.disable():
            assert same(fn(x), torch.sigmoid(x) + 2)
        assert cnt.frame_count == 0
        assert same(fn(x), torch.sigmoid(x) + 2)  # capture resumes after the inner block
    assert cnt.frame_count == 1


def test_disable_non_recursive():
    def leaf(x):
        return x.exp() - 1

    def mid(x):
        return leaf(x) * 2

    framejit.disable(mid, recursive=False)
    cnt = CompileCounter()
    x = torch.randn(3)
    with framejit.optimize(cnt):
        assert same(mid(x), (x.exp() - 1) * 2)
    assert cnt.frame_count == 1  # leaf is still captured
    assert torch.Tensor.exp in _graph_targets(cnt) or "exp" in _graph_targets(cnt)


# ---------------------------------------------------------------------------------------------
# allow_in_graph / disallow_in_graph / assume_constant_result


def test_allow_in_graph_makes_one_opaque_node():
    def noisy(x):
        print("noisy called")
        return x + 1

    def fn(x):
        return noisy(x.sin()).cos()

    x = torch.randn(4)
    with pytest.raises(framejit.exc.Unsupported):
        framejit.optimize_assert(CompileCounter())(fn)(x)

    framejit.allow_in_graph(noisy)
    framejit.reset()
    cnt = CompileCounter()
    f = framejit.optimize_assert(cnt)(fn)
    assert same(f(x), (x.sin() + 1).cos())
    assert cnt.frame_count == 1
    nodes = [n for n in cnt.graphs[0].graph.nodes if n.target is noisy]
    assert len(nodes) == 1 and nodes[0].op == "call_function"
    assert cnt.op_count == 3  # sin, noisy, cos


def test_allowed_function_is_not_captured_when_the_graph_runs():
    """The compiled graph runs with capture off: the opaque node's function is not compiled on its own."""
    def scale(x):
        return x * 3

    framejit.allow_in_graph(scale)

    def fn(x):
        return scale(x.sin()).cos()

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), (x.sin() * 3).cos())
    assert cnt.frame_count == 1
    assert not cache.entries(scale.__code__)


def test_disallow_in_graph_raises_under_fullgraph():
    def helper(x):
        return x + 1

    def fn(x):
        return helper(x) * 2

    x = torch.randn(4)
    cnt = CompileCounter()
    assert same(framejit.optimize_assert(cnt)(fn)(x), (x + 1) * 2)
    assert cnt.frame_count == 1

    framejit.disallow_in_graph(helper)
    framejit.reset()
    with pytest.raises(framejit.exc.Unsupported):
        framejit.optimize_assert(CompileCounter())(fn)(x)
    framejit.reset()
    assert same(framejit.optimize(CompileCounter())(fn)(x), (x + 1) * 2)


def test_assume_constant_result():
    calls = []

    @framejit.assume_constant_result
    def magic():
        calls.append(1)
        return random.Random(0).randint(2, 9)

    value = random.Random(0).randint(2, 9)

    def fn(x):
        return x * magic()

    cnt = CompileCounter()
    f = framejit.optimize_assert(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), x * value)
    n_calls = len(calls)
    assert same(f(torch.ones(3)), torch.ones(3) * value)
    assert cnt.frame_count == 1
    assert len(calls) == n_calls, "the constant's function is not called again on a cache hit"
    assert magic not in _graph_targets(cnt)


# ---------------------------------------------------------------------------------------------
# config


def test_config_patch_context_manager_and_decorator():
    default = framejit.config.cache_size_limit
    assert default == 8
    with framejit.config.patch(cache_size_limit=3, suppress_errors=True):
        assert framejit.config.cache_size_limit == 3
        assert framejit.config.suppress_errors is True
    assert framejit.config.cache_size_limit == default
    assert framejit.config.suppress_errors is False

    @framejit.config.patch(debug=True)
    def read():
        return framejit.config.debug

    assert read() is True
    assert framejit.config.debug is False
    with pytest.raises(Exception):
        framejit.config.patch(no_such_setting=1)
    for name in ("debug", "verbose", "log_level", "output_code", "dynamic_shapes", "cache_size_limit",
                 "suppress_errors"):
        assert hasattr(framejit.config, name)


def test_config_patch_restores_on_exception():
    with pytest.raises(ValueError):
        with framejit.config.patch(cache_size_limit=1):
            raise ValueError
    assert framejit.config.cache_size_limit == 8


# ---------------------------------------------------------------------------------------------
# backends registry


def test_register_lookup_list_backends():
    name = "framejit_test_backend_xyz"
    seen = []

    def my_backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    try:
        framejit.register_backend(my_backend, name=name)
        assert name in framejit.list_backends()
        assert framejit.lookup_backend(name) is my_backend
        assert framejit.backends.BACKENDS[name] is my_backend
        names = framejit.list_backends()
        assert names == sorted(names)
        assert "eager" in framejit.list_backends()

        f = framejit.optimize(name)(_poly)
        x = torch.randn(3)
        assert same(f(x), _poly(x))
        assert len(seen) == 1
        g = framejit.compile(_inner_for_ctx, backend=name)
        assert same(g(x), _inner_for_ctx(x))
        assert len(seen) == 2
    finally:
        framejit.backends.BACKENDS.pop(name, None)


def test_register_backend_as_decorator_with_tags():
    name = "framejit_test_debug_tagged"
    try:
        @framejit.register_backend(name=name, tags=("debug",))
        def tagged(gm, example_inputs):
            return gm.forward

        assert name not in framejit.list_backends()
        assert name in framejit.list_backends(exclude_tags=())
        assert framejit.lookup_backend(name) is tagged
    finally:
        framejit.backends.BACKENDS.pop(name, None)


def test_builtin_backends_by_name():
    x = torch.randn(3)
    for name in ("eager", "debug"):
        f = framejit.optimize(name)(_poly)
        framejit.reset()
        assert same(f(x), _poly(x))
    assert callable(framejit.lookup_backend("eager"))


def test_unknown_backend_name_fails_at_optimize_time():
    with pytest.raises(Exception) as info:
        framejit.optimize("no_such_backend_qq")
    assert "no_such_backend_qq" in str(info.value)
    assert "eager" in str(info.value)
    with pytest.raises(Exception) as info:
        framejit.compile(_poly, backend="no_such_backend_qq")
    assert "eager" in str(info.value)


def test_non_callable_to_compile_raises_type_error():
    with pytest.raises(TypeError):
        framejit.compile(3)
    with pytest.raises(TypeError):
        framejit.compile("not a function", backend="eager")
    with pytest.raises(TypeError):
        framejit.optimize("eager")(42)


def _exploding_backend(gm, example_inputs):
    raise ValueError("kaboom from backend")


def test_backend_that_raises_gives_backend_compiler_failed():
    f = framejit.optimize(_exploding_backend)(_poly)
    with pytest.raises(framejit.exc.BackendCompilerFailed) as info:
        f(torch.randn(3))
    err = info.value
    assert "_exploding_backend" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert "kaboom" in str(err.__cause__)
    assert isinstance(err, framejit.exc.FramejitError)


def test_backend_that_raises_with_suppress_errors_warns_and_runs_python():
    f = framejit.optimize(_exploding_backend)(_poly)
    x = torch.randn(3)
    with framejit.config.patch(suppress_errors=True):
        with pytest.warns(UserWarning):
            out = f(x)
        assert same(out, _poly(x))
        assert same(f(x * 2), _poly(x * 2))


def test_named_backend_that_raises_is_named():
    name = "framejit_test_exploding"
    try:
        framejit.register_backend(_exploding_backend, name=name)
        f = framejit.optimize(name)(_poly)
        with pytest.raises(framejit.exc.BackendCompilerFailed) as info:
            f(torch.randn(3))
        assert name in str(info.value)
    finally:
        framejit.backends.BACKENDS.pop(name, None)


# ---------------------------------------------------------------------------------------------
# testing helpers


def test_compile_counter_counts_frames_and_ops():
    cnt = CompileCounter()

    def fn(x):
        return x.sin().cos() + 1

    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), fn(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 3)
    f(torch.randn(2))
    assert (cnt.frame_count, cnt.op_count) == (2, 6)


def test_compile_counter_with_backend():
    cnt = CompileCounterWithBackend("eager")
    f = framejit.optimize(cnt)(_poly)
    x = torch.randn(4)
    assert same(f(x), _poly(x))
    assert cnt.frame_count == 1
    assert cnt.op_count >= 4


def test_eager_and_record_graphs():
    rec = EagerAndRecordGraphs()
    f = framejit.optimize(rec)(_inner_for_ctx)
    x = torch.randn(4)
    assert same(f(x), _inner_for_ctx(x))
    assert len(rec.graphs) == 1
    assert isinstance(rec.graphs[0], torch.fx.GraphModule)
    direct = rec.graphs[0](x)
    if isinstance(direct, (tuple, list)):
        (direct,) = direct
    assert same(direct, f(x))


def test_same():
    a = torch.randn(3)
    assert same(a, a.clone())
    assert same(a, a + 1e-6)
    assert not same(a, a + 1)
    assert same(a, a + 0.5, tol=1.0)
    assert not same(a, a[:2])
    assert not same(a, a.double())
    assert same((a, [a, {"k": a}], 3), (a.clone(), [a.clone(), {"k": a.clone()}], 3))
    assert not same((a, 3), (a, 4))
    assert not same([a], (a,))
    assert same(torch.tensor([1, 2]), torch.tensor([1, 2]))
    assert not same(torch.tensor([1, 2]), torch.tensor([1, 3]))
    nan = torch.tensor([float("nan")])
    assert not same(nan, nan)
    assert same(nan, nan, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# debug output


def test_config_debug_prints_bytecode_guards_and_graph(capsys):
    def fn_dbg(x):
        return torch.sin(x) + 1

    with framejit.config.patch(debug=True):
        f = framejit.optimize(CompileCounter())(fn_dbg)
        f(torch.randn(3))
    out = capsys.readouterr().out
    for section in ("ORIGINAL BYTECODE", "MODIFIED BYTECODE", "GUARDS"):
        assert section in out, section
    assert "fn_dbg" in out
    assert "sin" in out  # the graph
    assert out.index("ORIGINAL BYTECODE") < out.index("MODIFIED BYTECODE")


def test_no_debug_output_by_default(capsys):
    f = framejit.optimize(CompileCounter())(_poly)
    f(torch.randn(3))
    out = capsys.readouterr().out
    assert "ORIGINAL BYTECODE" not in out


# ---------------------------------------------------------------------------------------------
# generators and coroutines


def _gen(x, n):
    for i in range(n):
        yield x + i


async def _coro(x):
    await asyncio.sleep(0)
    return x * 2


def test_generator_called_inside_compiled_function():
    def fn(x):
        total = x * 0
        for item in _gen(x, 3):
            total = total + item
        return total

    f = framejit.optimize(CompileCounter())(fn)
    x = torch.randn(4)
    assert same(f(x), fn(x))
    assert same(f(x), fn(x))


def test_generator_and_coroutine_frames_under_context_manager():
    x = torch.randn(4)
    cnt = CompileCounter()
    with framejit.optimize(cnt):
        items = list(_gen(x, 3))
        out = asyncio.run(_coro(x))
    assert same(items, [x, x + 1, x + 2])
    assert same(out, x * 2)


def test_optimized_generator_function():
    g = framejit.optimize(CompileCounter())(_gen)
    x = torch.randn(3)
    assert same(list(g(x, 4)), list(_gen(x, 4)))

    c = framejit.optimize(CompileCounter())(_coro)
    assert same(asyncio.run(c(x)), x * 2)


def test_generator_throw_close_inside_context():
    def gen():
        try:
            yield 1
            yield 2
        except KeyError:
            yield "caught"

    with framejit.optimize(CompileCounter()):
        it = gen()
        assert next(it) == 1
        assert it.throw(KeyError) == "caught"
        it.close()


# ---------------------------------------------------------------------------------------------
# exceptions


def test_exception_classes():
    exc = framejit.exc
    for cls in (exc.Unsupported, exc.UserError, exc.BackendCompilerFailed, exc.CacheLimitExceeded):
        assert issubclass(cls, exc.FramejitError)
    assert issubclass(exc.FramejitError, Exception)


def test_cache_entries_live_in_code_not_wrapper():
    cnt = CompileCounter()

    def fn(x):
        return x.abs()

    f1 = framejit.optimize(cnt)(fn)
    f2 = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    f1(x)
    f2(x)
    assert cnt.frame_count == 1  # the second wrapper reuses the code object's entry
    assert cache.entries(fn.__code__)


def test_dynamic_true_warns_that_shapes_are_specialised():
    with pytest.warns(UserWarning, match="dynamic shapes are not supported yet"):
        f = framejit.compile(torch.neg, backend="eager", dynamic=True)
    assert torch.equal(f(torch.ones(2)), -torch.ones(2))
    with pytest.warns(UserWarning, match="dynamic shapes"):
        framejit.optimize("eager", dynamic=True)
