"""Functions made in the trace have a function's attributes: functools.wraps copies __name__, __module__,
__doc__, __dict__ and sets __wrapped__; writes are the trace's own and go with the function when it leaves the
frame."""

from __future__ import annotations

import functools

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


def counted(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


def decorates_inside(x):
    @counted
    def scale(t):
        """Scale by three."""
        return t * 3

    return scale(x).sin(), scale.__name__, scale.__doc__, scale.__wrapped__.__name__, scale.__module__


def test_functools_wraps_on_a_function_made_in_the_trace_is_one_graph():
    counter = CompileCounter()
    compiled = framejit.compile(decorates_inside, backend=counter)
    x = torch.randn(4)
    got, expected = compiled(x), decorates_inside(x)
    assert same(got[0], expected[0]) and got[1:] == expected[1:] == ("scale", "Scale by three.", "scale", __name__)
    assert counter.frame_count == 1
    assert framejit.explain(decorates_inside)(x).break_reasons == []


def returns_a_decorated_function(x):
    def inner(t):
        return t - 1

    inner.tag = "mine"
    inner.__qualname__ = "renamed"
    print("a break")  # the function leaves the traced piece: rebuilt with what the trace wrote
    return counted(inner), x * 2


def test_attributes_written_in_the_trace_go_with_the_function_it_rebuilds():
    compiled = framejit.compile(returns_a_decorated_function, backend="eager")
    fn, y = compiled(torch.ones(2))
    assert fn.tag == "mine" and fn.__wrapped__.tag == "mine" and fn.__qualname__ == "renamed"
    assert same(fn(torch.ones(2)), torch.ones(2)) and same(y, torch.full((2,), 2.0))


def test_a_missing_function_attribute_is_an_attribute_error_as_in_eager():
    def f(x):
        def g():
            pass

        return x + (1 if getattr(g, "__wrapped__", None) is None else 2)

    assert same(framejit.compile(f, backend="eager")(torch.zeros(1)), torch.ones(1))

    def g(x):
        def h():
            pass

        return h.missing

    with pytest.raises(AttributeError, match="'function' object has no attribute 'missing'"):
        framejit.compile(g, backend="eager")(torch.zeros(1))
