"""collections' mappings (defaultdict, OrderedDict, Counter), dict.setdefault/fromkeys, merging dicts, and
list/dict subclasses with methods of their own, passed in and made in the trace."""

import collections

import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import assert_equal, clone, run_fullgraph

GLOBAL_GROUPS = collections.defaultdict(list)


def test_defaultdict_argument_read_and_written():
    """Missing keys call the factory (list, int, a lambda); the writes show after the call."""

    def fn(x, lists, counts, scaled):
        lists["a"].append(x + 1)
        counts["n"] += 2
        return x * counts["m"] + scaled["k"] + len(lists["b"])

    three = lambda: 3.0  # noqa: E731

    def args():
        return collections.defaultdict(list), collections.defaultdict(int), collections.defaultdict(three)

    x = torch.randn(3)
    want_args, got_args = args(), args()
    want = fn(x, *want_args)
    got = run_fullgraph(fn, x, *got_args)
    assert same(got, want)
    for g, w in zip(got_args, want_args):
        assert type(g) is collections.defaultdict and list(g) == list(w)
        assert_equal(dict(g), dict(w))
        assert g.default_factory is w.default_factory


def test_global_defaultdict_written():
    def fn(x):
        GLOBAL_GROUPS["t"].append(x * 2)
        return x + len(GLOBAL_GROUPS["t"])

    GLOBAL_GROUPS.clear()
    x = torch.randn(2)
    want = fn(x)
    want_state = dict(GLOBAL_GROUPS)
    GLOBAL_GROUPS.clear()
    got = run_fullgraph(fn, x)
    assert same(got, want)
    assert_equal(dict(GLOBAL_GROUPS), want_state)


def test_defaultdict_made_in_the_trace_and_returned():
    def fn(x):
        groups = collections.defaultdict(list)
        for i in range(3):
            groups[i % 2].append(x * i)
        sizes = collections.defaultdict(int)
        sizes["a"] += 1
        return groups, sizes, sum(groups[0]) + sizes["a"]

    x = torch.randn(2)
    got, want = run_fullgraph(fn, x), fn(x)
    assert type(got[0]) is collections.defaultdict and got[0].default_factory is list
    assert got[1].default_factory is int
    assert_equal(dict(got[0]), dict(want[0]))
    assert_equal(dict(got[1]), dict(want[1]))
    assert same(got[2], want[2])


def test_setdefault_and_fromkeys():
    def fn(x, d):
        d.setdefault("a", x)
        v = d.setdefault("b", x * 2)
        keys = dict.fromkeys(["p", "q"], 1)
        zeros = dict.fromkeys("rs")
        return v + d["a"] + keys["q"], keys, zeros

    x = torch.randn(3)
    d1, d2 = {"b": torch.ones(3)}, {"b": torch.ones(3)}
    assert_equal(run_fullgraph(fn, x, d1), fn(x, d2))
    assert_equal(d1, d2)


def test_ordered_dict_and_counter_made_in_the_trace():
    def fn(x):
        od = collections.OrderedDict()
        od["z"] = x
        od["a"] = x + 1
        od.move_to_end("z")
        c = collections.Counter(["a", "b", "a"])
        return od, list(od.keys()), c["a"] * x + c["missing"]

    x = torch.randn(2)
    got, want = run_fullgraph(fn, x), fn(x)
    assert type(got[0]) is collections.OrderedDict
    assert_equal(got[0], want[0])
    assert got[1] == want[1] and same(got[2], want[2])


def test_dict_merge_operators():
    def fn(x, a, b):
        c = a | b
        d = {**a, **b, "extra": x}
        a |= {"late": 1}
        return c["k"] + d["extra"] + d["k"], sorted(c), list(d)

    a = {"k": torch.ones(2), "j": 2}
    b = {"k": torch.zeros(2)}
    x = torch.randn(2)
    a2, b2 = clone(a), clone(b)
    assert_equal(run_fullgraph(fn, x, a, b), fn(x, a2, b2))
    assert_equal(a, a2)


class Stack(list):
    """A list subclass with methods of its own."""

    def total(self):
        return sum(self)

    def top(self):
        return self[-1]


class Registry(dict):
    """A dict subclass with methods of its own."""

    def get_scaled(self, key, k):
        return self[key] * k

    def names(self):
        return sorted(self.keys())


_A_PARAM = torch.nn.Parameter(torch.ones(4, 4))


class _Plain:
    pass


def test_tensors_modules_and_plain_objects_from_outside_are_dict_keys_by_identity():
    def fn(x, p, q, m, objs):
        d = {"x": x, _A_PARAM: 3, p: x + 1, q: x * 2, m: 5}
        ranks = {ob: i for i, ob in enumerate(objs)}
        d[p] = d[p] + d.get(q, 0) * d[m]
        return d, p in d, ranks[objs[1]], d.pop(q), d["x"] + d[_A_PARAM]

    m = torch.nn.Linear(4, 4)
    objs = [_Plain(), _Plain()]
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(4, 4)
    for p, q in ((m.weight, m.bias), (m.bias, m.weight), (m.weight, m.weight)):  # the same key twice: one entry
        got, want = compiled(x, p, q, m, objs), fn(x, p, q, m, objs)
        assert same(got, want)
        assert all(a is b for a, b in zip(got[0], want[0]))  # the very objects are the keys
    assert cnt.frame_count == 3  # which keys are one and the same is guarded


