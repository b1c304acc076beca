"""Attribute lookup as Python does it: a __getattribute__ or __getattr__ written in Python is traced, slots and
C getters are read, dict subclasses are read as dicts, and every value read is guarded. Objects with __slots__
made in the trace: their slots are written, read, deleted and replayed after the graph as in eager."""

import pytest
import torch
from torch.utils._ordered_set import OrderedSet

import framejit
from framejit.testing import CompileCounter, same


class Config:
    """A config in the style of model libraries: aliases resolved by a custom __getattribute__."""

    attribute_map = {"hidden": "hidden_size"}

    def __init__(self, hidden_size, scale):
        self.hidden_size = hidden_size
        self.scale = scale

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Defaults:
    """Missing attributes come from __getattr__."""

    def __init__(self):
        self.present = 2.0

    def __getattr__(self, name):
        return 10.0 if name.startswith("opt_") else 0.0


class Slotted:
    __slots__ = ("weight",)

    def __init__(self, weight):
        self.weight = weight


def test_a_custom_getattribute_is_traced_in_one_graph():
    cfg = Config(4, 3.0)

    def fn(x):
        return x[..., : cfg.hidden] * cfg.scale

    cnt = CompileCounter()
    x = torch.randn(2, 6)
    assert same(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))
    assert cnt.frame_count == 1


def test_a_changed_value_behind_a_custom_getattribute_recompiles():
    cfg = Config(4, 3.0)

    def fn(x):
        return x * cfg.scale

    cnt = CompileCounter()
    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), fn(x))
    cfg.scale = 5.0
    assert same(f(x), fn(x))
    assert cnt.frame_count == 2


def test_getattr_with_a_default_through_a_custom_getattribute():
    cfg = Config(4, 3.0)

    def fn(x):
        return x * getattr(cfg, "missing", 7.0) + getattr(cfg, "scale", 0.0)

    x = torch.randn(3)
    assert same(framejit.optimize(CompileCounter(), nopython=True)(fn)(x), fn(x))


def test_getattr_fallback_is_traced():
    obj = Defaults()

    def fn(x):
        return x * obj.present + obj.opt_lr + obj.other

    cnt = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))
    assert cnt.frame_count == 1


def test_a_getattribute_that_raises_behaves_as_in_eager():
    class Strict:
        def __getattribute__(self, name):
            raise RuntimeError(f"no reading {name}")

    obj = Strict()

    def fn(x):
        return x + obj.anything

    with pytest.raises(RuntimeError, match="no reading anything"):
        framejit.optimize(CompileCounter())(fn)(torch.randn(2))


def test_a_slot_is_read_and_guarded():
    obj = Slotted(2.0)

    def fn(x):
        return x * obj.weight

    cnt = CompileCounter()
    f = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(3)
    assert same(f(x), fn(x))
    obj.weight = 3.0
    assert same(f(x), fn(x))
    assert cnt.frame_count == 2


class Pair:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Triple(Pair):
    __slots__ = ("c",)


class PairWithDict(Pair):
    pass


def slots_state(obj):
    """What an object with slots holds: each slot's value (or that it is unset), and its __dict__ if any."""
    names = [n for k in type(obj).__mro__ for n in getattr(k, "__slots__", ())]
    return [(n, getattr(obj, n, "<unset>")) for n in names], getattr(obj, "__dict__", None)


def made_and_escapes(x):
    p = Pair(x, 2)
    p.b = p.b + 1
    return p.a * p.b, p


def an_unset_slot(x):
    t = Triple(x, 1)
    try:
        return t.c
    except AttributeError as e:
        return x + 1, str(e), hasattr(t, "c"), hasattr(t, "a"), getattr(t, "c", 7)


def no_dict_to_write(x):
    p = Pair(x, 1)
    try:
        p.z = 3
    except AttributeError as e:
        return x - 1, str(e), hasattr(p, "__dict__")


def slots_and_a_dict(x):
    w = PairWithDict(x, 1)
    w.extra = 5
    return w.a + w.extra, w.__dict__, w


def a_deleted_slot(x):
    p = Pair(x, 1)
    del p.b
    return x + 1, p, hasattr(p, "b")


def an_ordered_set(x):
    s = OrderedSet([3, 1, 2])
    s.add(0)
    s.discard(1)
    t = s | OrderedSet([7])
    return x + len(t), list(t), 3 in s, s


