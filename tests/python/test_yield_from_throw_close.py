"""throw() and close() of a generator suspended in `yield from`, as CPython runs them: the delegate gets the
exception first (close() closes it); what the delegate yields is the outer generator's next item, what it returns
is the value of the `yield from`, what it raises is raised in the outer generator at the `yield from`. Each case
is compared with eager and must be one graph with no break."""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


def inner(log, catch):
    try:
        yield 1
        yield 2
    except catch as e:
        log.append(f"inner caught {type(e).__name__}")
        yield 10
        return 99
    finally:
        log.append("inner finally")
    return 5


def outer(log, catch=ValueError):
    try:
        got = yield from inner(log, catch)
        log.append(("outer got", got))
        yield got
    except KeyError as e:
        log.append(("outer caught", str(e)))
        yield -1
    finally:
        log.append("outer finally")


def inner_handles_it(x, log):
    g = outer(log)
    first = next(g)
    handled = g.throw(ValueError("v"))  # the inner generator's handler yields 10
    returned = next(g)  # ...then returns 99: the value of the outer's `yield from`
    g.close()
    return x + first + handled + returned


def outer_handles_it(x, log):
    g = outer(log)
    first = next(g)
    handled = g.throw(KeyError("k"))  # through the inner one (its finally runs) to the outer's handler
    g.close()
    return x * first * handled


def nobody_handles_it(x, log):
    g = outer(log)
    first = next(g)
    try:
        g.throw(IndexError("i"))
    except IndexError as e:
        log.append(str(e))
    try:
        next(g)
    except StopIteration:
        log.append("finished")
    return x - first


def closed_through_the_delegate(x, log):
    g = outer(log)
    first = next(g)
    g.close()  # the inner generator is closed first, then the outer one
    g.close()
    return x + first


def throws_generator_exit(x, log, catch):
    g = outer(log, catch)
    first = next(g)
    try:
        g.throw(GeneratorExit)  # closes the delegate, then raises GeneratorExit in the outer generator
    except (GeneratorExit, RuntimeError) as e:  # RuntimeError: the delegate's handler yielded instead
        log.append(("raised to the caller", type(e).__name__))
    return x + first


def throws_generator_exit_into_a_closing_delegate(x, log):
    return throws_generator_exit(x, log, ValueError)


def throws_generator_exit_into_a_delegate_that_yields(x, log):
    return throws_generator_exit(x, log, GeneratorExit)


def noisy_close():
    try:
        yield 1
    finally:
        raise KeyError("from the inner finally")  # close() raises this in the outer generator instead


def outer_of_noisy(log):
    try:
        yield from noisy_close()
    except KeyError as e:
        log.append(("outer caught", str(e)))


def delegate_close_raises(x, log):
    g = outer_of_noisy(log)
    first = next(g)
    g.close()
    return x + first


def over_a_list(log):
    try:
        yield from [1, 2, 3]
    except ValueError:
        log.append("raised at the yield from")  # a list iterator has no throw(): raised in the generator
        yield 7


def delegate_without_throw(x, log):
    g = over_a_list(log)
    first = next(g)
    second = g.throw(ValueError)
    g.close()
    return x + first + second


def dropped_in_the_delegate(x, log):
    trail = []
    g = outer(trail)
    first = next(g)
    del g  # closed when dropped: both finally blocks run, on a list made here
    log.append(len(trail))
    return x + first, trail


@pytest.mark.parametrize(
    "fn",
    [
        inner_handles_it,
        outer_handles_it,
        nobody_handles_it,
        closed_through_the_delegate,
        throws_generator_exit_into_a_closing_delegate,
        delegate_close_raises,
        delegate_without_throw,
    ],
)
def test_throw_and_close_reach_the_delegate_of_yield_from_in_one_graph(fn):
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = fn(x, eager_log)
    counter = CompileCounter()
    framejit.reset()
    assert same(framejit.compile(fn, backend=counter)(x, compiled_log), expected)
    assert compiled_log == eager_log
    assert counter.frame_count == 1
    framejit.reset()
    assert framejit.explain(fn)(x, []).break_reasons == []


@pytest.mark.parametrize("fn", [throws_generator_exit_into_a_delegate_that_yields, dropped_in_the_delegate])
def test_a_delegate_left_suspended_in_its_handlers_runs_as_python(fn):
    # Python closes what is dropped inside a try block when it is collected, running handlers that write the
    # log: the trace cannot order those writes, so the frame runs as Python (never a lost write)
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = fn(x, eager_log)
    framejit.reset()
    assert same(framejit.compile(fn, backend="eager")(x, compiled_log), expected)
    assert compiled_log == eager_log
    framejit.reset()
    reasons = [r.reason for r in framejit.explain(fn)(x, []).break_reasons]
    assert any("dropped suspended inside a try or with block" in r for r in reasons), reasons


def suspended_in_an_except_clause():
    try:
        raise KeyError("in the generator")
    except KeyError:
        yield 1  # suspended while handling: the KeyError is the generator's, not its caller's
        yield 2
        raise  # ...and current again when it is resumed


def raises_stop_iteration():
    yield 1
    raise StopIteration("done")


def handled_exceptions_stay_with_the_generator(x, log):
    g = suspended_in_an_except_clause()
    first = next(g)
    try:
        raise ValueError("in the caller")
    except ValueError as e:
        log.append(type(e.__context__).__name__)  # NoneType, as in eager
    second = next(g)
    try:
        next(g)
    except KeyError as e:
        log.append(("re-raised", str(e)))
    try:
        list(raises_stop_iteration())
    except RuntimeError as e:  # PEP 479, with the StopIteration as its cause
        log.append((str(e), type(e.__cause__).__name__))
    return x + first + second


def test_a_suspended_generator_keeps_the_exception_it_handles_to_itself():
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = handled_exceptions_stay_with_the_generator(x, eager_log)
    counter = CompileCounter()
    framejit.reset()
    assert same(
        framejit.compile(handled_exceptions_stay_with_the_generator, backend=counter)(x, compiled_log), expected
    )
    assert compiled_log == eager_log and eager_log[0] == "NoneType"
    assert counter.frame_count == 1
