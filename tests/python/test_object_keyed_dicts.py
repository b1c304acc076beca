"""Dicts from outside the frame whose keys are objects compared by identity (tensors, plain instances), as an
optimizer's state is: read, written, and guarded key by key (by identity, in order)."""

from __future__ import annotations

import collections

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import ByValue


class Key:
    pass


def _compiled(fn):
    counter = CompileCounter()
    return framejit.compile(fn, backend=counter), counter


def read_by_object_keys(x, table, a, b):
    return x * table[a] + table[b] * table["scale"]


def test_values_are_read_by_object_key_in_one_graph():
    a, b = Key(), Key()
    table = {a: 2.0, "scale": 3.0, b: torch.ones(3)}
    compiled, counter = _compiled(read_by_object_keys)
    x = torch.randn(3)
    for _ in range(3):
        assert same(compiled(x, table, a, b), read_by_object_keys(x, table, a, b))
    assert counter.frame_count == 1
    assert framejit.explain(read_by_object_keys)(x, table, a, b).break_reasons == []


def test_another_key_object_recompiles_and_a_missing_key_raises_as_in_eager():
    a, b = Key(), Key()
    compiled, counter = _compiled(read_by_object_keys)
    x = torch.randn(3)
    compiled(x, {a: 2.0, "scale": 3.0, b: 1.0}, a, b)
    c = Key()
    table = {c: 5.0, "scale": 3.0, b: 1.0}
    assert same(compiled(x, table, c, b), read_by_object_keys(x, table, c, b))
    assert counter.frame_count == 2  # the key at position 0 is another object: the guard saw it
    with pytest.raises(KeyError):
        compiled(x, table, a, b)


def step_state(x, state, p, q):
    s = state[p]  # present
    s["m"].add_(x)
    fresh = state[q]  # a defaultdict makes it: a write replayed after the graph
    fresh["m"] = x * 2
    return s["m"] + 1


def test_a_defaultdict_keyed_by_tensors_is_read_and_written_as_in_eager():
    p, q = torch.randn(3), torch.randn(3)
    x = torch.randn(3)
    expected_state = collections.defaultdict(dict, {p: {"m": torch.zeros(3)}})
    expected = step_state(x, expected_state, p, q)
    state = collections.defaultdict(dict, {p: {"m": torch.zeros(3)}})
    compiled, counter = _compiled(step_state)
    assert same(compiled(x, state, p, q), expected)
    assert list(state) == [p, q]  # keys by identity, in eager's order
    assert same(state[p]["m"], expected_state[p]["m"]) and same(state[q]["m"], expected_state[q]["m"])
    assert counter.frame_count == 1


def test_keys_that_compare_by_value_are_still_refused_with_a_reason():
    key = ByValue()
    reasons = framejit.explain(lambda x, d: x * d[key])(torch.ones(2), {key: 2.0}).break_reasons
    assert any("neither constants nor compared by identity" in str(r) for r in reasons), reasons
