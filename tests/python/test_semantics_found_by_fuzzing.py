"""Python semantics the trace must keep, found by differential fuzzing: results and the state of arguments
after the call equal eager's."""

import copy
import dataclasses

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import assert_equal


def _run_both(fn, *args):
    eager_args, jit_args = copy.deepcopy(args), copy.deepcopy(args)
    want = fn(*eager_args)
    got = framejit.optimize(CompileCounter())(fn)(*jit_args)
    return got, want, jit_args, eager_args


def iadd_through_alias(x):
    a = [1, 2, 3]
    b = a
    b += [4]
    return x * len(a)


def imul_argument(x, a):
    a *= 2
    return x + 1


def ior_argument(x, d):
    d |= {"z": 1}
    return x + 1


def repeated_inner_list(x):
    a = [[0]] * 3
    a[0].append(1)
    return x + 1, a


def concatenated_inner_list(x):
    inner = [0]
    a = [inner] + [inner]
    a[0].append(1)
    return x + 1, a


def set_inplace_through_alias(x):
    a = {1, 2, 3}
    b = a
    b &= {2, 3, 4}
    b |= {9}
    return x + len(a), sorted(a)


def dict_union_shares_values(x):
    d = {"a": [1]}
    e = d | {"b": 2}
    e["a"].append(3)
    return x + 1, d


