"""Exceptions raised and caught inside traced code: a missing key, an index out of range or a `raise` in an
inlined function jump to the handler of its try block (or its caller's), and the trace goes on in one graph."""

import collections.abc

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.helpers import run_fullgraph

TABLE = {"relu": torch.relu, "tanh": torch.tanh}


class Registry(collections.abc.Mapping):
    """A Mapping whose __getitem__ raises KeyError; Mapping.get catches it (try/except in the stdlib mixin)."""

    def __init__(self, table):
        self._table = table

    def __getitem__(self, key):
        return self._table[key]

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)


REGISTRY = Registry(TABLE)


def lookup(name):
    try:
        return TABLE[name]
    except KeyError:
        return torch.sigmoid


def nth(items, i):
    try:
        return items[i]
    except (IndexError, TypeError) as e:
        return type(e).__name__


def checked(x, limit):
    if limit < 0:
        raise ValueError("negative limit")
    return x.clamp(max=limit)


def safe_clamp(x, limit):
    try:
        return checked(x, limit)  # raised one frame below the try
    except ValueError as e:
        return x * len(str(e))
    finally:
        x = x + 0


def uncaught_here(name):
    try:
        return TABLE[name]
    except IndexError:  # does not match: the KeyError goes on to the caller
        return None


def caller(name):
    try:
        return uncaught_here(name)
    except LookupError:
        return torch.neg


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_a_missing_key_caught_in_an_inlined_function(name):
    def fn(x):
        return lookup(name)(x) + 1

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


@pytest.mark.parametrize("name", ["tanh", "gelu"])
def test_mapping_get_catches_the_key_error_of_getitem(name):
    def fn(x):
        return REGISTRY.get(name, torch.exp)(x)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_index_error_and_the_bound_name():
    def fn(x):
        return x * len(nth([1, 2], 5)) + nth([1, 2], 1)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


@pytest.mark.parametrize("limit", [0.5, -1.0])
def test_raise_in_a_callee_caught_by_the_caller_with_finally(limit):
    def fn(x):
        return safe_clamp(x, limit) - 1

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_an_unmatched_handler_passes_the_exception_to_the_caller():
    def fn(x):
        return caller("gelu")(x)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_an_exception_nobody_catches_is_still_a_graph_break():
    def fn(x):
        y = x + 1
        return lookup("relu")(y) + uncaught_here("gelu")(y)  # TypeError calling None... after a KeyError escapes

    cnt = CompileCounter()
    x = torch.randn(4)
    with pytest.raises(KeyError):
        framejit.optimize(cnt)(fn)(x)
    with pytest.raises(framejit.exc.Unsupported, match="KeyError"):
        framejit.optimize(CompileCounter(), nopython=True)(fn)(x)
