"""Sets as CPython means them in traced code: set and frozenset subclasses made in the trace and passed in (their
own Python methods run, their type is kept, a passed-in one mutated holds eager's contents after the call), sets
of tensors and objects hashed by identity, set and dict operator methods called by name, set operators and
comparisons against dict views, and set iteration order. Each case is compared with eager and must be one graph
with no break, except the cases that check a break's reason."""

from __future__ import annotations

import copy

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


def one_graph(fn, *args):
    """fn(*args) compiled: one graph, no break (explained on copies of the arguments); returns the compiled
    result."""
    framejit.reset()
    report = framejit.explain(fn)(*copy.deepcopy(args))
    assert report.graph_count == 1 and report.graph_break_count == 0, [b.reason for b in report.break_reasons]
    framejit.reset()
    cnt = CompileCounter()
    out = framejit.optimize(cnt, nopython=True)(fn)(*args)
    assert cnt.frame_count == 1
    return out


class Tags(set):
    """A set subclass with a method and an attribute of its own."""

    def __init__(self, items=(), label="tags"):
        super().__init__(items)
        self.label = label

    def total(self):
        return sum(self)


class Counting(set):
    """A set subclass overriding add and __contains__: the trace must run the overrides."""

    def add(self, item):
        self.added = getattr(self, "added", 0) + 1
        super().add(item * 10)

    def __contains__(self, item):
        return super().__contains__(item * 10)


class Frozen(frozenset):
    def doubled(self):
        return frozenset(v * 2 for v in self)


class Plain:
    pass


def test_a_set_subclass_made_in_the_trace_keeps_its_type_methods_and_attributes():
    def fn(x):
        s = Tags([1, 2], label="ab")
        s.add(3)
        set.add(s, 4)
        s.discard(1)
        s |= {9}
        t = s | {10}  # the base type's operator: a plain set
        return x * s.total(), s, t, type(s) is Tags, type(t) is set, isinstance(s, set), s.label, 4 in s, len(s)

    x = torch.randn(3)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]
    assert type(got[1]) is Tags and got[1].label == "ab"


def test_a_set_subclass_overriding_add_and_contains_runs_its_overrides():
    def fn(x):
        s = Counting()
        s.add(1)
        s.add(2)
        return x + len(s), 1 in s, 10 in s, s.__contains__(2), s.added, sorted(s)

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_a_frozenset_subclass_made_in_the_trace():
    def fn(x):
        f = Frozen([1, 2])
        u = f | {5}
        return x * len(u), f, type(f) is Frozen, type(u) is frozenset, f.doubled(), 2 in f

    x = torch.randn(3)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:] and type(got[1]) is Frozen


def test_a_set_subclass_passed_in_is_mutated_as_in_eager():
    def fn(x, s):
        s.add(7)
        s.discard(1)
        s -= {2}
        set.update(s, [8])
        return x * s.total() + len(s)

    x = torch.randn(3)
    got_s, want_s = Tags([1, 2, 3]), Tags([1, 2, 3])
    got, want = one_graph(fn, x, got_s), fn(x, want_s)
    assert same(got, want) and got_s == want_s and type(got_s) is Tags and got_s.label == "tags"


def test_an_overriding_subclass_passed_in_runs_its_add_once():
    def fn(x, s):
        s.add(3)
        return x + (3 in s)

    got_s, want_s = Counting({10}), Counting({10})
    assert same(one_graph(fn, torch.ones(1), got_s), fn(torch.ones(1), want_s))
    assert got_s == want_s == {10, 30} and got_s.added == want_s.added == 1


def test_sets_and_frozensets_of_tensors_hash_by_identity():
    def fn(x):
        a, b = x.sin(), x.cos()
        s = {a, b, a}
        f = frozenset([a, b])
        s.add(b)
        s.discard(x)
        in_before = b in s
        s.remove(b)
        return sum(t for t in f) + len(s), in_before, b in s, a in f, x in f, len(s | f), len(f - s)

    x = torch.randn(4)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_a_set_of_tensors_returned_holds_the_very_tensors():
    def fn(x, y):
        z = x + 1
        return {x, y, z, x}, z

    x, y = torch.randn(2), torch.randn(2)
    got, z = one_graph(fn, x, y)
    assert len(got) == 3 and x in got and y in got and z in got
    assert sum(t.sum() for t in got).item() == (x.sum() + y.sum() + z.sum()).item()


