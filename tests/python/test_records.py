"""Records made inside compiled code: dataclasses, and dataclasses that are also ordered dicts with their own
__setattr__/__setitem__ keeping attributes and items in step (the shape of model-output containers)."""

import collections
import dataclasses

import torch

from framejit.testing import same
from tests.helpers import run_fullgraph


class Record(collections.OrderedDict):
    """Attributes and items kept in step; integer indexing gives the non-None values in field order."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = self.__dict__.get(field.name)
            if value is not None:
                self[field.name] = value

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class Output(Record):
    hidden: torch.Tensor = None
    pooled: torch.Tensor = None
    extra: torch.Tensor = None


def assert_same_record(got, want):
    assert type(got) is type(want)
    assert list(got.keys()) == list(want.keys())
    assert vars(got).keys() == vars(want).keys()
    for k in want.keys():
        assert same(got[k], want[k]) and same(getattr(got, k), getattr(want, k))


def test_a_record_made_in_the_trace_is_returned_with_items_and_attributes():
    def fn(x):
        return Output(hidden=x + 1, pooled=x.sum(0))

    x = torch.randn(2, 3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert_same_record(got, want)
    assert got.extra is None and "extra" not in got


def test_a_record_read_by_attribute_key_and_index_inside_the_trace():
    def fn(x):
        out = Output(hidden=x * 2, pooled=x.mean(0))
        return out.hidden + out["hidden"] + out[0], out.to_tuple()[1], len(out)

    x = torch.randn(2, 3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0]) and same(got[1], want[1]) and got[2] == want[2] == 2


def test_a_record_set_after_it_was_made():
    def fn(x):
        out = Output(hidden=x)
        out.extra = x * 3
        out["pooled"] = x.max()
        return out

    x = torch.randn(4)
    assert_same_record(run_fullgraph(fn, x), fn(x))


@dataclasses.dataclass
class Plain:
    a: torch.Tensor
    scale: float = 2.0


def test_dataclass_fields_of_a_record_are_constants():
    def fn(x):
        p = Plain(x)
        names = [f.name for f in dataclasses.fields(p)]
        return p.a * p.scale, names

    x = torch.randn(3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1] == want[1] == ["a", "scale"]


@dataclasses.dataclass
class Wider(Output):
    note: torch.Tensor = None


class Doubled(dict):
    """A dict subclass that keeps dict's iteration: ** takes its raw items, never calling this __getitem__."""

    def __getitem__(self, key):
        return super().__getitem__(key) * 2


DOUBLED = Doubled(a=3)


def test_double_star_of_a_record_takes_keys_and_items():
    def fn(x):
        out = Output(hidden=x + 1, pooled=x * 2)
        wider = Wider(**out, note=x - 1)
        plain = {**DOUBLED}
        return wider, x * plain["a"] + DOUBLED["a"]

    x = torch.randn(3)
    (got, got_a), (want, want_a) = run_fullgraph(fn, x), fn(x)
    assert_same_record(got, want)
    assert same(got_a, want_a) and same(got_a, x * 3 + 6)
