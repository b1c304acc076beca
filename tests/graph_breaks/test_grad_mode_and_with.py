"""Graph breaks: breaks inside grad-mode blocks and with-blocks.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import operator

import pytest
import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import brk, differential, observe_events, raise_value_error, rec
from tests.helpers import targets


# --- grad mode and with-blocks ---


def nograd_break(x):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        brk()
        w = z + y
        inside = torch.is_grad_enabled()
    v = w + y
    return y, z, w, v, inside


def nograd_tensor_branch(x):
    with torch.no_grad():
        z = x * 3
        if z.sum() > 0:
            z = z + 1
        w = z * x
    return z, w, x * 2


def nested_grad_modes(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            brk()
            c = x * 4
            in_enable = torch.is_grad_enabled()
        d = x * 5
        brk()
        e = x * 6
        in_no_grad = torch.is_grad_enabled()
    f = x * 7
    return a, b, c, d, e, f, in_enable, in_no_grad


def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        a = x * 2
        brk()
        b = a + x
    return a, b, x + 1


def break_in_with_of_user_context(x, log):
    class Ctx:
        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, *exc):
            log.append("exit")
            return False

    with Ctx():
        y = x + 1
        rec(log, "inside")
        y = y * 2
    return y


GRAD_CASES = [nograd_break, nograd_tensor_branch, nested_grad_modes, set_grad_enabled_block]


@pytest.mark.parametrize("fn", GRAD_CASES, ids=[f.__name__ for f in GRAD_CASES])
@pytest.mark.parametrize("outer", ["grad", "no_grad"])
def test_break_in_grad_mode_blocks(fn, outer):
    args = [(torch.randn(3, requires_grad=True),), (-torch.ones(3, requires_grad=True),)]
    if outer == "grad":
        differential(fn, *args, observe=observe_events, repeat=2)
    else:
        with torch.no_grad():
            differential(fn, *args, observe=observe_events, repeat=2)
        assert torch.is_grad_enabled()


def test_ops_after_break_in_no_grad_are_still_no_grad():
    cnt = CompileCounter()
    x = torch.randn(3, requires_grad=True)
    y, z, w, v, inside = framejit.optimize(cnt)(nograd_break)(x)
    assert (y.requires_grad, z.requires_grad, w.requires_grad, v.requires_grad) == (True, False, False, True)
    assert inside is False and torch.is_grad_enabled()
    # before the break: [mul, mul] (+ grad-mode switches); continuation: w, v
    all_targets = [t for g in cnt.graphs for t in targets(g)]
    assert all_targets.count(operator.add) == 2 and cnt.frame_count == 2


def test_break_in_user_context_manager():
    differential(break_in_with_of_user_context, (torch.randn(3), []), repeat=2)


def test_grad_mode_restored_when_break_raises_inside_no_grad():
    def fn(x, log):
        with torch.no_grad():
            y = x * 2
            raise_value_error(log)
            y = y + 1
        return y

    differential(fn, (torch.randn(3, requires_grad=True), []), repeat=2)


def raises_inside_no_grad_at_run_time(x):
    with torch.no_grad():
        t = x * 1
        t.mul_(t[0])  # overlapping memory: only the real run raises, inside the graph
    return t


def test_a_graph_raising_inside_no_grad_leaves_grad_mode_as_eager_does():
    differential(raises_inside_no_grad_at_run_time, (torch.randn(3, 4),))
    assert torch.is_grad_enabled()
