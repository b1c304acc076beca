"""An exception raised inside a `with` block, as CPython handles it: the block's exception path calls the context
manager's `__exit__(type, value, tb)`; a true result swallows the exception and the code after the block runs, a
false one lets it go on to an enclosing `try` (in the same frame or a caller) or out of the compiled function.
Each test runs the same function eagerly and compiled and compares results, logs, grad mode and autocast state;
caught cases must be one graph with no break."""

import contextlib
import re

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import line_of


class Recorder:
    """A context manager in Python that logs what its __exit__ sees and swallows what `swallow` names."""

    def __init__(self, log, swallow=()):
        self.log, self.swallow = log, swallow

    def __enter__(self):
        self.log.append("enter")
        return 2.0

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", None if kind is None else kind.__name__, None if value is None else str(value)))
        return kind is not None and issubclass(kind, self.swallow)


class Truthy:
    """An __exit__ whose answer is true without being True (a non-empty list)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return [exc_info[0]]


class Replacing:
    """An __exit__ that raises an exception of its own in place of the one it was given."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            raise RuntimeError(f"replaced {kind.__name__}")
        return False


class OddOnly(Exception):
    pass


@contextlib.contextmanager
def swallowing(log, *kinds):
    log.append("setup")
    try:
        yield len(log)
    except kinds as e:
        log.append(f"swallowed {type(e).__name__}: {e}")
    finally:
        log.append("teardown")


@contextlib.contextmanager
def translating(log):
    try:
        yield
    except KeyError as e:
        log.append("translate")
        raise ValueError(f"bad key {e}") from e


@contextlib.contextmanager
def cleanup_only(log):
    log.append("open")
    try:
        yield
    finally:
        log.append("close")


def compare(fn, *args, graphs=1):
    """fn compiled and eager on copies of the logs: equal results, logs and modes; `graphs` graphs, no break."""
    eager_log, compiled_log = [], []
    x = torch.randn(3, requires_grad=True)
    expected = fn(x, eager_log, *args)
    modes = torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")
    counter = CompileCounter()
    framejit.reset()
    actual = framejit.compile(fn, backend=counter)(x, compiled_log, *args)
    assert same(actual, expected)
    assert compiled_log == eager_log
    assert (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")) == modes
    assert counter.frame_count == graphs
    framejit.reset()
    assert framejit.explain(fn)(x, [], *args).break_reasons == []
    return actual, expected


# -- swallowed: the code after the block runs, in the same graph --------------------------------------------------


def swallowed_by_a_class(x, log):
    with Recorder(log, swallow=(ValueError,)) as k:
        x = x * k
        raise ValueError("swallow me")
    return x + 1


def swallowed_by_a_truthy_answer(x, log):
    with Truthy():
        x = x * 3
        log.append("before")
        raise KeyError("k")
    log.append("after")
    return x


def swallowed_by_suppress(x, log, key):
    with contextlib.suppress(KeyError, IndexError):
        x = x + 1
        x = x * {"a": 2.0}[key]  # a missing key raises here
        log.append("not reached for a missing key")
    return x.sin()


def swallowed_by_a_generator(x, log):
    with swallowing(log, ZeroDivisionError) as n:
        x = x + n
        x = x * (1 / 0)
    return x.cos()


def swallowed_in_a_loop(x, log):
    for i in range(4):
        with contextlib.suppress(OddOnly):
            if i % 2:
                raise OddOnly(i)
            x = x + i
        log.append(i)
    return x


class SwallowsAll(contextlib.AbstractContextManager):
    def __exit__(self, *exc_info):
        return True


def swallowed_by_an_abstract_context_manager(x, log):
    with SwallowsAll() as same_object:
        x = x + 1
        log.append(type(same_object).__name__)
        raise KeyError("k")
    return x


def swallowed_under_no_grad(x, log):
    with torch.no_grad(), contextlib.suppress(KeyError):
        y = x * 2
        log.append({}[1])
    return y, x.sum(), torch.is_grad_enabled()


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (swallowed_by_a_class, ()),
        (swallowed_by_a_truthy_answer, ()),
        (swallowed_by_suppress, ("a",)),
        (swallowed_by_suppress, ("b",)),
        (swallowed_by_a_generator, ()),
        (swallowed_in_a_loop, ()),
        (swallowed_by_an_abstract_context_manager, ()),
        (swallowed_under_no_grad, ()),
    ],
)
def test_an_exit_that_answers_true_swallows_the_exception_in_one_graph(fn, args):
    compare(fn, *args)


# -- not swallowed: an enclosing try of the same frame catches it ---------------------------------------------------


def caught_around_a_class(x, log):
    try:
        with Recorder(log, swallow=(KeyError,)):
            x = x + 1
            raise ValueError("not mine")
    except ValueError as e:
        log.append(f"caught {e}")
        x = x * 2
    return x


