"""Failure behaviour: a backend failure or an internal error runs the frame as Python with one warning
naming it under config.suppress_errors, else raises a FramejitError; a backend that returns something unusable
is named with what was wrong; an exception a graph op raises at run time names the user's line; BaseExceptions
pass through untouched; deep recursion behaves as in eager; generators and coroutines run correctly."""

from __future__ import annotations

import asyncio
import dis
import subprocess
import sys
import textwrap
import traceback
import warnings

import pytest
import torch

import framejit
from framejit.exc import BackendCompilerFailed, BackendOutputError, FramejitError, InternalError
from framejit.testing import CompileCounter, same
from framejit.trace import translator


def two_graphs(x):
    y = x.sin() + 1
    print("", end="")  # a graph break
    return y * 2


def _raising_backend(gm, example_inputs):
    raise ValueError("kaboom from backend")


# ---------------------------------------------------------------------------------------------
# suppress_errors: one warning naming the frame, or a FramejitError


@pytest.fixture
def broken_tracer():
    """An internal error: the handler of BINARY_OP raises as a bug in framejit would. (Not a KeyError or another
    of the errors the translator takes for the traced code's own: it breaks the graph there.)"""
    index = dis.opmap["BINARY_OP"]
    saved = translator.OPCODE_HANDLERS[index]

    def boom(tx, inst):
        raise RuntimeError("bug in framejit")

    translator.OPCODE_HANDLERS[index] = boom
    yield
    translator.OPCODE_HANDLERS[index] = saved


def _failing(failure, request):
    """The backend for a compile that fails: one that raises, or a working one with the tracer broken."""
    if failure == "internal":
        request.getfixturevalue("broken_tracer")
        return CompileCounter()
    return _raising_backend


@pytest.mark.parametrize("failure", ["backend", "internal"])
def test_suppress_errors_runs_python_with_one_warning_naming_the_frame(failure, request):
    f = framejit.compile(two_graphs, backend=_failing(failure, request))
    x = torch.randn(3)
    with framejit.config.patch(suppress_errors=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert same(f(x), two_graphs(x))
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert f"two_graphs ({__file__}:{two_graphs.__code__.co_firstlineno})" in message
    assert ("kaboom from backend" if failure == "backend" else "bug in framejit") in message
    assert caught[0].filename == __file__  # the warning points at the call in the user's code


@pytest.mark.parametrize("failure", ["backend", "internal"])
def test_without_suppress_errors_a_framejit_error_is_raised(failure, request):
    f = framejit.compile(two_graphs, backend=_failing(failure, request))
    expected = BackendCompilerFailed if failure == "backend" else InternalError
    with pytest.raises(expected, match="two_graphs" if failure == "internal" else "kaboom") as info:
        f(torch.randn(3))
    assert isinstance(info.value, FramejitError)
    assert isinstance(info.value.__cause__, ValueError if failure == "backend" else RuntimeError)


# ---------------------------------------------------------------------------------------------
# a backend that returns something unusable


def test_backend_returning_a_non_callable_is_named():
    def returns_a_number(gm, example_inputs):
        return 42

    f = framejit.compile(two_graphs, backend=returns_a_number)
    with pytest.raises(BackendCompilerFailed, match="'returns_a_number' returned 42 .*not a callable"):
        f(torch.randn(3))
    with framejit.config.patch(suppress_errors=True), pytest.warns(UserWarning, match="not a callable"):
        x = torch.randn(3)
        assert same(f(x), two_graphs(x))


@pytest.mark.parametrize(
    "returns, what",
    [
        (lambda out: out[0], "a value of type Tensor, not a tuple or list"),  # would read the tensor's rows
        (lambda out: (), "a tuple of 0 value"),
        (lambda out: (*out, torch.ones(1)), "a tuple of 2 value"),
        (lambda out: None, "a value of type NoneType"),
    ],
)
def test_compiled_callable_returning_the_wrong_outputs_is_named(returns, what):
    def wrong_outputs(gm, example_inputs):
        return lambda *args: returns(gm(*args))

    def one_output(x):
        return (x.sin() + 1) * 2

    f = framejit.compile(one_output, backend=wrong_outputs)
    with pytest.raises(BackendOutputError, match=f"'wrong_outputs'.*returned {what}.*graph's 1 output"):
        f(torch.randn(2, 2))


# ---------------------------------------------------------------------------------------------
# an exception a graph op raises at run time


def gather(x, idx):
    y = x * 2
    z = y[idx]  # out of range only for some index values: only real data shows it
    return z + 1


def check_pd(a):
    s = a @ a.mT
    return torch.linalg.cholesky(s - 10 * torch.eye(3))  # not positive definite: raises at run time


def _formatted(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


def gather_doubling_in_place(x, idx):
    x.mul_(2)  # a graph that wrote into a large input does not run again as Python: the note names the line
    z = x[idx]
    return z + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "counter"])
