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