def test_a_tensor_made_in_the_trace_is_a_dict_key_by_identity_in_one_graph():
    def fn(x):
        y = x * 2
        d = {y: 1, x: 2}
        d[y.add_(1)] = 3  # the same tensor: the same key
        return d, y, y in d, x * 2 in d

    got = run_fullgraph(fn, torch.ones(2))
    d, y = got[0], got[1]
    assert list(d.values()) == [3, 2] and next(iter(d)) is y and got[2:] == (True, False)


def test_list_subclass_argument():
    def fn(s):
        out = s.total() + s.top() + s[0]
        for t in s:
            out = out + t
        return out * len(s)

    s = Stack([torch.randn(2), torch.randn(2)])
    assert same(run_fullgraph(fn, s), fn(s))


def test_dict_subclass_argument():
    def fn(r, x):
        out = x + r.get_scaled("a", 2)
        for k in r:
            out = out + r[k]
        return out, r.names(), len(r)

    r = Registry(a=torch.randn(2), b=torch.randn(2))
    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, r, x), fn(r, x))


def test_list_and_dict_subclasses_made_in_the_trace():
    def fn(x):
        s = Stack([x, x + 1])
        s.append(x * 2)
        r = Registry()
        r["w"] = x
        return s.total() + r.get_scaled("w", 3), len(s), r.names()

    x = torch.randn(2)
    got, want = run_fullgraph(fn, x), fn(x)
    assert_equal(got, want)


def test_list_subclass_made_in_the_trace_and_returned():
    def fn(x):
        s = Stack([x])
        s.append(x + 1)
        return s

    x = torch.randn(2)
    got, want = framejit.optimize(CompileCounter())(fn)(x), fn(x)
    assert type(got) is Stack
    assert_equal(list(got), list(want))


def test_writes_to_list_and_dict_subclasses_from_outside_match_eager():
    """Writes through list's or dict's own methods on a subclass passed in are replayed by the base type's own
    methods, in one graph; the objects end as in eager on every call."""

    def fn(s, r, x):
        s.append(x)
        r["n" + str(len(s))] = x
        return x + len(s) + len(r)

    eager = (Stack([torch.ones(2)]), Registry(a=1))
    comp = (Stack([torch.ones(2)]), Registry(a=1))
    compiled = framejit.optimize(CompileCounter())(fn)
    for _ in range(3):
        x = torch.randn(2)
        assert same(compiled(*comp, x), fn(*eager, x))
        assert type(comp[0]) is Stack and type(comp[1]) is Registry
        assert_equal(list(comp[0]), list(eager[0]))
        assert_equal(dict(comp[1]), dict(eager[1]))
    framejit.reset()
    assert framejit.explain(fn)(Stack([torch.ones(2)]), Registry(a=1), torch.ones(2)).break_reasons == []


class Doubling(list):
    """A list subclass whose __setitem__ doubles: the replay of a write must not run it again."""

    def __setitem__(self, i, v):
        super().__setitem__(i, v * 2)


def test_a_list_subclass_passed_in_is_written_by_lists_own_methods_after_the_graph():
    def fn(lst, x):
        lst[0] = 5
        lst.append(1)
        lst += [2]
        return x + len(lst)

    got, want = Doubling([0, 0]), Doubling([0, 0])
    assert same(run_fullgraph(fn, got, torch.ones(1)), fn(want, torch.ones(1)))
    assert list(got) == list(want) == [10, 0, 1, 2] and type(got) is Doubling


def test_copies_keep_the_type_python_gives():
    def fn(x, groups, reg):
        od = collections.OrderedDict(a=x)
        return od.copy(), groups.copy(), reg.copy(), x + 1

    groups, reg, x = collections.defaultdict(list, a=[1]), Registry(w=1), torch.randn(2)
    got, want = run_fullgraph(fn, x, groups, reg), fn(x, groups, reg)
    assert [type(v) for v in got] == [type(v) for v in want]
    assert got[1].default_factory is list


def test_merging_keeps_the_left_type():
    def fn(x, groups, od):
        return groups | {"b": [2]}, od | {"z": 1}, {"q": 0} | od, x + 1

    args = (collections.defaultdict(list, a=[1]), collections.OrderedDict(y=0))
    got, want = run_fullgraph(fn, torch.ones(1), *args), fn(torch.ones(1), *args)
    assert [type(v) for v in got] == [type(v) for v in want]
    assert got[0].default_factory is list
    assert_equal([dict(v) for v in got[:3]], [dict(v) for v in want[:3]])


class _KeysAndItems:
    """A mapping by protocol only: dict(m) and d.update(m) read m.keys() and m[key], as CPython does."""

    def __init__(self):
        self.values = {"a": torch.ones(2), "b": torch.zeros(2)}

    def keys(self):
        return ["b", "a"]

    def __getitem__(self, key):
        return self.values[key] * 2


def test_a_mapping_with_keys_is_read_by_its_keys_and_getitem():
    mapping = _KeysAndItems()

    def fn(x):
        made = dict(mapping)
        updated = {"c": x}
        updated.update(mapping)
        return x + made["a"], list(made), list(updated)

    counter = CompileCounter()
    assert same(framejit.optimize(counter, nopython=True)(fn)(torch.ones(2)), fn(torch.ones(2)))
    assert counter.frame_count == 1
