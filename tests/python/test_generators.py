"""Generator functions called in a trace: run lazily, as Python runs them (each item when it is asked for),
`yield from` included; a generator that writes state that existed before it writes it interleaved with its
consumer, in one graph."""

import types

import pytest
import torch

import framejit
from framejit.testing import same
from tests.helpers import run_fullgraph


def every_other(xs, scale):
    for i, x in enumerate(xs):
        if i % 2 == 0:
            yield x * scale
    return len(xs)


def chained(x):
    count = yield from every_other([x, x + 1, x + 2], 2)
    yield x * count


def test_generator_functions_feed_loops_builtins_and_next():
    def fn(x):
        doubled = [y + 1 for y in every_other([x, x * 2, x * 3], 2)]
        total = sum(every_other([x, x], 3))
        first = next(iter(every_other([x], 5)))
        return doubled, total, first, list(chained(x))

    x = torch.randn(3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert len(got[0]) == len(want[0]) == 2 and all(same(a, b) for a, b in zip(got[0], want[0]))
    assert same(got[1], want[1]) and same(got[2], want[2])
    assert len(got[3]) == len(want[3]) == 3 and all(same(a, b) for a, b in zip(got[3], want[3]))


log = []


def logging_generator(x):
    for i in range(3):
        log.append(i)  # state from before the call: Python interleaves these with the consumer
        yield x + i


def test_a_generator_with_side_effects_runs_lazily_in_one_graph():
    def fn(x):
        out = []
        for y in logging_generator(x):
            out.append(y * 2)
            log.append("consumer")
        return out

    x = torch.randn(2)
    explained = framejit.explain(fn)(x)
    assert explained.graph_count == 1 and explained.break_reasons == []
    del log[:]
    want = fn(x)
    want_log = list(log)
    del log[:]
    got = framejit.optimize("eager")(fn)(x)
    assert log == want_log == [0, "consumer", 1, "consumer", 2, "consumer"]
    assert all(same(a, b) for a, b in zip(got, want))


def _counting():
    yield 1
    yield 2
    yield 3


def closes_its_generator(x):
    it = _counting()
    first = next(it)
    it.close()
    return x + first + sum(it)  # a closed generator yields nothing more


def sends_none(x):
    it = _counting()
    next(it)
    return x + it.send(None)


@pytest.mark.parametrize("fn", [closes_its_generator, sends_none])
def test_generator_methods_on_a_generator_made_in_the_trace(fn):
    assert same(framejit.compile(fn, backend="eager")(torch.ones(2)), fn(torch.ones(2)))
    assert framejit.explain(fn)(torch.ones(2)).break_reasons == []


def test_a_generator_alive_across_a_break_is_still_a_generator():
    def f(x):
        it = _counting()
        next(it)
        print("a break")
        is_generator = isinstance(it, types.GeneratorType)
        it.close()
        return x + is_generator + len(list(it))

    assert same(framejit.compile(f, backend="eager")(torch.ones(2)), f(torch.ones(2)))
