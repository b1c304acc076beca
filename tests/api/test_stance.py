"""framejit.set_stance, as torch.compiler.set_stance: force_eager runs compiled functions as Python (no compile,
no cache), eager_on_recompile runs a frame as Python instead of recompiling it, fail_on_recompile raises; usable as
a call, a context manager and a decorator."""

import pytest
import torch

import framejit
from framejit import stance
from framejit.testing import CompileCounter, same


@pytest.fixture(autouse=True)
def _default_stance():
    yield
    framejit.set_stance("default")


class CallCounter(CompileCounter):
    """A CompileCounter whose compiled graphs count their calls: a call that ran compiled code."""

    def __init__(self):
        super().__init__()
        self.runs = 0

    def __call__(self, gm, example_inputs):
        forward = super().__call__(gm, example_inputs)

        def run(*args):
            self.runs += 1
            return forward(*args)

        return run


def _fn(x):
    return x.sin() + 1


def test_force_eager_as_a_context_manager_compiles_nothing_and_runs_no_cached_code():
    cnt = CallCounter()
    f = framejit.optimize(cnt)(_fn)
    x = torch.randn(3)
    with framejit.set_stance("force_eager"):
        assert same(f(x), _fn(x))
    assert (cnt.frame_count, cnt.runs) == (0, 0)
    f(x)
    assert (cnt.frame_count, cnt.runs) == (1, 1)
    with framejit.set_stance("force_eager"):
        assert same(f(x), _fn(x))
    assert (cnt.frame_count, cnt.runs) == (1, 1), "the cached entry is not used either"
    f(x)
    assert cnt.runs == 2


def test_force_eager_as_a_call_until_set_back():
    cnt = CompileCounter()
    f = framejit.compile(_fn, backend=cnt)
    framejit.set_stance("force_eager")
    f(torch.randn(3))
    assert cnt.frame_count == 0
    framejit.set_stance("default")
    f(torch.randn(3))
    assert cnt.frame_count == 1


def test_force_eager_as_a_decorator_holds_for_each_call_only():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_fn)

    @framejit.set_stance("force_eager")
    def outer(x):
        return f(x) * 2

    assert stance.current().stance == "default", "decorating sets nothing"
    x = torch.randn(3)
    assert same(outer(x), _fn(x) * 2)
    assert cnt.frame_count == 0
    assert stance.current().stance == "default"
    f(x)
    assert cnt.frame_count == 1


def test_force_eager_covers_modules_and_with_blocks():
    cnt = CompileCounter()
    mod = torch.nn.Linear(3, 2)
    opt = framejit.optimize(cnt)(mod)
    x = torch.randn(4, 3)
    with framejit.set_stance("force_eager"):
        assert same(opt(x), mod(x))
        with framejit.optimize(cnt):
            _fn(x)
    assert cnt.frame_count == 0


def test_force_eager_warns_nothing():
    """A compiled function run eagerly is not 'a first call that compiled nothing'."""
    import warnings

    f = framejit.optimize(CompileCounter())(_fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with framejit.set_stance("force_eager"):
            f(torch.randn(3))
        f(torch.randn(3))


def test_eager_on_recompile_compiles_first_then_runs_misses_as_python():
    cnt = CallCounter()
    f = framejit.optimize(cnt)(_fn)
    a, b = torch.randn(3), torch.randn(2, 5)
    with framejit.set_stance("eager_on_recompile"):
        assert same(f(a), _fn(a))
        assert (cnt.frame_count, cnt.runs) == (1, 1), "a first compile is not a recompile"
        assert same(f(b), _fn(b))
        assert (cnt.frame_count, cnt.runs) == (1, 1), "the miss ran as Python"
        assert same(f(a), _fn(a))
        assert cnt.runs == 2, "a hit still runs the cached code"
    f(b)
    assert cnt.frame_count == 2, "back at default, the miss recompiles"


def test_fail_on_recompile_raises_naming_the_frame_and_the_guard():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_fn)
    with framejit.set_stance("fail_on_recompile"):
        f(torch.randn(3))
        f(torch.randn(3))
        assert cnt.frame_count == 1
        with pytest.raises(framejit.exc.RecompileError) as info:
            f(torch.randn(2, 5))
    msg = str(info.value)
    assert "framejit would recompile _fn" in msg and "set_stance('fail_on_recompile')" in msg
    assert "L['x']: shape mismatch" in msg and "[2, 5]" in msg, msg
    assert isinstance(info.value, RuntimeError)
    f(torch.randn(2, 5))
    assert cnt.frame_count == 2


def test_unknown_stance_is_an_error_listing_the_valid_ones():
    with pytest.raises(ValueError, match="unknown stance 'eager'.*force_eager, eager_on_recompile"):
        framejit.set_stance("eager")
    assert stance.current().stance == "default"


def test_set_stance_inside_a_compiled_function_is_refused():
    def fn(x):
        framejit.set_stance("force_eager")
        return x + 1

    with pytest.raises(RuntimeError, match="set_stance was called inside a compiled function"):
        framejit.optimize(CompileCounter())(fn)(torch.randn(2))
    assert stance.current().stance == "default"


def test_skip_guard_eval_unsafe_is_accepted_and_guards_still_hold():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_fn)
    with framejit.set_stance(skip_guard_eval_unsafe=True):
        assert stance.current().skip_guard_eval_unsafe
        a, b = torch.randn(3), torch.randn(2, 5)
        assert same(f(a), _fn(a)) and same(f(b), _fn(b))
    assert cnt.frame_count == 2
    assert not stance.current().skip_guard_eval_unsafe
