"""send(), throw() and close() on a generator made in the trace: its frame is resumed at the suspended yield, with
the sent value or the exception raised there (its own handlers catch it), and its side effects happen when it is
advanced, in order with the rest of the frame; compared with eager, with the graphs and breaks counted."""

import pytest
import torch

import framejit
from framejit.testing import same

log: list = []


def catches_value_error():
    try:
        yield 1
    except ValueError:
        yield 10


def counts_twice():
    yield 1
    yield 2


def with_finally(record):
    try:
        yield 1
        yield 2
    finally:
        record.append("finally")


def returns_on_exit():
    try:
        yield 1
    except GeneratorExit:
        log.append("exit")
        return


def ignores_exit():
    try:
        yield 1
    except GeneratorExit:
        yield 2


def doubles_what_it_is_sent():
    v = yield 1
    while True:
        v = yield v * 2


def averages():
    total, n = 0.0, 0
    average = None
    while True:
        value = yield average
        total, n = total + value, n + 1
        average = total / n


def delegates():
    got = yield from doubles_what_it_is_sent()
    yield got


def noisy(x):
    for i in range(3):
        log.append(("made", i))
        yield x + i


def throw_caught(x):
    g = catches_value_error()
    next(g)
    return x * g.throw(ValueError)


def throw_instance_caught(x):
    g = catches_value_error()
    next(g)
    return x * g.throw(ValueError("bad"))


def throw_reaches_the_caller(x):
    g = counts_twice()
    next(g)
    try:
        g.throw(KeyError("k"))
    except KeyError:
        x = x + 1
    return x * len(list(g))  # the exception ended it


def close_runs_finally(x):
    record = []
    g = with_finally(record)
    next(g)
    g.close()
    g.close()  # a closed generator: nothing more
    return x * len(record), record


def close_caught_and_returned(x):
    g = returns_on_exit()
    next(g)
    return x + (g.close() is None)


def close_ignored_is_runtime_error(x):
    g = ignores_exit()
    next(g)
    try:
        g.close()
    except RuntimeError:
        return x - 1
    return x


def send_values(x):
    g = doubles_what_it_is_sent()
    next(g)
    return x * g.send(5) + g.send(x)


def send_running_average(x):
    g = averages()
    next(g)
    g.send(x)
    return g.send(x * 3)


def send_through_yield_from(x):
    g = delegates()
    next(g)
    return g.send(x) + g.send(3)


def send_non_none_first(x):
    g = counts_twice()
    try:
        g.send(1)
    except TypeError:
        return x + next(g)
    return x


def stop_iteration_value(x):
    def finishes():
        yield 1
        return 7

    g = finishes()
    next(g)
    try:
        next(g)
    except StopIteration as e:
        return x * e.value
    return x


CASES = [
    throw_caught,
    throw_instance_caught,
    throw_reaches_the_caller,
    close_runs_finally,
    close_caught_and_returned,
    close_ignored_is_runtime_error,
    send_values,
    send_running_average,
    send_through_yield_from,
    send_non_none_first,
    stop_iteration_value,
]


def _equal(got, want):
    if isinstance(want, (tuple, list)):
        return type(got) is type(want) and len(got) == len(want) and all(map(_equal, got, want))
    return same(got, want) if isinstance(want, torch.Tensor) else got == want


def _one_graph_with_eagers_log(fn, x):
    """fn compiled is one graph, no break, and gives eager's result and log; eager's log is returned."""
    del log[:]
    want, want_log = fn(x), list(log)
    del log[:]
    explained = framejit.explain(fn)(x)
    assert explained.graph_count == 1 and explained.break_reasons == [], explained.break_reasons
    del log[:]
    got = framejit.compile(fn, backend="eager")(x)
    assert _equal(got, want) and log == want_log
    return want_log


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_generator_protocols_match_eager_in_one_graph(fn):
    framejit.reset()
    _one_graph_with_eagers_log(fn, torch.randn(3))


def test_a_generator_with_side_effects_runs_interleaved_with_its_consumer():
    def fn(x):
        out = x
        g = noisy(x)
        log.append("before")
        out = out + next(g)
        log.append("between")
        for y in g:
            out = out * y
            log.append("consumed")
        return out

    want_log = _one_graph_with_eagers_log(fn, torch.randn(3))
    assert want_log[:3] == ["before", ("made", 0), "between"]


def test_enumerate_and_zip_take_a_generators_items_one_at_a_time():
    def fn(x):
        out = x
        for i, y in enumerate(noisy(x), 1):
            log.append("enumerated")
            out = out + y * i
        for a, b in zip(noisy(x), [1, 2]):  # zip takes a third item, then stops at the list's end
            log.append("zipped")
            out = out + a * b
        g = noisy(x)
        return out, list(zip(g, g))  # consecutive items paired, as in eager

    want_log = _one_graph_with_eagers_log(fn, torch.randn(3))
    assert want_log[:4] == [("made", 0), "enumerated", ("made", 1), "enumerated"]


