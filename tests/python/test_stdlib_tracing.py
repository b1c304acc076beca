"""Pure-Python standard-library code is traced when user code calls it, but for a short deny list of modules
where tracing is wrong (threads, the OS, imports, logging, regular expressions, the global random generator...):
a call into those is a graph break that names the module and why."""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import logging
import operator
import random
import re
import threading
import typing
import unittest

import pytest
import torch

import framejit
from framejit import capture_policy
from framejit.testing import CompileCounter, same


def _compiled(fn):
    counter = CompileCounter()
    return framejit.compile(fn, backend=counter), counter


def _breaks(fn, *args):
    return [str(r) for r in framejit.explain(fn)(*args).break_reasons]


class _Case(unittest.TestCase):
    def runTest(self):  # (a TestCase needs a test method to be made)
        pass


_case = _Case()


def cast_then_scale(x):
    y = typing.cast(torch.Tensor, x)
    return y * 2


def unittest_assertions(x):
    y = x + 1
    _case.assertEqual(y.shape, x.shape)
    _case.assertTrue(y.dim() == 1)
    _case.assertIsInstance(y, torch.Tensor)
    return y * 2


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def enum_by_value(x):
    return x * Color(2).value + Color["RED"].value


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: int


def dataclass_helpers(x):
    p = Pair(x, 3)
    fields = [f.name for f in dataclasses.fields(p)]
    q = dataclasses.replace(p, b=4)
    return q.a * q.b + len(fields)


def reduce_and_partial(x):
    total = functools.reduce(operator.add, [x, x * 2, x * 3])
    return functools.partial(torch.mul, other=2)(total)


@pytest.mark.parametrize(
    "fn", [cast_then_scale, unittest_assertions, enum_by_value, dataclass_helpers, reduce_and_partial]
)
def test_stdlib_code_is_traced_into_one_graph(fn):
    compiled, counter = _compiled(fn)
    x = torch.randn(4)
    for _ in range(3):
        assert same(compiled(x), fn(x))
    assert counter.frame_count == 1
    assert _breaks(fn, x) == []


def test_a_failing_unittest_assertion_raises_as_in_eager():
    def check(x):
        _case.assertEqual(x.dim(), 2)
        return x + 1

    compiled, _ = _compiled(check)
    with pytest.raises(AssertionError, match="1 != 2"):
        compiled(torch.randn(3))
    out = torch.randn(2, 2)
    assert same(compiled(out), out + 1)


_log = logging.getLogger("framejit.test_stdlib_tracing")


def asks_the_thread(x):
    return x + len(threading.current_thread().name)


def logs(x):
    _log.warning("value %s", 1)
    return x + 1


def matches(x):
    return x * len(re.findall("a", "banana"))


def draws(x):
    return x * random.uniform(1.0, 2.0)


@pytest.mark.parametrize(
    ("fn", "module"), [(asks_the_thread, "threading"), (logs, "logging"), (matches, "re"), (draws, "random")]
)
def test_denied_modules_break_with_the_module_and_the_reason(fn, module):
    reasons = _breaks(fn, torch.randn(3))
    assert any(f"the standard library's {module} (" in r for r in reasons), reasons


def test_denied_calls_still_run_as_python_and_give_eager_results():
    random.seed(0)
    expected = draws(torch.ones(3))
    compiled, _ = _compiled(draws)
    random.seed(0)
    assert same(compiled(torch.ones(3)), expected)  # the draw happened once, in Python, as in eager
    assert same(_compiled(matches)[0](torch.ones(2)), torch.full((2,), 3.0))


def test_a_stdlib_function_handed_to_framejit_as_a_frame_is_not_captured():
    """Its frames are traced when user code calls them, never captured on their own."""
    compiled = framejit.compile(typing.cast, backend=CompileCounter())
    with pytest.warns(framejit.exc.NothingCompiledWarning, match="the standard library"):
        x = torch.ones(2)
        assert compiled(torch.Tensor, x) is x


_Pair = collections.namedtuple("_Pair", "first second")


@dataclasses.dataclass
class _Scaled:
    x: torch.Tensor
    scale: float = 2.0

    def __post_init__(self):
        self.y = self.x * self.scale


def test_code_the_stdlib_generates_is_traced_but_not_captured_on_its_own():
    """namedtuple's __new__ and a dataclass's __init__ are compiled from text (file "<string>"): traced where user
    code makes them (one graph), but frames of their own run as Python, as the rest of the standard library; code
    a user execs from a string is still user code."""
    for code in (_Pair.__new__.__code__, _Scaled.__init__.__code__, _Scaled.__eq__.__code__):
        assert capture_policy.capture_refusal(code) == "the standard library (traced when called from user code)"
    namespace: dict = {}
    exec("def user_fn(x):\n    return x + 1\n", namespace)
    assert capture_policy.capture_refusal(namespace["user_fn"].__code__) is None

    def make(x):
        pair = _Pair(x, x + 1)
        return _Scaled(pair.second).y + pair.first

    counter = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.compile(make, backend=counter)(x), make(x))
    assert counter.frame_count == 1
