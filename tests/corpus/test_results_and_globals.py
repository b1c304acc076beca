"""Capture corpus: returning mixed structures, programs with no graph op, the identity of
returned values, and side effects on globals and closures.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.corpus.harness import case_registry, check, program_params, t


CASES, case = case_registry()


# ---- returning mixed structures ---------------------------------------------------------------------


@case(t(3), ops=1)
def return_mixed_tuple(x):
    return x + 1, 3, "s", None, 2.5


@case(t(3), ops=3)
def return_nested(x):
    return {"a": [x + 1, (x * 2, 5)], "b": {"c": x - 1}, "d": (1, "two")}


@case(t(3), t(3), ops=1)
def return_inputs_and_new(x, y):
    return [x, y + 1, x]


@case(t(3), ops=1)
def return_metadata_with_tensor(x):
    return x * 2, x.shape, x.dtype, x.device, range(2), slice(1, 2)


@case(t(3), ops=2)
def return_dict_int_keys(x):
    return {0: x + 1, 1: x - 1}


@case(t(3), ops=1)
def return_same_list_twice(x):
    lst = [x + 1]
    return lst, lst


@case(t(3), t(3), ops=1)
def return_input_unchanged_with_op(x, y):
    return x, y * 2


# ---- programs with no graph op: not compiled ----------------------------------------------------------


@case(t(3), ops=0, graphs=0)
def no_op_constant(x):
    return 3


@case(t(3, 4), ops=0, graphs=0)
def no_op_shape_arithmetic(x):
    return x.shape[0] * 2 + x.ndim


@case(t(3), ops=0, graphs=0)
def no_op_identity(x):
    return x


@case(t(3), t(3), ops=0, graphs=0)
def no_op_reorder(x, y):
    return [y, x], {"x": x}


@case(4, ops=0, graphs=0)
def no_op_fstring(n):
    return f"n={n}"


@case(t(3, 4), ops=0, graphs=0)
def no_op_metadata(x):
    return x.dtype, x.numel(), x.is_contiguous(), x.size()


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)


# ---------------------------------------------------------------------------------------------
# dedicated tests: identity of returned values and side effects on globals / closures
# ---------------------------------------------------------------------------------------------


def test_returned_input_is_the_same_object():
    cnt, results = check(return_input_unchanged_with_op, t(3), t(3), ops=1)
    for got, cargs, _ in results:
        assert got[0] is cargs[0]


def test_returned_mutated_argument_is_the_same_list():
    def side_effect_return_mutated_arg(x, out):
        out.append(x * 2)
        return out

    cnt, results = check(side_effect_return_mutated_arg, t(3), [], ops=1)
    for got, cargs, _ in results:
        assert got is cargs[1] and len(got) == 1


def test_same_list_returned_twice_keeps_identity():
    cnt, results = check(return_same_list_twice, t(3), ops=1)
    for got, _, _ in results:
        assert got[0] is got[1]


counter = 0


def side_effect_global_counter(x):
    global counter
    counter += 1
    return x + counter


def test_side_effect_global_counter():
    global counter
    x = t(3)
    counter = 0
    expected = side_effect_global_counter(x)
    expected_counter = counter
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(side_effect_global_counter)
    for _ in range(2):
        counter = 0
        got = compiled(x)
        assert same(got, expected)
        assert counter == expected_counter == 1
        assert cnt.frame_count == 1 and cnt.op_count == 1


_stash = None


def side_effect_global_tensor(x):
    global _stash
    _stash = x * 2
    return x + 1


def test_side_effect_global_tensor():
    global _stash
    x = t(3)
    _stash = None
    expected = side_effect_global_tensor(x)
    expected_stash = _stash
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(side_effect_global_tensor)
    for _ in range(2):
        _stash = None
        got = compiled(x)
        assert same(got, expected)
        assert isinstance(_stash, torch.Tensor) and same(_stash, expected_stash)
        assert cnt.frame_count == 1 and cnt.op_count == 2


def _make_bumper():
    calls = 0

    def side_effect_closure_nonlocal(x):
        nonlocal calls
        calls += 1
        return x * calls

    return side_effect_closure_nonlocal, lambda: calls


def test_side_effect_closure_nonlocal():
    x = t(3)
    eager_fn, eager_calls = _make_bumper()
    expected = eager_fn(x)
    fn, calls = _make_bumper()
    cnt = CompileCounter()
    got = framejit.optimize(cnt, nopython=True)(fn)(x)
    assert same(got, expected)
    assert calls() == eager_calls() == 1
    assert cnt.frame_count == 1 and cnt.op_count == 1


# programs outside CASES that test_opcode_coverage.py walks too
EXTRA_PROGRAMS = (side_effect_global_counter, side_effect_global_tensor, _make_bumper)
