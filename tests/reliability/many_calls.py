"""What the many-calls tests share (tests/reliability/test_many_calls.py, tests/models/test_hf_zoo_many_calls.py):
how many calls, which inputs each call gets, and a quick comparison of many named tensors.

A compiled model called twice never reaches CPython's quickening (a code object is specialised after about
eight runs), where a graph of 255+ inputs once crashed the interpreter: these tests call each model 100 times."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import pytest
import torch
from torch.utils import _pytree as pytree

CALLS = 100
TOL = dict(atol=1e-5, rtol=1e-4)

Inputs = TypeVar("Inputs")


@pytest.fixture
def one_thread():
    """Small models gain nothing from intra-op threads, and on a busy 2-core machine their spinning made each call
    ten times slower. (A test module that imports this fixture uses it by name or with usefixtures.)"""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def inputs_for(call: int, previous: Inputs | None, make_fresh: Callable[[], Inputs]) -> Inputs:
    """The inputs of call number `call` (from 0): fresh ones from `make_fresh()`, except on calls 4, 14, 24, ...
    the previous call's very objects again, and on calls 7, 17, 27, ... those objects with fresh values written
    into their tensors in place (the guards see the same objects, the values are new)."""
    if previous is not None and call % 10 == 4:
        return previous
    if previous is not None and call % 10 == 7:
        fresh = make_fresh()
        olds, news = pytree.tree_leaves(previous), pytree.tree_leaves(fresh)
        assert len(olds) == len(news)
        with torch.no_grad():
            for old, new in zip(olds, news):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
        return previous
    return make_fresh()


def assert_all_close(got: dict[str, Any], want: dict[str, Any], what: str) -> None:
    """assert_close on each pair of tensors (named by the keys), with a cheap allclose first: a training step of a
    model of 300 parameters compares about a thousand tensors."""
    assert list(got) == list(want), what
    for name, w in want.items():
        g = got[name]
        if not (
            isinstance(g, torch.Tensor) and g.shape == w.shape and g.dtype == w.dtype and torch.allclose(g, w, **TOL)
        ):
            torch.testing.assert_close(g, w, **TOL, msg=lambda m: f"{what}, {name}: {m}")