@pytest.mark.parametrize(
    "fn", [made_and_escapes, an_unset_slot, no_dict_to_write, slots_and_a_dict, a_deleted_slot, an_ordered_set]
)
def test_an_object_with_slots_made_in_the_trace_is_one_graph(fn):
    x = torch.randn(3)
    cnt = CompileCounter()
    got, want = framejit.optimize(cnt, nopython=True)(fn)(x), fn(x)
    assert cnt.frame_count == 1
    assert same(got[0], want[0])
    for g, w in zip(got[1:], want[1:]):
        if isinstance(w, (Pair, OrderedSet)):
            assert type(g) is type(w)
            g, w = (list(g), list(w)) if isinstance(w, OrderedSet) else (slots_state(g), slots_state(w))
        assert same(g, w)


def test_a_functions_code_is_read_as_a_constant():
    def helper(a, b):
        return a + b

    def fn(x):
        if "b" in helper.__code__.co_varnames:
            return x * helper.__code__.co_argcount
        return x

    cnt = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))
    assert cnt.frame_count == 1


class Registry(dict):
    """A dict subclass with its own `get`, which reads through dict's."""

    def get(self, key):
        return super().get(str(key)) or {}


def test_a_dict_subclass_is_read_as_a_dict():
    registry = Registry({"1": {"scale": 2.0}})

    def fn(x):
        entry = registry.get(1)
        return x * entry["scale"] + len(registry.get(2))

    cnt = CompileCounter()
    f = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(3)
    assert same(f(x), fn(x))
    registry["1"] = {"scale": 4.0}  # a guarded read: the next call recompiles
    assert same(f(x), fn(x))
    assert cnt.frame_count == 2


class Counting:
    """A __getattribute__ with a side effect: it counts the reads of other attributes."""

    def __init__(self):
        object.__setattr__(self, "reads", 0)
        object.__setattr__(self, "scale", 2.0)

    def __getattribute__(self, name):
        if name != "reads":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)


def test_a_getattribute_with_side_effects_behaves_as_in_eager():
    eager_obj, jit_obj = Counting(), Counting()

    def fn(obj, x):
        return x * obj.scale

    f = framejit.optimize(CompileCounter())(fn)
    x = torch.randn(3)
    for _ in range(3):  # guards read past the counting lookup: checking them counts nothing
        assert same(f(jit_obj, x), fn(eager_obj, x))
    assert object.__getattribute__(jit_obj, "reads") == object.__getattribute__(eager_obj, "reads") == 3


class _KeyConfig(dict):
    def __getattr__(self, name):
        return self[name]  # a missing name raises KeyError, not AttributeError


def test_an_argument_whose_getattr_raises_keyerror_is_traced():
    # framejit's own probes of an argument (is it a wrapped function?) must not reach its __getattr__
    def fn(cfg, x):
        return x + cfg.offset

    cnt = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.optimize(cnt)(fn)(_KeyConfig(offset=5), x), x + 5)
    assert cnt.frame_count == 1


class _Base(torch.nn.Module):
    def linear(self, x):
        return x * 3.0


class _Shadowed(_Base):
    """Submodules named like a method of the class, a property or a plain class attribute: Python finds the
    class's attribute (or the property, before the instance dict) and never asks nn.Module.__getattr__."""

    norm = None  # a plain class attribute: `self.norm` is None although a submodule has the name

    def __init__(self):
        super().__init__()
        self.activation = torch.nn.ReLU()
        self.linear = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.__dict__["scale"] = 10.0  # hidden by the property

    def activation(self, x):
        return x * 1.2

    @property
    def scale(self):
        return 0.5

    def forward(self, x):
        out = self.activation(self.linear(x)) * self.scale
        return out if self.norm is None else self.norm(out)


def test_a_class_attribute_wins_over_a_submodule_of_its_name_as_in_eager():
    model, x = _Shadowed(), torch.randn(2, 4)
    counter = CompileCounter()
    assert same(framejit.optimize(counter)(model)(x), model(x))
    assert counter.frame_count == 1


class _StaticForward(torch.nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)


class _CallsStaticForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mod = _StaticForward()

    def forward(self, x):
        return self.mod(x) + 1


def test_a_submodule_whose_forward_is_a_staticmethod_is_called_without_self():
    model, x = _CallsStaticForward(), torch.randn(4)
    counter = CompileCounter()
    assert same(framejit.optimize(counter, nopython=True)(model)(x), model(x))
    assert counter.frame_count == 1
