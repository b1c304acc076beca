"""Python that validation and dispatch code in models uses: registries keyed by type or type hint, typing
introspection of hints, truth of functions and of objects with __len__/__bool__, `@torch.no_grad()` on a method,
torch.is_tensor of a Python number."""

import typing

import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


def check_int(value):
    return isinstance(value, int)


def check_union(value, members):
    return any(isinstance(value, m) for m in members)


VALIDATORS = {int: check_int, typing.Union: check_union}  # keyed by classes and a typing construct


def validate(value, hint):
    """The shape of a dataclass field validator: dispatch on typing.get_origin(hint) through a registry."""
    origin = typing.get_origin(hint)
    if validator := VALIDATORS.get(origin):
        return validator(value, typing.get_args(hint))
    if validator := VALIDATORS.get(hint):
        return validator(value)
    return False


def test_a_registry_keyed_by_types_dispatches_on_a_hint_in_one_graph():
    def fn(x):
        ok = validate(3, int) and validate(4, typing.Optional[int]) and not validate("a", int | None)
        return x + 1 if ok else x - 1

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), x + 1)


def test_a_changed_registry_recompiles():
    def fn(x):
        return x + 1 if validate(3, int) else x - 1

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(compiled(x), x + 1)
    saved = VALIDATORS.pop(int)  # its keys are guarded
    try:
        assert same(compiled(x), x - 1) and cnt.frame_count == 2
    finally:
        VALIDATORS[int] = saved


class Bag:
    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


def test_truth_of_user_objects_calls_their_bool_or_len():
    def fn(x, bag, flag):
        made = Bag([])
        return (x + 1 if bag else x - 1) * (2 if flag else 3) + (10 if made else 0) + (100 if fn else 0)

    x = torch.randn(2)
    for bag, flag in [(Bag([1]), Flag(True)), (Bag([]), Flag(False))]:
        assert same(run_fullgraph(fn, x, bag, flag), fn(x, bag, flag))


class Table(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    @torch.no_grad()
    def frozen(self, x):
        return self.proj(x) * 2

    def forward(self, x):
        return self.frozen(x), self.proj(x)


def test_a_no_grad_decorated_method_is_traced_under_its_mode():
    table = Table()
    x = torch.randn(2, 3)
    (frozen, live), (want_frozen, want_live) = run_fullgraph(table, x), table(x)
    assert same(frozen, want_frozen) and same(live, want_live)
    assert not frozen.requires_grad and live.requires_grad and torch.is_grad_enabled()


def test_is_tensor_of_a_number_or_a_tensor():
    def fn(x, n):
        return x * 2 if torch.is_tensor(x) and not torch.is_tensor(n) else x

    x = torch.randn(2)
    assert same(run_fullgraph(fn, x, 3), x * 2)