def caught_around_grad_mode(x, log, ctx):
    try:
        with ctx():
            y = x * 2  # no grad inside a no_grad block, as in eager
            raise ValueError("inside")
    except ValueError:
        log.append(torch.is_grad_enabled())  # the block's __exit__ ran before the handler
        y = y + x
    return y


def caught_around_autocast(x, log):
    a = x.detach().reshape(1, 3)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = a @ a.t()
            raise ValueError("inside")
    except ValueError:
        log.append(torch.is_autocast_enabled("cpu"))
        y = y.float() + a @ a.t()  # outside the block: float32 again
    return y, y.dtype


def caught_around_a_generator(x, log):
    try:
        with swallowing(log, KeyError):
            x = x + 1
            raise ValueError("passes through")
    except ValueError as e:
        log.append(str(e))
    return x


def translated_by_a_generator(x, log):
    try:
        with translating(log):
            x = x - 1
            x = x * {}["missing"]
    except ValueError as e:
        log.append((str(e), type(e.__cause__).__name__))
        x = x + 1
    return x


def replaced_by_exit(x, log):
    try:
        with Replacing():
            x = x + 1
            raise KeyError("first")
    except RuntimeError as e:
        log.append(
            (str(e), type(e.__context__).__name__, str(e.__context__), e.__suppress_context__)
        )  # the one it replaced is its context
    return x


def nested_blocks(x, log):
    try:
        with Recorder(log, swallow=()), cleanup_only(log), Recorder(log, swallow=(IndexError,)):
            x = x * 2
            raise KeyError("deep")
    except KeyError as e:
        log.append(str(e))
    with Recorder(log), contextlib.nullcontext(), Recorder(log, swallow=(IndexError,)):
        x = x + log[len(log)]  # swallowed by the innermost: the outer ones see no exception
    return x


class Resource:
    def __init__(self, log):
        self.log = log

    def close(self):
        self.log.append("closed")


def caught_around_closing(x, log):
    try:
        with contextlib.closing(Resource(log)):
            x = x + 1
            raise KeyError("k")
    except KeyError:
        x = x * 2
    return x


class Logged(contextlib.ContextDecorator):
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("out", kind.__name__ if kind else None))
        return False


def caught_around_a_decorated_call(x, log):
    @Logged(log)
    def decorated(y):
        raise ValueError(f"from {y.dim()}-d")

    try:
        decorated(x)
    except ValueError as e:
        log.append(str(e))
        x = x - 1
    return x


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (caught_around_a_class, ()),
        (caught_around_grad_mode, (torch.no_grad,)),
        (caught_around_grad_mode, (torch.enable_grad,)),
        (caught_around_grad_mode, (lambda: torch.set_grad_enabled(False),)),
        (caught_around_autocast, ()),
        (caught_around_a_generator, ()),
        (translated_by_a_generator, ()),
        (replaced_by_exit, ()),
        (nested_blocks, ()),
        (caught_around_closing, ()),
        (caught_around_a_decorated_call, ()),
    ],
)
def test_an_exception_exit_lets_through_is_caught_by_the_enclosing_try_in_one_graph(fn, args):
    compare(fn, *args)


def test_grad_mode_inside_the_block_is_eager_s():
    actual, expected = compare(caught_around_grad_mode, torch.no_grad)
    assert actual.requires_grad == expected.requires_grad


def test_grad_mode_set_when_the_block_raised_is_restored_under_no_grad():
    with torch.no_grad():
        compare(caught_around_grad_mode, torch.enable_grad)


def chained_in_handlers(x, log):
    try:
        try:
            raise KeyError("first")
        except KeyError:
            with contextlib.suppress(IndexError):
                raise ValueError("second")  # raised while handling the KeyError: that is its context
    except ValueError as e:
        log.append((type(e.__context__).__name__, str(e.__context__), e.__cause__))
        try:
            raise  # a bare raise keeps the context it has
        except ValueError as again:
            log.append(str(again.__context__))
    return x + 1


def test_an_exception_raised_while_another_is_handled_has_it_as_context():
    compare(chained_in_handlers)


class PrintingExit:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        print("leaving after", kind.__name__)  # a break while the exception is handled
        self.log.append(str(value))
        return True


def breaks_in_exit(x, log):
    with PrintingExit(log):
        x = x + 1
        raise KeyError("k")
    return x * 2


def test_a_break_inside_exit_on_the_exception_path_runs_the_handler_as_python(capsys):
    x = torch.randn(3)
    log, expected_log = [], []
    expected = breaks_in_exit(x, expected_log)
    assert same(framejit.compile(breaks_in_exit, backend="eager")(x, log), expected)
    assert log == expected_log == ["'k'"]
    assert capsys.readouterr().out == "leaving after KeyError\n" * 2


# -- in inlined frames -----------------------------------------------------------------------------------------------