def test_a_generator_left_unfinished_never_runs_its_remaining_effects():
    def fn(x):
        g = noisy(x)
        return x + next(g)

    x = torch.randn(3)
    del log[:]
    want, want_log = fn(x), list(log)
    del log[:]
    got = framejit.compile(fn, backend="eager")(x)
    assert same(got, want) and log == want_log == [("made", 0)]


def test_a_generator_dropped_with_a_finally_that_writes_runs_as_python():
    """Python closes a generator dropped inside its try block, running the `finally` (a write to a list from
    outside): the trace cannot order that write, so the frame runs as Python, never losing it."""

    def fn(x, record):
        g = with_finally(record)
        return x + next(g)

    x = torch.randn(3)
    want_record, got_record = [], []
    want = fn(x, want_record)
    explained = framejit.explain(fn)(x, [])
    assert any("dropped suspended inside a try" in r.reason for r in explained.break_reasons)
    got = framejit.compile(fn, backend="eager")(x, got_record)
    assert same(got, want) and got_record == want_record == ["finally"]


def test_throw_after_a_break_keeps_the_generators_handlers():
    """A generator with a try block alive across a break cannot be made again faithfully: the frame runs as
    Python, so that throw() still reaches its handler (10), never a rebuilt generator without it."""

    def fn(x):
        g = catches_value_error()
        next(g)
        print("a break")
        return x * g.throw(ValueError)

    x = torch.randn(3)
    explained = framejit.explain(fn)(x)
    assert explained.break_reasons and any("has a try or with block" in r.reason for r in explained.break_reasons)
    assert same(framejit.compile(fn, backend="eager")(x), fn(x))


def test_a_generator_from_outside_is_advanced_as_python_advances_it():
    def fn(x, g):
        return x * next(g) + g.send(None)

    def outside():
        yield 2
        yield 3
        yield 4

    x = torch.randn(3)
    want_gen, got_gen = outside(), outside()
    want = fn(x, want_gen)
    got = framejit.compile(fn, backend="eager")(x, got_gen)
    assert same(got, want) and list(got_gen) == list(want_gen) == [4]


def _double():
    x = yield
    yield x * 2


def _plain():
    yield 1
    yield 2


def _echo():
    x = yield 1
    yield x


def _raised_by(fn, x):
    try:
        return "returned", fn(x)
    except BaseException as e:  # (StopIteration too: what the caller sees)
        return type(e).__name__, str(e)


def sends_past_the_end_after_a_break(x):
    gen = _double()
    next(gen)
    a = gen.send(x)
    return a + gen.send(x)  # StopIteration (the break's rebuilt generator is started, as this one is)


def sends_into_a_plain_yield_after_a_break(x):
    gen = _plain()
    next(gen)
    print("a break")
    return x + gen.send(5)  # the yield drops the value: 2


def sends_into_a_fresh_generator_after_a_break(x):
    gen = _plain()
    print("a break")
    return x + gen.send(5)  # TypeError, as for a generator never started


def sends_a_value_the_generator_uses_after_a_break(x):
    gen = _echo()
    next(gen)
    print("a break")
    return x + gen.send(5)  # 5: the rebuilt generator cannot know it, so the frame runs as Python


@pytest.mark.parametrize(
    "fn",
    [
        sends_past_the_end_after_a_break,
        sends_into_a_plain_yield_after_a_break,
        sends_into_a_fresh_generator_after_a_break,
        sends_a_value_the_generator_uses_after_a_break,
    ],
)
def test_send_to_a_generator_made_again_after_a_break_is_eagers(fn):
    """Not fullgraph: a generator live at a break is made again as a real generator, started if it had been (send()
    past its end is StopIteration, a non-None value into a plain yield is dropped, into a fresh one TypeError); one
    suspended at a yield whose value it uses is not made again (the frame runs as Python)."""
    x = torch.randn(2)
    got, want = _raised_by(framejit.compile(fn, backend="eager"), x), _raised_by(fn, x)
    assert got[0] == want[0] and (same(got[1], want[1]) if got[0] == "returned" else got[1] == want[1]), (got, want)


def test_a_generator_suspended_at_a_used_yield_is_not_made_again():
    reasons = [
        r.reason for r in framejit.explain(sends_a_value_the_generator_uses_after_a_break)(torch.ones(2)).break_reasons
    ]
    assert any("suspended at a yield whose value it uses" in r for r in reasons), reasons