def test_an_in_place_result_is_the_same_tensor_in_a_set():
    def fn(x):
        y = x * 2
        s = {y}
        return len(s), y.add_(1) in s, x in s

    assert one_graph(fn, torch.ones(2)) == fn(torch.ones(2))


def test_sets_of_objects_and_functions_hash_by_identity():
    def fn(x, p, q):
        made = Plain()
        s = {p, q, made, fn, torch.sin}
        s.add(p)
        return x + len(s), p in s, made in s, Plain() in s, fn in s, torch.cos in s

    x, p, q = torch.randn(2), Plain(), Plain()
    got, want = one_graph(fn, x, p, q), fn(x, p, q)
    assert same(got[0], want[0]) and got[1:] == want[1:]
    got, want = one_graph(fn, x, p, p), fn(x, p, p)  # the same object twice: one item
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_dict_and_set_dunders_called_by_name():
    def fn(x):
        d = {"a": 1}
        d.__ior__({"b": 2})
        e = d.__or__({"c": 3})
        d.__setitem__("z", 4)
        s = {1, 2}
        s.__ior__({3})
        r = s.__sub__({1})
        t = s.__rsub__({1, 9})
        return (
            x * d.__getitem__("b"),
            d,
            e,
            d.__contains__("z"),
            s,
            r,
            t,
            s.__contains__(3),
            s.__eq__({1, 2, 3}),
            s.__le__({1, 2, 3, 4}),
            dict.__ior__(d, {"q": 0}) is d,
        )

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


class Defaulting(dict):
    """A dict subclass with __missing__ and an overriding __setitem__."""

    def __missing__(self, key):
        return len(key)

    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


class Upper(dict):
    def __getitem__(self, key):
        return super().__getitem__(key.upper())


def test_dict_subclasses_with_missing_and_overrides():
    def fn(x, outside):
        d = Defaulting(a=1)
        d["b"] = 5
        u = Upper(A=3)
        outside["k"] = 4
        outside.update(z=1)
        return x * d["b"] + d["abcd"] + u["a"] + outside["zzz"], d, u, "abcd" in d, outside

    x = torch.randn(2)
    got_out, want_out = Defaulting(q=1), Defaulting(q=1)
    got, want = one_graph(fn, x, got_out), fn(x, want_out)
    assert same(got[0], want[0]) and got[1:] == want[1:]
    assert got_out == want_out and type(got_out) is Defaulting and type(got[1]) is Defaulting


def test_dict_views_compare_and_combine_with_sets():
    def fn(x, p):
        d = {"a": 1, "b": 2}
        e = {"b": 5, "a": 0}
        o = {p: 1, x: 2}
        return (
            x + 1,
            d.keys() == e.keys(),
            d.keys() != {"a"},
            d.items() <= {("a", 1), ("b", 2), ("c", 3)},
            d.keys() & {"a", "z"},
            {"a", "z"} - d.keys(),
            frozenset({"b"}) | d.keys(),
            d.keys() ^ e.keys(),
            d.keys() < {"a", "b", "c"},
            p in o.keys(),
            len(o.keys() | {p}),
            o.keys() == {x, p},
        )

    x, p = torch.randn(2), Plain()
    got, want = one_graph(fn, x, p), fn(x, p)
    assert same(got[0], want[0]) and got[1:] == want[1:]
    assert type(got[6]) is set


def test_a_set_made_from_a_dict_view_with_in_place_or_gives_a_new_set():
    def fn(x):
        d = {"a": 1}
        s = {"z"}
        alias = s
        s |= d.keys()  # set.__ior__ refuses a view: `s = s | d.keys()`, alias unchanged
        return x + len(s), s, alias

    assert one_graph(fn, torch.ones(1))[1:] == fn(torch.ones(1))[1:]


def test_what_cannot_be_a_set_item_breaks_with_a_reason():
    class ByValue:
        def __eq__(self, other):
            return True

        def __hash__(self):
            return 0

    def fn(x, v):
        s = {v}
        return x + len(s)

    framejit.reset()
    report = framejit.explain(fn)(torch.ones(1), ByValue())
    assert any("hashes or compares in Python code" in str(b.reason) for b in report.break_reasons)
    assert same(framejit.compile(fn, backend="eager")(torch.ones(1), ByValue()), fn(torch.ones(1), ByValue()))