@pytest.mark.parametrize(
    "fn, args",
    [
        (iadd_through_alias, ()),
        (imul_argument, ([1],)),
        (ior_argument, ({"a": 1},)),
        (repeated_inner_list, ()),
        (concatenated_inner_list, ()),
        (set_inplace_through_alias, ()),
        (dict_union_shares_values, ()),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_container_operators_mutate_and_share_like_python(fn, args):
    got, want, jit_args, eager_args = _run_both(fn, torch.ones(2), *args)
    assert same(got, want)
    assert jit_args[1:] == eager_args[1:]  # the argument containers were changed alike


def while_true_next_until_stop_iteration(x):
    it = iter(range(3))
    while True:
        try:
            i = next(it)
        except StopIteration:
            break
        x = x + i
    return x


def test_while_true_next_until_stop_iteration_does_not_recurse():
    got, want, _, _ = _run_both(while_true_next_until_stop_iteration, torch.zeros(1))
    assert same(got, want)


def take_one(x, it):
    return x * next(it)


def sum_until_two(x, it):
    for v in it:
        x = x + v
        if v == 2:
            break
    return x, it


def test_an_iterator_argument_is_advanced_as_in_eager():
    f = framejit.optimize(CompileCounter())(take_one)
    it = iter([1, 2, 3])
    assert [f(torch.ones(1), it).item() for _ in range(3)] == [1.0, 2.0, 3.0]
    assert list(it) == []
    it = iter([1, 2, 3, 4])
    out, returned = framejit.optimize(CompileCounter())(sum_until_two)(torch.ones(1), it)
    assert same(out, torch.tensor([4.0])) and returned is it and list(it) == [3, 4]


def append_while_looping(x):
    lst = [1, 2]
    for v in lst:
        if v < 4:
            lst.append(v + 2)
        x = x + v
    return x


def remove_while_looping(x):
    lst = [1, 2, 3, 4]
    for v in lst:
        lst.remove(v)
        x = x + v
    return x, lst


def append_to_argument_while_looping_across_a_break(x, lst):
    for v in lst:
        if len(lst) < 5:
            lst.append(x.sum().item() * 0 + v)  # .item(): a graph break in every iteration
        x = x + v
    return x


def iterator_made_before_an_append(x):
    items = [x]
    it = iter(items)
    items.append(x + 1)
    return list(it)


@pytest.mark.parametrize(
    "fn, args",
    [
        (append_while_looping, ()),
        (remove_while_looping, ()),
        (append_to_argument_while_looping_across_a_break, ([1, 2],)),
        (iterator_made_before_an_append, ()),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_a_list_iterator_sees_the_list_as_it_is_when_advanced(fn, args):
    got, want, jit_args, eager_args = _run_both(fn, torch.zeros(1), *args)
    assert same(got, want)
    assert jit_args[1:] == eager_args[1:]


def map_with_side_effects_taken_once(x, log):
    mapped = map(lambda t: (log.append(1), t)[1], [x, x, x])
    return next(mapped)


def test_map_with_side_effects_runs_lazily_as_in_python():
    got, want, jit_args, eager_args = _run_both(map_with_side_effects_taken_once, torch.ones(1), [])
    assert same(got, want) and jit_args[1] == eager_args[1] == [1]


_NUMBERS = (1, 2, 3)


def map_appending_to_the_newest_list(x):
    out = []
    mapped = map(out.append, _NUMBERS)  # never consumed: Python appends nothing  # noqa: F841
    return x + len(out), out


def test_a_write_into_the_list_made_just_before_a_lazy_map_is_seen():
    """The list was the last container the trace had made when the map was checked for side effects; the check's
    mark counted it as made after, so the map ran at once and the list came back [1, 2, 3] (eager: [])."""
    x = torch.ones(2)
    assert_equal(
        framejit.compile(map_appending_to_the_newest_list, backend="eager")(x), map_appending_to_the_newest_list(x)
    )


def test_map_without_side_effects_is_still_one_graph():
    out = framejit.explain(lambda x: sum(map(lambda t: t * 2, [x, x + 1])))(torch.ones(1))
    assert out.graph_count == 1 and out.graph_break_count == 0


def grow_dict_while_looping(x, d):
    for k in d:
        d[k + "x"] = 1
    return x + 1


def shrink_dict_while_looping_over_items(x, d):
    for k, v in d.items():
        d.pop("a", None)
        x = x * v
    return x


def grow_dict_while_looping_over_values(x, d):
    for v in iter(d.values()):
        d[len(d)] = v
    return x + 1


@pytest.mark.parametrize(
    "fn, after",
    [
        (grow_dict_while_looping, {"a": 0, "ax": 1}),
        (shrink_dict_while_looping_over_items, {}),
        (grow_dict_while_looping_over_values, {"a": 0, 1: 0}),
    ],
    ids=["keys", "items", "iter_of_values"],
)
def test_changing_a_dict_while_iterating_raises_as_in_python(fn, after):
    for f in (fn, framejit.optimize(CompileCounter())(fn)):
        d = {"a": 0}
        with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
            f(torch.ones(1), d)
        assert d == after


def view_read_after_the_dict_grew(x):
    d = {"a": 1}
    keys = d.keys()
    d["b"] = 2
    return x + len(keys), list(keys)


def views_returned_and_consumed(x):
    d = {"a": x, "b": x + 1}
    return sum(d.values()), [k for k, _ in d.items()], "a" in d.keys(), d.keys(), dict(d.items())


@pytest.mark.parametrize("fn", [view_read_after_the_dict_grew, views_returned_and_consumed], ids=lambda f: f.__name__)
def test_dict_views_show_the_dict_as_it_is(fn):
    got, want, _, _ = _run_both(fn, torch.ones(1))
    assert repr(got) == repr(want)  # same values and types (dict_keys, not a tuple)


def int_grown_by_a_tensor(x):
    bucket = 0
    bucket += (x > 0).to(torch.long) * 16
    return bucket


def hidden_states_accumulated_in_a_tuple(x, keep=True):
    all_hidden = () if keep else None
    for _ in range(3):
        x = x + 1
        all_hidden = all_hidden + (x,)
    last = ()
    last += (x,)
    return all_hidden, last


@pytest.mark.parametrize("fn", [int_grown_by_a_tensor, hidden_states_accumulated_in_a_tuple], ids=lambda f: f.__name__)
def test_idioms_of_model_code_are_one_graph(fn):
    x = torch.randn(3)
    out = framejit.explain(fn)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0
    got, want, _, _ = _run_both(fn, x)
    assert same(got, want)


@dataclasses.dataclass
class ModelOut:
    logits: torch.Tensor
    loss: "torch.Tensor | None" = None
    hidden: tuple = ()

    def __post_init__(self):
        self.n_hidden = len(self.hidden)


class Record:
    scale = 3

    def __init__(self, a, b=2):
        self.a = a
        self.b = b

    def total(self):
        return self.a * self.b * self.scale


def builds_objects(x):
    out = ModelOut(logits=x * 2, hidden=(x,))
    out.loss = out.logits.sum()
    rec = Record(x + 1)
    return out, rec.total(), isinstance(out, ModelOut), rec


def test_plain_classes_and_dataclasses_are_made_in_the_graph():
    x = torch.randn(3)
    explained = framejit.explain(builds_objects)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    got, want, _, _ = _run_both(builds_objects, x)
    assert type(got[0]) is ModelOut and same(got[0].logits, want[0].logits) and same(got[0].loss, want[0].loss)
    assert got[0].n_hidden == 1 and same(got[0].hidden[0], want[0].hidden[0])
    assert same(got[1], want[1]) and got[2] is True
    assert type(got[3]) is Record and vars(got[3]).keys() == vars(want[3]).keys() and same(got[3].a, want[3].a)


def object_across_a_break(x):
    rec = Record(x)
    print("a graph break")
    return rec.total() + rec.a


def test_an_object_made_in_the_trace_survives_a_graph_break_and_class_changes():
    f = framejit.optimize(CompileCounter())(object_across_a_break)
    x = torch.randn(3)
    assert same(f(x), object_across_a_break(x))
    Record.scale = 5  # a class attribute the graph read: guarded through the class
    try:
        assert same(f(x), object_across_a_break(x))
    finally:
        Record.scale = 3
