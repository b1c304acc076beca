"""Operators on user objects call their Python dunders (reflected ones too); Mapping's mixin methods from
collections.abc are traced; inspect.signature of a known function is a constant."""

import collections.abc
import inspect

import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.t + other.t)
        return NotImplemented

    def __radd__(self, other):
        return Vec(self.t + other)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __neg__(self):
        return Vec(-self.t)

    def __eq__(self, other):
        return isinstance(other, Vec) and self.t is other.t

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]

    def __contains__(self, value):
        return value == "t"


def test_binary_unary_and_reflected_operators_of_a_user_class():
    def fn(x):
        a, b = Vec(x), Vec(x * 2)
        c = -(a + b) * 3
        d = 1.5 + a
        return c.t, d.t

    x = torch.randn(3)
    for got, want in zip(run_fullgraph(fn, x), fn(x)):
        assert same(got, want)


def test_len_getitem_and_contains_of_a_user_class():
    v = Vec(torch.arange(4.0))

    def fn(x):
        return x * len(v) + v[1] + int("t" in v) - int("u" in v)

    x = torch.randn(4)
    assert same(run_fullgraph(fn, x), fn(x))


class Table(collections.abc.Mapping):
    """A read-only mapping: get, __contains__, keys... come from collections.abc.Mapping."""

    _shared = {"relu": torch.relu, "tanh": torch.tanh}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._shared[key]

    def __iter__(self):
        return iter(self._shared)

    def __len__(self):
        return len(self._shared)


def test_mapping_mixin_methods_are_traced():
    table = Table()

    def fn(x):
        act = table.get("tanh", torch.sigmoid)
        if "relu" in table:
            x = table["relu"](x)
        return act(x)

    x = torch.randn(5)
    assert same(run_fullgraph(fn, x), fn(x))


def test_a_missing_mapping_key_behaves_as_in_eager():
    table = Table()

    def fn(x):
        return table.get("gelu", torch.sigmoid)(x)  # Mapping.get catches the KeyError

    x = torch.randn(5)
    assert same(framejit.optimize(CompileCounter())(fn)(x), fn(x))


def test_inspect_signature_of_a_known_function_is_a_constant():
    class Block(torch.nn.Module):
        def chunk(self, hidden, extra=None):
            return hidden * 2

        def forward(self, x):
            n = len(inspect.signature(self.chunk).parameters)
            names = list(inspect.signature(self.chunk).parameters)
            return x * n, names

    block = Block()
    x = torch.randn(3)
    got, names = run_fullgraph(block, x)
    want, want_names = block(x)
    assert same(got, want) and names == want_names == ["hidden", "extra"]


class Pairs(dict):
    """A dict subclass whose records are read back as a tuple by a generator expression."""

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())

    def __getitem__(self, k):
        inner = dict(self.items())  # a dict made and filled inside the generator: no side effect outside it
        return inner[k]


def test_a_generator_expression_may_fill_containers_it_makes():
    def fn(x):
        p = Pairs()
        p["a"] = x + 1
        p["b"] = x * 2
        first, second = p.to_tuple()
        return first - second

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


def test_a_generator_expression_that_writes_outside_state_runs_lazily():
    log = []

    def fn(x):
        return next(log.append(i) or x * i for i in range(3))

    cnt = CompileCounter()
    x = torch.randn(3)
    got = framejit.optimize(cnt)(fn)(x)
    assert same(got, x * 0) and log == [0]


class Layers(collections.abc.Sequence):
    """A read-only sequence: iteration comes from collections.abc.Sequence (obj[0], obj[1]... until IndexError)."""

    def __init__(self, scales):
        self._scales = scales

    def __len__(self):
        return len(self._scales)

    def __getitem__(self, i):
        if i >= len(self._scales):
            raise IndexError(i)
        return self._scales[i]


def test_a_sequence_is_iterated_by_its_length_and_items():
    def fn(x):
        layers = Layers([1.0, 2.0, 3.0])
        for scale in layers:
            x = x * scale
        return x + sum(s for s in layers) + len(list(zip(layers, "ab")))

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


def test_environment_reads_are_guarded(monkeypatch):
    import os

    def fn(x):
        if os.environ.get("FRAMEJIT_TEST_FLAG", "0") == "1":
            return x + 1
        return x - 1 if "FRAMEJIT_TEST_OTHER" in os.environ else x * 2

    cnt = CompileCounter()
    f = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(3)
    monkeypatch.delenv("FRAMEJIT_TEST_FLAG", raising=False)
    monkeypatch.delenv("FRAMEJIT_TEST_OTHER", raising=False)
    assert same(f(x), x * 2)
    monkeypatch.setenv("FRAMEJIT_TEST_FLAG", "1")
    assert same(f(x), x + 1)  # the changed variable fails the guard: compiled again
    assert cnt.frame_count == 2


def test_a_tuple_plus_a_size_and_a_size_plus_a_tuple():
    def fn(x):
        shape = (1,) + x.shape
        grown = x.shape + (1,)
        return x.reshape(shape), x.reshape(grown), type(grown) is torch.Size

    x = torch.randn(2, 3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0]) and same(got[1], want[1]) and got[2] is want[2] is True


class Wrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(3, 3)
        self.same = self.inner  # one module under two names

    def forward(self, x):
        inner = getattr(self, "inner", None)
        if inner is not None and inner is not self and self.same is inner:
            return inner(x)
        return x


def test_identity_of_modules_guarded_by_identity():
    model = Wrapper()
    x = torch.randn(2, 3)
    torch.testing.assert_close(run_fullgraph(model, x), model(x))


class Optional(torch.nn.Module):
    def __init__(self, with_norm):
        super().__init__()
        self.norm = torch.nn.LayerNorm(3) if with_norm else None
        self.empty = torch.nn.ModuleList()

    def forward(self, x):
        if self.norm:  # a module is true; an empty ModuleList is false
            x = self.norm(x)
        if self.empty or not torch.is_tensor(3.0):
            x = x + 1
        return x


def test_truth_of_modules_and_pure_queries_of_non_tensors():
    for with_norm in (True, False):
        model, x = Optional(with_norm), torch.randn(2, 3)
        torch.testing.assert_close(run_fullgraph(model, x), model(x))
