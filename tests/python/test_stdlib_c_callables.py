"""The standard library's C callables over values the trace holds: itertools' combinatoric iterators (inputs
taken whole, as Python takes them) and its lazy ones over containers, collections.deque made, written, iterated
and returned, OrderedDict/defaultdict.fromkeys, and types.MappingProxyType reading through to its dict. Each is
one graph with eager's result; what the trace cannot take now (an iterator a lazy one would advance, a function
with side effects) is a graph break naming why."""

import collections
import itertools
import operator
import types

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


def _numbers():
    yield from range(2)


def combinatoric(x):
    scaled = [v * i for v, i in itertools.product([x, x + 1], [1, 2])]
    perms = [a - b for a, b in itertools.permutations([x, x * 2, x * 3], 2)]
    return (
        sum(scaled) + sum(perms),
        list(itertools.product("ab", repeat=2)),
        list(itertools.product(_numbers(), (5, 6))),  # a generator: taken whole when the product is made
        list(itertools.combinations(range(4), 3)),
        list(itertools.combinations_with_replacement("abc", 2)),
        list(itertools.permutations(range(3))),
    )


def lazy_over_containers(x):
    return (
        [a if b is None else a + b for a, b in itertools.zip_longest([x, x * 2], [x])],
        list(itertools.zip_longest("ab", "xyz", fillvalue="-")),
        [b - a for a, b in itertools.pairwise([x, x * 2, x * 4])],
        list(itertools.accumulate([x, x + 1, x + 2])),
        list(itertools.accumulate([1, 2, 3, 4], operator.mul, initial=10)),
        list(itertools.accumulate([x, x], lambda p, q: p * q)),
        list(itertools.starmap(torch.add, [(x, x), (x, 1)])),
        list(itertools.compress([x, x + 1, 3], [1, 0, 1])),
        list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1])),
        list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1])),
        list(itertools.filterfalse(None, [0, 1, 0, 2])),
    )


def deque_written(x):
    d = collections.deque([1, 2, 3], maxlen=4)
    d.append(x)  # full: drops 1
    d.appendleft(0)  # full: drops x
    last, first = d.pop(), d.popleft()
    d.extend([7, 8])
    d.extendleft([9])
    d.rotate(2)
    total = x
    for v in d:
        total = total + v
    try:
        collections.deque().pop()
    except IndexError as e:
        message = str(e)
    kept = collections.deque([x, x + 1], maxlen=1)  # returned: made again after the graph, holding x + 1
    return total * (last + first), d, len(d), d[0], d[-1], d.maxlen, message, 8 in d, d.count(9), kept


def mapping_fromkeys(x):
    ordered = collections.OrderedDict.fromkeys("ab", 1)
    defaults = collections.defaultdict.fromkeys("ab")
    return x + ordered["b"], ordered, defaults, defaults.default_factory


def mapping_proxy(x):
    d = {"k": 3}
    view = types.MappingProxyType(d)
    d["j"] = 4  # the view sees it
    try:
        view["z"] = 1
    except TypeError as e:
        message = str(e)
    return x + view["k"] + view.get("j"), len(view), "j" in view, list(view), list(view.items()), message, view


def _comparable(value):
    if isinstance(value, tuple):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, (collections.deque, types.MappingProxyType)):
        return type(value), _comparable(list(value) if isinstance(value, collections.deque) else dict(value))
    if isinstance(value, collections.defaultdict):
        return type(value), value.default_factory, dict(value)
    return value


@pytest.mark.parametrize("fn", [combinatoric, lazy_over_containers, deque_written, mapping_fromkeys, mapping_proxy])
def test_stdlib_c_callables_are_one_graph_with_eagers_result(fn):
    x = torch.randn(3)
    cnt = CompileCounter()
    got, want = framejit.optimize(cnt, nopython=True)(fn)(x), fn(x)
    assert cnt.frame_count == 1
    assert type(got[1]) is type(want[1])
    assert same(_comparable(got), _comparable(want))


def accumulate_with_effects(x, log):
    def add(p, q):
        log.append(1)  # lazy in Python: it runs only for items taken
        return p + q

    return list(itertools.accumulate([x, x], add))


def zip_longest_over_an_iterator(x, log):
    x = x * 2
    return list(itertools.zip_longest(iter([x]), [1, 2]))


def deque_rotated_while_iterated(x, log):
    d = collections.deque([1, 2, 3])
    try:
        for _ in d:
            d.rotate(1)
    except RuntimeError as e:
        return x + 1, str(e)


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (accumulate_with_effects, "itertools.accumulate() whose function or iterator has side effects"),
        (zip_longest_over_an_iterator, "itertools.zip_longest over an iterator"),
        (deque_rotated_while_iterated, "deque keys changed during iteration"),
    ],
)
def test_what_the_trace_cannot_take_now_breaks_with_eagers_result(fn, reason):
    x = torch.randn(3)
    report = framejit.explain(fn)(x, [])
    assert any(reason in b.reason for b in report.break_reasons), [b.reason for b in report.break_reasons]
    got_log, want_log = [], []
    assert same(framejit.compile(fn, backend="eager")(x, got_log), fn(x, want_log))
    assert got_log == want_log
