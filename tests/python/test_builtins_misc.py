"""Builtins model code leans on: sets and frozensets, sorted/reversed/enumerate(start=)/zip(strict=), dict
merging, min/max (with key=), any/all over generators, str.format and f-strings of ints, getattr with a default
on modules; print breaks the graph with a recorded reason."""

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import assert_equal, run_fullgraph


def test_set_and_frozenset_iteration_and_membership():
    allowed = frozenset({"relu", "gelu"})

    def fn(x, names):
        s = {1, 2, 3}
        s.add(4)
        total = sum(v for v in s) + sum(1 for n in allowed if n in names)
        return x * total + int("relu" in allowed) + int(5 in s) + len(frozenset([1, 1, 2]))

    x = torch.randn(2)
    assert same(run_fullgraph(fn, x, ["relu", "tanh"]), fn(x, ["relu", "tanh"]))


def test_sorted_reversed_enumerate_zip():
    def fn(x, sizes):
        order = sorted(sizes, reverse=True)
        by_key = sorted(["bb", "a", "ccc"], key=len)
        acc = x
        for i, s in enumerate(reversed(order), start=1):
            acc = acc + i * s
        for a, b in zip(order, by_key, strict=True):
            acc = acc + a * len(b)
        return acc, order, by_key

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x, [3, 1, 2]), fn(x, [3, 1, 2]))


def test_zip_strict_with_unequal_lengths_raises_as_in_eager():
    def fn(x, a, b):
        return x + sum(p * q for p, q in zip(a, b, strict=True))

    x = torch.randn(2)
    with pytest.raises(ValueError, match="zip"):
        framejit.optimize(CompileCounter())(fn)(x, [1, 2], [3])


def test_dict_merge_and_unpacking():
    def fn(x, a, b):
        merged = a | b
        spread = {**a, **b, "z": 1}
        return x * merged["k"] + spread["z"], list(spread)

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x, {"k": 1, "j": 2}, {"k": 3}), fn(x, {"k": 1, "j": 2}, {"k": 3}))


def test_min_max_any_all():
    def fn(x, ints, words):
        longest = max(words, key=len)
        return (
            x * min(ints) + max(ints) + min(3, 1, 2),
            longest,
            any(i > 2 for i in ints),
            all(i > 0 for i in ints),
            any(w == "q" for w in words),
        )

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x, [4, 1, 3], ["a", "bcd", "ef"]), fn(x, [4, 1, 3], ["a", "bcd", "ef"]))


def _clipped_spread(a, b):
    c = a + b
    a, b = a.sum(), b.sum()
    a = min(max(a, 0), 1)
    b = max(0.0, min(1, b))
    return max(a, b) - min(a, b) + c


def test_min_max_of_one_element_tensors_and_numbers_stay_in_the_graph():
    a, b = torch.randn(5), torch.randn(5)
    assert same(run_fullgraph(_clipped_spread, a, b), _clipped_spread(a, b))


@pytest.mark.parametrize("pick", [max, min])
def test_min_max_of_equal_tensors_gives_the_first_its_gradient_as_eager(pick):
    def fn(x, y):
        return pick(x, y) * 3

    def grads(f):
        x, y = torch.tensor(2.0, requires_grad=True), torch.tensor(2.0, requires_grad=True)
        f(x, y).backward()
        return x.grad, y.grad

    # (the graph's `where` gives the other a zero gradient, where eager gives None)
    (x_grad, y_grad), (want_x, want_y) = grads(framejit.optimize(CompileCounter(), nopython=True)(fn)), grads(fn)
    assert x_grad == want_x == 3.0 and want_y is None and y_grad == 0.0


def test_min_max_of_tensors_of_several_elements_or_mixed_dtypes_breaks_as_data_dependent():
    def fn(x, y):
        return max(x, y) + 1

    for x, y in ((torch.ones(1), torch.ones(1, dtype=torch.int64)), (torch.ones(1, dtype=torch.int64), 0.5)):
        out = framejit.explain(fn)(x, y)
        assert out.graph_break_count == 1 and "data-dependent" in out.break_reasons[0].reason
    with pytest.raises(RuntimeError, match="ambiguous"):
        framejit.compile(fn, backend="eager")(torch.ones(2), torch.zeros(2))


def test_format_and_f_strings_of_ints():
    def fn(x, n):
        key = f"layer_{n}"
        other = "block{}.{:02d}".format(n, n + 1)
        padded = f"{n:>4}|{n!r}"
        return x + len(key), key, other, padded

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x, 7), fn(x, 7))


def test_getattr_with_defaults_on_modules():
    lin = nn.Linear(2, 2)

    def fn(x):
        act = getattr(torch, "no_such_function", None)
        scale = getattr(lin, "scale", 2.0)
        bias = getattr(lin, "bias", None)
        return (lin(x) * scale + (bias if bias is not None else 0)), act is None

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x), fn(x))


def test_print_breaks_the_graph_with_a_reason(capsys):
    def fn(x):
        y = x + 1
        print("value", 3)
        return y * 2

    x = torch.randn(2)
    out = framejit.explain(fn)(x)
    assert out.graph_break_count == 1 and "print" in str(out.break_reasons[0]).lower()
    capsys.readouterr()
    assert same(framejit.optimize(CompileCounter())(fn)(x), fn(x))
    assert capsys.readouterr().out == "value 3\nvalue 3\n"


def test_set_and_frozenset_arguments_and_results_keep_their_type_and_order():
    def fn(x, s, fs):
        made = frozenset(["a", "b"])
        return (
            x + len(s) + int(3 in fs),
            list(s),
            [v for v in s | {0}],
            sorted(fs),
            made,
            fs | {1},
            isinstance(made, frozenset),
            s.union({9}),
        )

    x, s, fs = torch.ones(2), {5, 17, 2}, frozenset({3, 1000, 7})
    got, want = run_fullgraph(fn, x, s, fs), fn(x, s, fs)
    assert [type(v) for v in got] == [type(v) for v in want]
    assert_equal(
        list(got[:4]) + [sorted(v) for v in got[4:6]] + list(got[6:7]),
        list(want[:4]) + [sorted(v) for v in want[4:6]] + list(want[6:7]),
    )
    assert got[7] == want[7]


def test_a_set_passed_in_with_other_items_recompiles():
    def fn(x, s):
        return x + sum(s)

    compiled = framejit.optimize(CompileCounter())(fn)
    x = torch.ones(2)
    for s in ({1, 2}, {1, 2}, {1, 5}):
        assert same(compiled(x, s), fn(x, s))
