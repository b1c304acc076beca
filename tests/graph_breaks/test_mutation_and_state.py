"""Graph breaks: mutation by the unsupported part, and other frames and state across a break.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import brk, differential, observe_events, opaque, push
from tests.helpers import Box, assert_equal


# --- mutation by the unsupported part ---


def mutated_argument(x, lst):
    lst.append(x + 1)
    push(lst, x * 2)
    return torch.stack(lst).sum(0) + len(lst)


def mutated_local(x):
    buf = [x]
    push(buf, x * 2)
    buf.append(x - 1)
    push(buf, buf[-1])
    return torch.stack(buf), len(buf)


GLOBAL_LOG: list = []


def mutated_global(x):
    GLOBAL_LOG.append(x + 1)
    push(GLOBAL_LOG, x * 2)
    return GLOBAL_LOG[0] + GLOBAL_LOG[-1] * len(GLOBAL_LOG)


def mutated_dict(x, d):
    d["a"] = x + 1
    opaque_setitem(d, "b", x * 3)
    return d["a"] + d["b"] + len(d)


@opaque
def opaque_setitem(d, k, v):
    d[k] = v
    d.pop("gone", None)


def mutated_object(x, obj):
    obj.value = x + 1
    opaque_setattr(obj)
    return obj.value * obj.extra


@opaque
def opaque_setattr(obj):
    obj.value = obj.value * 10
    obj.extra = 3


def test_unsupported_call_mutates_argument_list():
    differential(mutated_argument, (torch.randn(3), [torch.zeros(3)]), repeat=2)


def test_unsupported_call_mutates_local_list():
    differential(mutated_local, (torch.randn(3),), repeat=2)


def test_unsupported_call_mutates_global_list():
    def reset_log():
        GLOBAL_LOG.clear()

    differential(mutated_global, (torch.randn(3),), before=reset_log, observe=lambda: list(GLOBAL_LOG), repeat=2)


def test_unsupported_call_mutates_dict():
    differential(mutated_dict, (torch.randn(3), {"gone": 1}), repeat=2)


def test_unsupported_call_mutates_object():
    differential(mutated_object, (torch.randn(3), Box(value=None, extra=None)), repeat=2)


def test_side_effects_before_break_are_visible_to_unsupported_code():
    seen = []

    @opaque
    def snapshot(lst, d):
        seen.append((len(lst), sorted(d)))

    def fn(x, lst, d):
        lst.append(x)
        d["new"] = x * 2
        snapshot(lst, d)
        return x + 1

    framejit.optimize(CompileCounter())(fn)(torch.randn(3), [], {})
    assert seen == [(1, ["new"])]


# --- other frames and state across a break ---


def varargs_fn(x, *args, **kwargs):
    y = x + sum(args)
    brk()
    return y * kwargs["k"] + len(args)


def test_break_in_function_with_varargs():
    cnt = differential(varargs_fn, (torch.randn(3), torch.ones(3), 2.0), kwargs={"k": 3}, repeat=2)
    assert cnt.frame_count == 2


def inplace_input(x, y):
    x.add_(1)
    brk()
    y.mul_(x)
    return x * 2


def test_in_place_mutation_of_inputs_across_break():
    differential(inplace_input, (torch.randn(3), torch.randn(3)), repeat=2)


COUNTER = 0


def rebinds_global(x):
    global COUNTER
    COUNTER = COUNTER + 1
    brk()
    COUNTER = COUNTER * 10
    return x * COUNTER


def test_global_rebinding_across_break():
    def reset_counter():
        global COUNTER
        COUNTER = 0

    differential(rebinds_global, (torch.randn(3),), before=reset_counter, observe=lambda: COUNTER)


def unbound_local_at_break(x, flag):
    if flag:
        late = x * 2
    brk()
    if flag:
        return late + 1
    late = x - 1
    return late


def test_local_unbound_at_break():
    differential(unbound_local_at_break, (torch.randn(3), True), (torch.randn(3), False), repeat=2)


def deleted_local(x):
    tmp = x * 2
    del tmp
    brk()
    try:
        return tmp  # noqa: F821
    except UnboundLocalError:
        return x + 1


def test_deleted_local_stays_deleted_across_break():
    differential(deleted_local, (torch.randn(3),))


def recursive_with_break(x, depth):
    if depth == 0:
        return x
    y = x * 2
    brk()
    return recursive_with_break(y, depth - 1) + 1


def test_recursive_function_with_break():
    differential(recursive_with_break, (torch.randn(3), 3), observe=observe_events, repeat=2)


class BreakingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        brk()
        if h.sum() > 0:
            h = h * 2
        return self.b(h)


def test_module_forward_with_breaks_and_gradients():
    torch.manual_seed(0)
    mod = BreakingModule()
    opt = framejit.optimize(CompileCounter())(mod)
    for x in (torch.randn(3, 4), torch.randn(3, 4) - 5):
        expected = mod(x)
        got = opt(x)
        assert_equal(got, expected)
        expected.sum().backward()
        eager_grads = [p.grad.clone() for p in mod.parameters()]
        mod.zero_grad()
        got.sum().backward()
        assert_equal([p.grad for p in mod.parameters()], eager_grads)
        mod.zero_grad()


def test_gradients_flow_through_graphs_on_both_sides_of_a_break():
    def fn(x, w):
        h = x * w
        brk()
        return (h.sin() * w).sum()

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    eager = fn(x, w)
    (eager_grad,) = torch.autograd.grad(eager, w)
    got = framejit.optimize(CompileCounter())(fn)(x, w)
    assert got.requires_grad
    (got_grad,) = torch.autograd.grad(got, w)
    assert_equal(got, eager)
    assert_equal(got_grad, eager_grad)
