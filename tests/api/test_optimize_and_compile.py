"""The public API (docs/api.md): framejit.optimize as a decorator, module wrapper and context manager,
and the forms of framejit.compile."""

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import graph_targets, poly, sin_plus_cos


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
    assert same(opt.state_dict()[[k for k in opt.state_dict() if k.endswith("lin.weight")][0]], mod.lin.weight)
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


def test_optimize_as_context_manager_captures_called_frames_only():
    cnt = CompileCounter()
    x = torch.randn(5)
    with framejit.optimize(cnt):
        y = x * 7  # in the frame holding the `with`: not captured
        out = sin_plus_cos(y)
    assert same(out, sin_plus_cos(x * 7))
    assert cnt.frame_count == 1
    targets = graph_targets(cnt)
    assert torch.sin in targets and torch.cos in targets
    assert not any(getattr(t, "__name__", str(t)) == "mul" for t in targets)
    # after the block, plain calls are not captured
    sin_plus_cos(torch.randn(9))
    assert cnt.frame_count == 1


def test_optimize_context_manager_nested_calls_inlined():
    cnt = CompileCounter()

    def outer(x):
        return sin_plus_cos(x) * 2

    x = torch.randn(3)
    with framejit.optimize(cnt):
        out = outer(x)
    assert same(out, sin_plus_cos(x) * 2)
    assert cnt.frame_count == 1  # sin_plus_cos is inlined into outer's graph


def test_optimize_disable_flag_is_identity():
    def fn(x):
        return x + 1

    assert framejit.optimize(CompileCounter(), disable=True)(fn) is fn
    assert framejit.compile(fn, disable=True) is fn


def test_framejit_disable_in_the_environment_turns_compiling_off(monkeypatch):
    def fn(x):
        return x + 1

    cnt = CompileCounter()
    monkeypatch.setenv("FRAMEJIT_DISABLE", "1")
    assert framejit.compile(fn, backend=cnt) is fn
    with framejit.optimize(cnt):
        framejit.optimize(cnt)(fn)(torch.ones(2))
    assert cnt.frame_count == 0
    monkeypatch.setenv("FRAMEJIT_DISABLE", "0")
    framejit.optimize(cnt)(fn)(torch.ones(2))
    assert cnt.frame_count == 1


# ---------------------------------------------------------------------------------------------
# compile forms


def test_compile_forms():
    x = torch.randn(6)

    c1 = CompileCounter()
    f1 = framejit.compile(poly, backend=c1)
    assert same(f1(x), poly(x)) and c1.frame_count == 1

    c3 = CompileCounter()

    @framejit.compile(backend=c3, fullgraph=True)
    def f3(x):
        return x * x - 3 * x + 1

    assert same(f3(x), poly(x)) and c3.frame_count == 1

    c4 = CompileCounter()
    f4 = framejit.compile(backend=c4)(poly)
    framejit.reset()
    assert same(f4(x), poly(x)) and c4.frame_count == 1


def test_compile_default_backend_without_args():
    """compile(fn) and bare @compile use the default backend, "inductor"."""
    f = framejit.compile(poly)
    x = torch.randn(4)
    assert same(f(x), poly(x))

    @framejit.compile
    def f2(x):
        return x * x - 3 * x + 1

    assert same(f2(x), poly(x))


def _relu_of_sums(x):
    return torch.relu(torch.cos(x) + torch.sin(x))


def test_a_compiled_function_called_in_a_compiled_frame_is_part_of_its_graph():
    inner_cnt, outer_cnt = CompileCounter(), CompileCounter()
    sin_times_ten = framejit.run()(lambda x: torch.sin(x) * 10)
    plus_one = framejit.optimize(inner_cnt, nopython=True)(lambda x: sin_times_ten(x) + 1)
    outer = framejit.optimize(outer_cnt, nopython=True)(lambda x: torch.relu(plus_one(x)))
    x = torch.randn(4, 5)
    assert same(outer(x), torch.relu(torch.sin(x) * 10 + 1))
    assert (inner_cnt.frame_count, outer_cnt.frame_count, outer_cnt.op_count) == (0, 1, 4)


def test_the_outermost_context_wins_when_wrappers_nest():
    first, second = CompileCounter(), CompileCounter()
    twice = framejit.optimize(second, nopython=True)(framejit.optimize(first, nopython=True)(_relu_of_sums))
    x = torch.randn(4)
    assert same(twice(x), _relu_of_sums(x))
    assert (first.frame_count, second.frame_count) == (0, 1)
    # run() of an optimized function uses its cache and compiles nothing new
    cnt = CompileCounter()
    optimized = framejit.optimize(cnt)(_relu_of_sums)
    optimized(torch.randn(3))
    framejit.run(optimized)(torch.randn(3))
    framejit.run(optimized)(torch.randn(3, 3))  # a miss: runs as Python
    assert cnt.frame_count == 1
    # and a disabled function stays disabled under optimize
    cnt = CompileCounter()
    framejit.optimize(cnt)(framejit.disable(_relu_of_sums))(torch.randn(3))
    assert cnt.frame_count == 0


def test_a_compiled_submodule_inside_a_compiled_model_is_one_graph():
    inner_cnt, outer_cnt = CompileCounter(), CompileCounter()
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    model[0] = framejit.optimize(inner_cnt)(model[0])
    compiled = framejit.optimize(outer_cnt, nopython=True)(model)
    x = torch.randn(2, 4)
    expected = model._modules["1"](model[0]._orig_mod(x))
    assert same(compiled(x), expected)
    assert (inner_cnt.frame_count, outer_cnt.frame_count, outer_cnt.op_count) == (0, 1, 2)


def test_a_torch_modules_forward_is_captured_while_its_optimized_module_lives():
    import gc

    from framejit import capture_policy

    forward = nn.Linear.forward.__code__
    assert capture_policy.capture_refusal(forward) is not None  # torch's own code: not captured by itself
    counter = CompileCounter()
    compiled = framejit.optimize(counter)(nn.Linear(3, 2))
    x = torch.randn(4, 3)
    assert same(compiled(x), compiled._orig_mod(x)) and counter.frame_count == 1
    assert capture_policy.capture_refusal(forward) is None
    framejit.reset()  # (the forcing belongs to the live module, not to the cache)
    assert same(compiled(x), compiled._orig_mod(x)) and counter.frame_count == 2
    del compiled
    gc.collect()
    assert capture_policy.capture_refusal(forward) is not None