@pytest.mark.parametrize("fn", [gather, gather_doubling_in_place])
def test_runtime_error_in_a_graph_names_the_users_line(backend, fn):
    f = framejit.compile(fn, backend=CompileCounter() if backend == "counter" else backend)
    x = torch.randn(5 if fn is gather else 20000)  # too large to copy before each call, to undo the write
    assert same(f(x.clone(), torch.tensor([1, 2])), fn(x.clone(), torch.tensor([1, 2])))
    with pytest.raises(IndexError) as info:
        f(x, torch.tensor([1, len(x) + 2]))
    text = _formatted(info.value)
    line = fn.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in {fn.__name__}' in text and "z = " in text
    # a graph that may run again raises from the frame run as Python, as eager: the traceback has the line itself
    assert text.count("framejit: the compiled graph raised this") == (fn is gather_doubling_in_place)


def test_runtime_error_in_a_graph_under_a_with_block_names_the_users_line():
    a = torch.randn(3, 3)
    with pytest.raises(RuntimeError) as info, framejit.optimize("aot_eager"):
        check_pd(a)
    line = check_pd.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in check_pd' in _formatted(info.value)


def test_an_error_raised_by_python_code_after_a_break_gets_no_graph_note():
    def fn(x):
        y = x + 1
        print("", end="")
        raise ValueError(f"user error {y.shape}")

    with pytest.raises(ValueError, match="user error") as info:
        framejit.compile(fn, backend="eager")(torch.randn(2))
    assert not getattr(info.value, "__notes__", None)


# ---------------------------------------------------------------------------------------------
# BaseExceptions pass through unchanged


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit])
@pytest.mark.parametrize("where", ["backend compile", "compiled code", "user code"])
def test_base_exceptions_pass_through_unchanged(exc_type, where):
    raised = exc_type("stop")
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        if where == "backend compile" and len(calls) == 1:
            raise raised

        def run(*args):
            if where == "compiled code" and len(calls) == 1:
                raise raised
            return gm(*args)

        return run

    def fn(x):
        y = x.cos() + 1
        if where == "user code":
            print("", end="")
            raise raised
        return y

    f = framejit.compile(fn, backend=backend)
    x = torch.randn(3)
    for suppress in (False, True):
        with framejit.config.patch(suppress_errors=suppress):
            with pytest.raises(exc_type) as info:
                f(x)
        assert info.value is raised and not getattr(raised, "__notes__", None)
        framejit.reset()
        calls.clear()
    if where != "user code":  # nothing was marked to run as Python: the next call compiles and works
        calls.append(1)
        assert same(f(x), x.cos() + 1)


# ---------------------------------------------------------------------------------------------
# deep recursion


def countdown(n):
    return 0 if n == 0 else 1 + countdown(n - 1)


def tensor_countdown(x, n):
    if n == 0:
        return x
    return tensor_countdown(x + 1, n - 1)


def test_deep_recursion_works_up_to_the_recursion_limit_as_in_eager():
    depth = sys.getrecursionlimit() - 50
    f = framejit.compile(countdown, backend="eager")
    assert f(depth) == depth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each depth is a new constant: the cache size limit is reached
        x = torch.zeros(2)
        assert same(framejit.compile(tensor_countdown, backend="eager")(x, depth - 20), x + depth - 20)
    with pytest.raises(RecursionError):
        f(sys.getrecursionlimit() + 10)
    assert f(10) == 10  # and it still works afterwards


@pytest.mark.slow
def test_a_raised_recursion_limit_gives_recursion_error_not_a_crash():
    """With the frame hook each Python call takes C stack (CPython 3.11 inlines calls only without one): past
    what the C stack holds the hook raises RecursionError, where a crash would kill the process."""
    script = textwrap.dedent("""
        import sys, warnings, framejit
        warnings.simplefilter("ignore")
        sys.setrecursionlimit(200_000)
        def countdown(n):
            return 0 if n == 0 else 1 + countdown(n - 1)
        f = framejit.compile(countdown, backend="eager")
        for depth in (5_000, 150_000):
            try:
                print(f(depth) == depth)
            except RecursionError:
                print("RecursionError")
        print(f(100) == 100)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "RecursionError", "True"]


# ---------------------------------------------------------------------------------------------
# generators and coroutines


def squares(x, n):
    for i in range(n):
        y = x * i
        print("", end="")  # a graph break between two yields
        yield y * y


async def scaled(x, factor):
    y = x.sin() * factor
    await asyncio.sleep(0)
    print("", end="")
    return y + 1


async def gather_scaled(x):
    parts = await asyncio.gather(scaled(x, 1.0), scaled(x, 2.0))
    return parts[0] + parts[1]


def test_compiled_generator_function_and_generators_called_from_compiled_code():
    x = torch.randn(3)
    gen = framejit.compile(squares, backend="eager")
    assert same(list(gen(x, 4)), list(squares(x, 4)))

    def consume(x):
        total = x * 0
        for item in squares(x, 3):
            total = total + item
        return total

    assert same(framejit.compile(consume, backend="eager")(x), consume(x))
    it = gen(x, 5)
    next(it)
    it.close()  # GeneratorExit inside the generator, as in eager


def test_compiled_coroutines_under_asyncio_run():
    x = torch.randn(4)
    compiled = framejit.compile(gather_scaled, backend="eager")
    assert same(asyncio.run(compiled(x)), asyncio.run(gather_scaled(x)))
    with framejit.optimize("eager"):  # every coroutine frame called inside the block
        got = asyncio.run(gather_scaled(x))
    assert same(got, asyncio.run(gather_scaled(x)))
