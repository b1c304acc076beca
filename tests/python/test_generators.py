"""Generator functions called in a trace: run lazily, as Python runs them (each item when it is asked for),
`yield from` included; a generator that writes state that existed before it writes it interleaved with its
consumer, in one graph."""

import functools
import operator
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


# -- consumers that take a generator's items one by one, as CPython's do (each returns (tensor, result, log)) --


def _gives(log, items):
    for item in items:
        log.append(("gives", item))
        yield item
    log.append("end")


def contains_stops_at_the_first_match(x):
    log = []
    g = _gives(log, [1, 2, 3])
    return x + 1, (1 in g, 2 in g, 5 not in _gives(log, [5, 6]), operator.contains(g, 1)), log


def extend_appends_each_item_as_it_comes(x):
    y = [1]
    y.extend(y[-1] + z for z in range(3))  # each item reads the list as it is then
    z = [1]
    z += (z[-1] * 2 for _ in range(3))
    return x + 1, (y, z), None


def any_and_all_stop_at_the_answer(x):
    log = []
    return x + 1, (any(v > 1 for v in _gives(log, [1, 2, 3])), all(v < 2 for v in _gives(log, [1, 2, 3]))), log


def sum_adds_each_item_as_it_comes(x):
    t = x.clone()
    return sum(t.add_(1) for _ in range(3)), None, None  # each item is t, changed again after it is added


def min_max_call_the_key_as_each_item_comes(x):
    log = []

    def key(v):
        log.append(("key", v))
        return -v

    return x + 1, (max(_gives(log, [3, 1, 2]), key=key), min(_gives(log, [4, 5]), key=key)), log


def reduce_folds_each_item_as_it_comes(x):
    log = []

    def add(a, b):
        log.append(("add", a, b))
        return a + b

    return x + 1, (functools.reduce(add, _gives(log, [1, 2, 3])), functools.reduce(add, _gives(log, []), 7)), log


def dict_and_set_updates_store_each_item_as_it_comes(x):
    d = {0: 0}
    d.update((k, len(d)) for k in range(1, 4))  # each pair reads the dict as it is then
    s = {0}
    s.update(len(s) + k for k in range(3))
    t = {1, 2, 3, 4}
    t.difference_update(k for k in range(1, 5) if len(t) > 2)
    return x + 1, (d, sorted(s), sorted(t)), None


def next_with_a_default_and_zip_take_what_python_takes(x):
    log = []
    g = _gives(log, [1, 2])
    first = next(g, 0)
    pairs = list(zip(range(1), g))  # range ends first: g is not advanced for a second pair
    return x + 1, (first, pairs, next(g, 0), next(g, 0)), log


class _Bag:
    def __init__(self, log):
        self.log = log

    def __iter__(self):
        yield from _gives(self.log, [1, 2, 3])


def reversed_of_a_generator_or_a_set_is_a_type_error(x):
    refused = []
    for value in (_gives([], [1, 2]), {1, 2}):
        try:
            reversed(value)
        except TypeError:
            refused.append(True)
    return x + 1, refused, list(reversed([1, 2]))


def in_on_an_object_whose_iter_is_a_generator(x):
    log = []
    return x + 1, 2 in _Bag(log), log


@pytest.mark.parametrize(
    "fn",
    [
        contains_stops_at_the_first_match,
        extend_appends_each_item_as_it_comes,
        any_and_all_stop_at_the_answer,
        sum_adds_each_item_as_it_comes,
        min_max_call_the_key_as_each_item_comes,
        reduce_folds_each_item_as_it_comes,
        dict_and_set_updates_store_each_item_as_it_comes,
        next_with_a_default_and_zip_take_what_python_takes,
        in_on_an_object_whose_iter_is_a_generator,
        reversed_of_a_generator_or_a_set_is_a_type_error,
    ],
)
def test_consumers_take_a_generators_items_as_python_takes_them(fn):
    """Compiled in one graph, each consumer advances the generator as far as CPython's does, doing its work on each
    item before the next is made: the results and the generator's log, in order, are eager's."""
    x = torch.randn(3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got, want), (got, want)


def _logs_to(log):
    def gen():
        for i in range(3):
            log.append(i)
            yield i

    return gen


def test_map_and_filter_over_a_generator_with_effects_break_rather_than_run_it_ahead():
    """map()/filter() are evaluated when called: over a generator that writes state, that would run it ahead of its
    consumer, so it is a break with the reason, and the log is eager's."""
    log = []

    def fn(x):
        first = next(map(lambda v: v * 2, _logs_to(log)()))
        return x + first

    x = torch.randn(2)
    reasons = [r.reason for r in framejit.explain(fn)(x).break_reasons]
    assert any("map() whose function or iterator has side effects" in r for r in reasons), reasons
    log.clear()
    want, want_log = fn(x), list(log)
    log.clear()
    assert same(framejit.compile(fn, backend="eager")(x), want) and log == want_log == [0]
