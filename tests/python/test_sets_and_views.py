"""Sets: one from outside the frame mutated by the trace (add, discard, remove, update, the *_update forms, clear)
holds after the call what eager leaves in it, in one graph; dict keys and items views compare and combine as
sets, values views by identity."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

SEEN = {1, 2}


def mutates_an_argument(x, s):
    s.add(3)
    s.discard(1)
    s.update([7, 8], (9,))
    s.difference_update({8})
    if 7 in s:
        x = x + len(s)
    return x * 2


def mutates_a_global(x):
    SEEN.add(5)
    SEEN.remove(2)
    SEEN.symmetric_difference_update({5, 6})
    return x + len(SEEN)


def test_an_argument_set_is_mutated_as_in_eager_in_one_graph():
    counter = CompileCounter()
    compiled = framejit.compile(mutates_an_argument, backend=counter)
    got_set, expected_set = {1, 2}, {1, 2}
    assert same(compiled(torch.ones(2), got_set), mutates_an_argument(torch.ones(2), expected_set))
    assert got_set == expected_set
    assert counter.frame_count == 1
    assert framejit.explain(mutates_an_argument)(torch.ones(2), {1, 2}).break_reasons == []


def test_a_global_set_is_mutated_as_in_eager():
    SEEN.clear()
    SEEN.update({1, 2})
    expected = mutates_a_global(torch.ones(1))
    expected_set = set(SEEN)
    SEEN.clear()
    SEEN.update({1, 2})
    assert same(framejit.compile(mutates_a_global, backend="eager")(torch.ones(1)), expected)
    assert SEEN == expected_set


def test_removing_a_missing_item_raises_key_error_as_in_eager():
    def f(x, s):
        s.remove(4)
        return x

    with pytest.raises(KeyError):
        framejit.compile(f, backend="eager")(torch.ones(1), {1})


def test_a_frozenset_has_no_add():
    def f(x, s):
        s.add(1)
        return x

    with pytest.raises(AttributeError, match="'frozenset' object has no attribute 'add'"):
        framejit.compile(f, backend="eager")(torch.ones(1), frozenset({2}))


VIEW_CASES = {
    "keys == set": lambda d: d.keys() == {"a", "b"},
    "keys != set": lambda d: d.keys() != {"a"},
    "keys & set": lambda d: d.keys() & {"a", "z"},
    "set - keys": lambda d: {"a", "q"} - d.keys(),
    "keys | keys": lambda d: d.keys() | {"k": 1}.keys(),
    "items ^ set": lambda d: d.items() ^ {("a", 1)},
    "keys <= set": lambda d: d.keys() <= {"a", "b", "c"},
    "values == values": lambda d: d.values() == d.values(),
}


@pytest.mark.parametrize("case", VIEW_CASES, ids=list(VIEW_CASES))
def test_dict_views_as_sets_give_eagers_answer(case):
    op = VIEW_CASES[case]

    def f(x, d):
        return x + len(str(op(d)))

    d = {"a": 1, "b": 2}
    assert same(framejit.compile(f, backend="eager")(torch.ones(1), d), f(torch.ones(1), d))
    if case != "values == values":  # (a values view has no set operators: it compares by identity)
        assert framejit.explain(f)(torch.ones(1), d).break_reasons == []


def _counted(counts, items):
    for item in items:
        counts.append(item)
        yield item


def set_methods_take_a_generators_items_as_python_does(x):
    counts = []
    s = {2, 4, 5}
    answers = (
        s.isdisjoint(_counted(counts, [1, 2, 3])),  # stops at 2
        s.issuperset(_counted(counts, [2, 7, 4])),  # stops at 7
        s.issubset(_counted(counts, [2, 4, 5, 6])),  # takes all first
        sorted(s.intersection(_counted(counts, [5, 9]))),
        sorted(s.union(_counted(counts, [1]))),
        sorted(s.difference(_counted(counts, [4]))),
        sorted(s.symmetric_difference(_counted(counts, [4, 8]))),
        sorted(frozenset(s).intersection(_counted(counts, [2]))),
    )
    return x + 1, answers, counts


def set_methods_read_the_set_as_the_generator_changes_it(x):
    s = {1, 2}

    def adds_then_gives(items):
        for item in items:
            s.add(item + 10)
            yield item + 10

    answers = (
        s.isdisjoint(adds_then_gives([1])),  # the item is in the set by the time it is compared
        sorted(s.intersection(adds_then_gives([2, 3]))),
        sorted(s.union(adds_then_gives([4]))),  # copied before the generator runs
    )
    t = {1}
    t.__init__(len(t) + k for k in range(2))  # emptied first, then each item added as it comes
    return x + 1, answers, sorted(s), sorted(t)


@pytest.mark.parametrize(
    "fn", [set_methods_take_a_generators_items_as_python_does, set_methods_read_the_set_as_the_generator_changes_it]
)
def test_set_methods_consume_a_generator_as_cpythons_do(fn):
    """A generator given to a set method is advanced as far as CPython's method advances it (isdisjoint and
    issuperset stop at the answer), each item compared with the set as it is then: one graph, eager's answers and
    the generator's record."""
    counter = CompileCounter()
    x = torch.randn(2)
    got, want = framejit.compile(fn, backend=counter, fullgraph=True)(x), fn(x)
    assert same(got, want), (got, want)
    assert counter.frame_count == 1


def test_isdisjoint_of_a_generator_with_effects_in_a_closure():
    """The generator writes a variable of its enclosing function: isdisjoint stops at the first common item, so
    the count, and the branch it picks, are eager's."""

    def run():
        n = 0

        def gen():
            nonlocal n
            n += 1
            yield 1
            n += 2
            yield 2
            n += 3
            yield 3

        def fn(x):
            r = {2, 4, 5}.isdisjoint(gen())
            return (x.sin() if n == 3 else x.cos()), r, n

        return fn

    x = torch.randn(3)
    assert same(framejit.compile(run(), backend="eager", fullgraph=True)(x), run()(x))