def test_a_set_of_tensors_passed_in_is_read_and_mutated_as_in_eager():
    def fn(x, s):
        y = x * 2
        s.add(y)
        s.discard(x)
        return sum(t.sum() for t in s) + len(s), y

    x, w = torch.randn(3), torch.randn(3)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    s = {x, w}
    out, y = compiled(x, s)
    assert s == {w, y} and same(out, w.sum() + y.sum() + 2)
    s2 = {w}  # another set: its own length and members are guarded
    out2, y2 = compiled(x, s2)
    assert s2 == {w, y2} and same(out2, w.sum() + y2.sum() + 2)
    assert cnt.frame_count == 2


def test_a_frozenset_of_tensors_is_a_dict_key_by_its_items():
    def fn(x):
        a, b = x.sin(), x.cos()
        d = {frozenset([a, b]): 1, frozenset([a]): 2}
        return x * d[frozenset([b, a])] + d[frozenset({a})]

    x = torch.randn(3)
    assert same(one_graph(fn, x), fn(x))


class Sorted(set):
    """A set subclass iterating in sorted order and reporting a length of its own."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self)))

    def __len__(self):
        return 100 + set.__len__(self)


def test_a_subclass_with_its_own_iteration_is_read_through_the_base_type():
    def fn(x, s):
        made = Sorted({5, 4})
        made.add(0)
        return x + len(s), list(s), list(made), len(made), [v for v in s]

    x = torch.randn(2)
    got, want = one_graph(fn, x, Sorted({3, 1, 2})), fn(x, Sorted({3, 1, 2}))
    assert same(got[0], want[0]) and got[1:] == want[1:]


class Tenfold(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 10)


class Ordered(__import__("collections").OrderedDict):
    pass


def test_dict_subclasses_passed_in_are_written_as_in_eager():
    def fn(x, d, od):
        d |= {"k": 2}
        d.__ior__({"j": 3})
        dict.__setitem__(d, "z", 0)
        d["t"] = 1  # its own __setitem__
        del d["a"]
        od["z"] = 1
        od.move_to_end("a")
        return x + len(d) + len(od)

    x = torch.randn(2)
    got_args, want_args = (Tenfold(a=1), Ordered(a=1, b=2)), (Tenfold(a=1), Ordered(a=1, b=2))
    assert same(one_graph(fn, x, *got_args), fn(x, *want_args))
    assert got_args[0] == want_args[0] and type(got_args[0]) is Tenfold
    assert list(got_args[1].items()) == list(want_args[1].items()) and type(got_args[1]) is Ordered


def test_pop_and_explicit_iteration_of_sets():
    def fn(x):
        one = {7}
        popped = one.pop()
        s = {4, 2, 9}
        return x + popped, one, sorted(s), list(set.__iter__(s)) == list(s), set.__len__(s)

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


class WithSlots(set):
    __slots__ = ("extra",)


class OwnNew(set):
    def __new__(cls, *args):
        return super().__new__(cls, *args)


def test_a_set_subclass_with_slots_is_made_in_the_trace_and_after_it():
    def fn(x):
        s = WithSlots([1, 2])
        s.extra = 3
        s.add(4)
        return x + len(s) + s.extra, s

    got, want = one_graph(fn, torch.ones(1)), fn(torch.ones(1))
    assert same(got[0], want[0])
    assert type(got[1]) is WithSlots and got[1] == want[1] and got[1].extra == want[1].extra == 3


def test_a_class_the_trace_cannot_make_says_why():
    def fn(x):
        s = OwnNew([1])
        return x + len(s)

    framejit.reset()
    report = framejit.explain(fn)(torch.ones(1))
    assert any("making a" in str(b.reason) and "__new__" in str(b.reason) for b in report.break_reasons)
    assert same(framejit.compile(fn, backend="eager")(torch.ones(1)), fn(torch.ones(1)))


def test_more_dunders_by_name_and_what_they_refuse():
    def fn(x):
        s, f = {1, 2, 3}, frozenset({2, 5})
        s.__iand__({1, 2})
        lst, d = [1], {"a": 1, "b": 2}
        lst.__iadd__([3])
        d.__delitem__("b")
        return (
            x + 1,
            s.__xor__({2, 7}),
            frozenset.__or__(f, s),
            f.__rand__({5}),
            sorted(s.__iter__()),
            s.__isub__({9}) is s,
            lst.__add__([4]),
            (2,).__add__((5,)),
            list(d.__iter__()),
            d.__ror__({"q": 1}),
            d.keys().__and__({"a"}),
            d.items().__or__({("z", 0)}),
            s.__or__([2]),  # NotImplemented: a set's operators take sets only
            d.__eq__([("a", 1)]),
            d.__ior__([("p", 0)]),  # but a dict's |= takes pairs, as update does
        )

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_views_combine_with_any_iterable_as_sets_do():
    def fn(x):
        d = {"a": 1, "b": 2}
        return x + 1, d.keys() & ["a", "z"], ["b"] | d.keys(), d.keys() - "a", d.keys().isdisjoint(["q"])

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_subclass_instances_are_items_as_themselves():
    class D(dict):
        pass

    def fn(x):
        d, s = D(a=1), Tags([1])
        return x + 1, d in [d], s in [s], d == {"a": 1}, s == {1}, frozenset([1]) in {frozenset([1])}

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_a_set_changed_while_iterated_is_pythons_error():
    def grows(x):
        s = {1, 2}
        for v in s:
            s.add(v + 10)
        return x + len(s)

    def swaps(x):
        s = {1, 2}
        for v in s:
            s.discard(v)
            s.add(v + 10)
        return x + len(s)

    framejit.reset()
    with pytest.raises(RuntimeError, match="Set changed size during iteration"):
        framejit.compile(grows, backend="eager")(torch.ones(1))
    report = framejit.explain(swaps)(torch.ones(1))
    assert any("set keys changed during iteration" in str(b.reason) for b in report.break_reasons)
    assert same(framejit.compile(swaps, backend="eager")(torch.ones(1)), swaps(torch.ones(1)))


def test_a_set_of_constants_iterates_in_cpythons_order_after_its_writes():
    def fn(x):
        s = {8, 16, 24, 1}  # colliding hashes: where each lands depends on the order of the writes
        s.discard(1)
        s.update([32, 40], (0,))
        s.intersection_update(range(0, 50, 8))
        t = Tags([40, 8, 16])
        t.add(48)
        return x + 1, list(s), [v for v in t]

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def _set_with_a_history():
    """{0, 1, 2} whose table still has the size of the hundred items it once held: it iterates as [1, 0, 2]
    here, where a set made anew from its items would iterate as [0, 1, 2]."""
    s = set(range(100))
    for i in range(100):
        s.discard(i)
    s.update([0, 1, 2])
    return s


def test_a_set_from_outside_iterates_in_its_own_order_and_keeps_it_when_written():
    def reads(x, s):
        return x + 1, list(s), [v for v in s]

    def writes(x, s):
        s.add(3)
        s.discard(0)
        return x + len(s)

    x = torch.ones(1)
    assert list(_set_with_a_history()) != sorted(_set_with_a_history())  # (what the test stands on)
    got, want = one_graph(reads, x, _set_with_a_history()), reads(x, _set_with_a_history())
    assert got[1:] == want[1:]
    got_s, want_s = _set_with_a_history(), _set_with_a_history()
    assert same(one_graph(writes, x, got_s), writes(x, want_s))
    assert list(got_s) == list(want_s)  # changed in place, item by item, as eager changed it


class PlainSet(set):
    pass


class PlainFrozen(frozenset):
    pass


class PlainDict(dict):
    pass


class PlainList(list):
    pass


def test_a_container_subclass_made_in_the_trace_formats_as_in_eager():
    def fn(x):
        s = PlainSet("abc")
        s.add("d")
        d = PlainDict(a=1)
        return x + 1, str(s), f"{s!r:>40}", repr(PlainFrozen([2, 1])), f"{d}", str(PlainList([1]))

    x = torch.randn(2)
    got, want = one_graph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_a_frozenset_subclass_copy_is_a_new_plain_frozenset():
    """frozenset.copy() answers the set itself only for a plain frozenset; a subclass's copy is a new frozenset."""

    def fn(x):
        p = Frozen("abc")
        r = p.copy()
        q = frozenset("ab")
        return x + 1, type(r) is frozenset, r is p, r == p, q.copy() is q

    x = torch.randn(3)
    got, want = one_graph(fn, x), fn(x)
    assert same(got, want), (got, want)