def helper_swallows(x, log):
    with Recorder(log, swallow=(ArithmeticError,)):
        x = x / 2
        raise ZeroDivisionError("in helper")
    return x + 1


def helper_lets_through(x, log):
    with torch.no_grad(), Recorder(log):
        x = x + 1
        raise LookupError("from helper")


def raises_below(x):
    if x.dim() == 1:
        raise OverflowError("from below")
    return x


def calls_inlined_helpers(x, log):
    x = helper_swallows(x, log)
    try:
        helper_lets_through(x, log)
    except LookupError as e:
        log.append((str(e), torch.is_grad_enabled()))
    with Recorder(log, swallow=(OverflowError,)):
        x = raises_below(x) * 100  # raised one frame below the block
    return x


def test_blocks_in_inlined_frames_and_exceptions_raised_below_a_block():
    compare(calls_inlined_helpers)


# -- not caught anywhere: the compiled function raises what eager raises --------------------------------------------


def escapes_a_class(x, log):
    with Recorder(log, swallow=(KeyError,)):
        y = x + 1
        log.append(y.shape)
        raise ValueError("escapes")


def escapes_grad_mode(x, log):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
            raise TypeError(f"escapes with {y.requires_grad}")


def escapes_autocast(x, log):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        raise ValueError(f"escapes with {y.dtype}")


def escapes_a_generator(x, log):
    with cleanup_only(log):
        with contextlib.suppress(IndexError):
            raise KeyError("escapes")


def escapes_an_inlined_block(x, log):
    x = x + 1
    return helper_lets_through(x, log)


@pytest.mark.parametrize(
    "fn", [escapes_a_class, escapes_grad_mode, escapes_autocast, escapes_a_generator, escapes_an_inlined_block]
)
def test_an_exception_no_one_catches_is_raised_as_in_eager(fn):
    x = torch.randn(3, requires_grad=True)
    eager_log, compiled_log = [], []
    with pytest.raises(Exception) as eager:
        fn(x, eager_log)
    framejit.reset()
    with pytest.raises(eager.type, match=f"^{re.escape(str(eager.value))}$"):
        framejit.compile(fn, backend="eager")(x, compiled_log)
    assert compiled_log == eager_log
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
    framejit.reset()
    with pytest.raises(framejit.exc.Unsupported, match=re.escape(f"{eager.type.__name__}: {eager.value}")):
        framejit.compile(fn, backend="eager", fullgraph=True)(x, [])
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


def escapes_after_work(x, log):
    y = (x * 2).sin()
    log.append(y.shape)
    with Recorder(log):
        raise KeyError(f"escapes after {y.shape}")


def test_the_work_before_an_escaping_raise_is_a_graph_and_the_break_is_at_the_raise():
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    with pytest.raises(KeyError) as eager:
        escapes_after_work(x, eager_log)
    counter = CompileCounter()
    framejit.reset()
    with pytest.raises(KeyError) as compiled:
        framejit.compile(escapes_after_work, backend=counter)(x, compiled_log)
    assert str(compiled.value) == str(eager.value) and compiled_log == eager_log
    assert counter.frame_count == 1  # the graph of the work, then Python raises and runs __exit__
    framejit.reset()
    with pytest.raises(framejit.exc.Unsupported, match="KeyError") as refused:
        framejit.compile(escapes_after_work, backend="eager", fullgraph=True)(x, [])
    assert refused.value.user_stack[-1].lineno == line_of(escapes_after_work, "raise KeyError")


def handled_after_the_block_with_a_break(x, log):
    try:
        with Recorder(log):
            x = x + 1
            raise KeyError("k")
    except KeyError as e:
        print("handling", e)  # a break while handling: made at the raise, the rest runs as Python
        x = x * 3
    return x - 1


def test_a_break_in_the_handler_after_the_block_keeps_the_graph_before_the_raise(capsys):
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = handled_after_the_block_with_a_break(x, eager_log)
    counter = CompileCounter()
    framejit.reset()
    assert same(framejit.compile(handled_after_the_block_with_a_break, backend=counter)(x, compiled_log), expected)
    assert compiled_log == eager_log
    assert counter.frame_count == 1
    assert capsys.readouterr().out == "handling 'k'\n" * 2


def escapes_a_finally(x, log):
    try:
        y = x.cos() + 1
        raise ValueError(f"escapes {y.shape}")
    finally:
        log.append("finally")  # the cleanup ends in RERAISE: the exception goes on out of the frame


def test_an_exception_leaving_a_finally_keeps_the_graph_before_the_raise():
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    with pytest.raises(ValueError) as eager:
        escapes_a_finally(x, eager_log)
    counter = CompileCounter()
    framejit.reset()
    with pytest.raises(ValueError, match=f"^{re.escape(str(eager.value))}$"):
        framejit.compile(escapes_a_finally, backend=counter)(x, compiled_log)
    assert compiled_log == eager_log == ["finally"]
    assert counter.frame_count == 1
