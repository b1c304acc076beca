"""copy.deepcopy and copy.copy inside compiled code: the copy is made by the trace, as Python's copy module makes
it (containers anew, user objects by their class's __new__ plus their __dict__), never touching the original; what
it reads is guarded; a class that copies itself in its own way, or a tensor, breaks the graph with a reason."""

import copy

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


class Settings:
    """A config-like object: aliases resolved by its own __getattribute__ and __setattr__."""

    aliases = {"width": "hidden"}

    def __init__(self, hidden=4, layers=2):
        self.hidden = hidden
        self.layers = layers
        self.names = ["a", "b"]
        self.extra = {"scale": 2.0}

    def __getattribute__(self, name):
        if name != "aliases" and name in super().__getattribute__("aliases"):
            name = super().__getattribute__("aliases")[name]
        return super().__getattribute__(name)

    def __setattr__(self, name, value):
        if name in type(self).aliases:
            name = type(self).aliases[name]
        super().__setattr__(name, value)


def decoder_settings(x, settings):
    """The shape of a model's "give me the decoder's config": copy, then rename and drop fields on the copy."""
    own = copy.deepcopy(settings)
    own.names.append("c")
    own.width = own.layers * 8  # through the alias: sets `hidden`
    del own.layers
    own.depth = 1
    return x * own.hidden + len(own.names) * own.extra["scale"], own


def test_deepcopy_of_an_object_with_its_own_lookup_is_made_in_the_graph_and_leaves_the_original():
    x = torch.randn(3)
    original = Settings()
    got, got_copy = run_fullgraph(decoder_settings, x, original)
    want, want_copy = decoder_settings(x, Settings())
    assert same(got, want)
    assert type(got_copy) is Settings and vars(got_copy) == vars(want_copy)
    assert list(vars(got_copy)) == list(vars(want_copy))  # attribute order too (del, then set again)
    assert vars(original) == vars(Settings())  # nothing written through to the original
    assert got_copy.names is not original.names and got_copy.extra is not original.extra


def test_a_changed_original_recompiles():
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(decoder_settings)
    x, settings = torch.randn(3), Settings()
    compiled(x, settings)
    settings.extra["scale"] = 5.0  # read by the copy: guarded
    got, _ = compiled(x, settings)
    assert cnt.frame_count == 2 and same(got, decoder_settings(x, settings)[0])


def test_deepcopy_keeps_shared_references_shared():
    def fn(x, pair):
        twin = copy.deepcopy(pair)
        twin[0].append(1)  # twin[0] and twin[1] are one list, as in the original
        return x + len(twin[1]), twin

    shared = []
    got, twin = run_fullgraph(fn, torch.zeros(2), [shared, shared])
    assert same(got, torch.ones(2)) and twin[0] is twin[1] and twin == [[1], [1]] and shared == []


def test_copy_copy_is_shallow():
    def fn(x, settings):
        shallow = copy.copy(settings)
        shallow.names.append("c")  # the same list as the original's
        shallow.layers = 7  # but its own attributes
        return x + shallow.layers, shallow

    settings = Settings()
    got, shallow = run_fullgraph(fn, torch.zeros(2), settings)
    assert same(got, torch.full((2,), 7.0))
    assert settings.names == ["a", "b", "c"] and settings.layers == 2 and shallow.layers == 7


class Record(dict):
    """A dict subclass whose __setitem__ mirrors items as attributes (model-output style)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


def test_deepcopy_of_a_dict_subclass_sets_its_items_through_its_class():
    def fn(x, record):
        twin = copy.deepcopy(record)
        return x * twin.scale, twin

    record = Record()
    record["scale"] = 3
    got, twin = run_fullgraph(fn, torch.ones(2), record)
    assert same(got, torch.full((2,), 3.0)) and type(twin) is Record and twin == {"scale": 3} and twin.scale == 3


class OwnCopy:
    def __deepcopy__(self, memo):
        return OwnCopy()


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda x: OwnCopy(), "defines __deepcopy__"),
        (lambda x: [x], "copying"),  # a tensor inside: its copy is an autograd-aware clone
    ],
)
def test_what_copies_itself_or_holds_a_tensor_breaks_the_graph_with_a_reason(make, reason):
    def fn(x, value):
        y = x + 1
        copied = copy.deepcopy(value)
        return y, copied

    x = torch.randn(2)
    value = make(x)
    explained = framejit.explain(fn)(x, value)
    assert explained.graph_break_count == 1 and reason in explained.break_reasons[0].reason
    got, copied = framejit.optimize("eager")(fn)(x, value)
    assert same(got, x + 1) and type(copied) is type(value)


def test_sets_copy_to_new_sets_and_frozensets_to_themselves():
    def fn(x, names):
        deep, shallow = copy.deepcopy(names), copy.copy(names)
        deep.add("c")
        return x + len(deep) + len(shallow), deep, shallow, copy.deepcopy(frozenset(names))

    names = {"a", "b"}
    got, deep, shallow, frozen = run_fullgraph(fn, torch.zeros(1), names)
    assert same(got, torch.full((1,), 5.0)) and deep == {"a", "b", "c"} and shallow == names
    assert names == {"a", "b"} and shallow is not names and frozen == frozenset(names)
