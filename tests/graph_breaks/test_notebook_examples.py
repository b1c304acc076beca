"""Graph breaks: the notebook's foo1 / foo2.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import torch

import framejit
from framejit.testing import CompileCounter

from tests.helpers import assert_equal


# ---------------------------------------------------------------------------------------------
# the notebook's foo1 / foo2
# ---------------------------------------------------------------------------------------------


def foo1(a: torch.tensor, b: torch.tensor):
    x = a + b
    if b.sum() < 0:
        x = x * -1
    return x


def foo2(a: torch.tensor, b: torch.tensor):
    x = a + b
    if b.sum() < 0:
        x = x * -1
    if a.sum() < 0:
        x = x * -2
    x = 2 * x
    return x


def test_foo1_both_signs():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo1)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    assert_equal(f(a, b), foo1(a, b))
    # graph [add, sum, lt]; the not-taken continuation is `return x`: no tensor op, no graph
    assert cnt.frame_count == 1 and cnt.op_count == 3
    assert_equal(f(a, -b), foo1(a, -b))
    # the first entry hits; the taken continuation `x = x * -1` compiles [mul]
    assert cnt.frame_count == 2 and cnt.op_count == 4
    for args in ((-a, b), (-a, -b), (a, b), (a, -b)):  # the sign of a is irrelevant to foo1
        assert_equal(f(*args), foo1(*args))
    assert cnt.frame_count == 2


def test_foo2_all_four_sign_combinations():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo2)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    expected_counts = [
        # (a, b): [add, sum, lt]; continuation at `if a.sum()`: [sum, lt]; continuation at `x = 2 * x`: [mul]
        ((a, b), 3),
        # (-a, b): first two entries hit; continuation at `x = x * -2`: [mul, mul]
        ((-a, b), 4),
        # (a, -b): continuation at `x = x * -1`: [mul, sum, lt]; then `x = 2 * x` is the same
        # continuation code as in the first call (same offset, same live locals): a cache hit
        ((a, -b), 5),
        # (-a, -b): every continuation it reaches is already compiled
        ((-a, -b), 5),
    ]
    for args, count in expected_counts:
        assert_equal(f(*args), foo2(*args))
        assert cnt.frame_count == count, (args, cnt.frame_count)


def test_foo2_other_order():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(foo2)
    a, b = torch.ones((2, 3)), torch.ones((2, 3))
    # (-a, -b): [add, sum, lt], [mul, sum, lt], [mul, mul]
    assert_equal(f(-a, -b), foo2(-a, -b))
    assert cnt.frame_count == 3
    # (a, b): [sum, lt] at `if a.sum()`, [mul] at `x = 2 * x`
    assert_equal(f(a, b), foo2(a, b))
    assert cnt.frame_count == 5
    for args in ((-a, b), (a, -b)):
        assert_equal(f(*args), foo2(*args))
    assert cnt.frame_count == 5
    framejit.reset()  # a reset forgets everything: the same sequence compiles again from scratch
    cnt2 = CompileCounter()
    assert_equal(framejit.optimize(cnt2)(foo2)(-a, -b), foo2(-a, -b))
    assert cnt2.frame_count == 3
