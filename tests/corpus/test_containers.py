"""Capture corpus: building containers and slices, subscripts, unpacking.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch

from tests.corpus.harness import case_registry, check, ints, program_params, t


CASES, case = case_registry()


# ---- building containers and slices ----------------------------------------------------------


@case(t(3), ops=2)
def build_tuple(x):
    return (x + 1, x * 2)


@case(t(3), ops=2)
def build_list(x):
    return [x + 1, x * 2, 3]


@case(t(3), ops=1)
def build_dict_const_keys(x):
    return {"a": x + 1, "b": 2, "c": None}


@case(t(3), "k", ops=1)
def build_dict_variable_keys(x, k):
    d = {k: x * 2, k + "2": 1}
    return d


@case(t(3), ops=1)
def build_set(x):
    s = {1, 2, 2, 3}
    s.add(4)
    return x * len(s)


@case(t(6), 1, 5, ops=2)
def build_slice(x, a, b):
    sl = slice(a, b)
    return x[sl], x[a:b:2]


@case(t(3), ops=2)
def build_nested(x):
    data = {"list": [x, (1, 2)], "tup": ((x,),)}
    return data["list"][0] * data["list"][1][1] + data["tup"][0][0]


@case(t(3), t(3), ops=1)
def list_concat_repeat(x, y):
    lst = [x] + [y]
    lst = lst * 2
    tup = (x,) + (y,)
    return torch.stack(lst + list(tup))


@case(t(3), t(3), ops=4)
def list_methods_local(x, y):
    lst = [x]
    lst.append(y)
    lst.extend([x * 2])
    lst.insert(0, y * 3)
    last = lst.pop()
    lst.reverse()
    return torch.stack(lst) + last


@case(t(3), t(3), ops=2)
def dict_methods_local(x, y):
    d = {}
    d["a"] = x
    d.update(b=y)
    d.setdefault("c", x * 2)
    v = d.pop("a")
    return d.get("b") + v, list(d.keys()), sorted(d.keys()), d.get("zz", 5)


@case(t(3), ops=1)
def sorted_dict_with_tensor_values(x):
    d = {"b": x, "a": x * 2}
    return [d[k] for k in sorted(d)]


@case(t(3), t(3), ops=1)
def store_delete_subscript(x, y):
    lst = [x, y, x]
    lst[1] = y * 2
    del lst[0]
    d = {"a": x, "b": y}
    d["c"] = lst[0]
    del d["a"]
    return lst, d


# ---- subscripts -------------------------------------------------------------------------------


@case(t(4, 5), ops=2)
def index_int(x):
    return x[1], x[-1]


@case(t(4, 5), ops=2)
def index_slices(x):
    return x[1:3], x[::2, 1:]


@case(t(4, 5), ops=1)
def index_none(x):
    return x[None, :, None]


@case(t(4, 5, 6), ops=2)
def index_ellipsis(x):
    return x[..., 0], x[1, ...]


@case(t(4, 5), ints(3, hi=4), ops=1)
def index_tensor(x, idx):
    return x[idx]


@case(t(4, 5), ints(3, hi=5), ops=1)
def index_tensor_column(x, idx):
    return x[:, idx]


@case(t(4, 5), ops=1)
def index_list_of_ints(x):
    return x[[0, 2]]


@case(t(4, 5), ops=2)
def index_chained(x):
    return x[1][2:]


@case(t(4, 5), ops=1)
def index_mixed(x):
    return x[0, 1:3, None]


@case(t(4, 5), 1, ops=1)
def index_int_arg(x, i):
    return x[i, i + 1]


@case(t(4, 6), ops=1)
def index_from_shape(x):
    return x[:, x.shape[1] // 2 :]


@case([t(3), t(3), t(3)], ops=1)
def list_subscript(xs):
    return xs[0] + xs[-1]


@case([t(3) for _ in range(4)], ops=1)
def list_slice_subscript(xs):
    return torch.stack(xs[1::2])


@case((t(3), 2.0), ops=1)
def tuple_subscript(pair):
    return pair[0] * pair[-1]


@case({"a": t(3), "b": {"c": t(3), "n": [1, 2]}}, ops=2)
def dict_subscript_nested(d):
    return (d["a"] + d["b"]["c"]) * d["b"]["n"][1]


@case(t(3), ops=1)
def str_subscript(x):
    name = "relu6"
    return x.clamp(0, int(name[-1]))


# ---- unpacking --------------------------------------------------------------------------------


@case((t(3), t(3)), ops=1)
def unpack_tuple_arg(pair):
    a, b = pair
    return a - b


@case([t(3), t(3), t(3)], ops=3)
def unpack_starred_first(xs):
    first, *rest = xs
    return first * 2, [r + 1 for r in rest]


@case([t(3), t(3), t(3), t(3)], ops=2)
def unpack_starred_middle(xs):
    a, *mid, b = xs
    return a + b, len(mid), torch.stack(mid)


@case([t(3), t(3), t(3)], ops=1)
def unpack_starred_last(xs):
    *init, last = xs
    return last - init[0]


@case(t(3), t(3), t(3), ops=2)
def unpack_nested(x, y, z):
    (a, b), c = (x, y), z
    return a * b + c


@case(t(2, 3), ops=4)
def unpack_tensor(x):
    a, b = x  # unbind and its two items, as Tensor.__iter__ makes them
    return a * b


@case(t(3, 4), ops=1)
def unpack_shape(x):
    n, m = x.shape
    return x.reshape(m, n)


@case(t(3), {"a": 1.0, "b": 2.0}, ops=1)
def unpack_dict_keys(x, d):
    k1, k2 = d
    return x * d[k2], k1 + k2


@case(t(3), ops=2)
def unpack_swap(x):
    a, b = 1.0, 2.0
    a, b = b, a
    return x * a - b


@case(t(3), ops=1)
def unpack_range_starred(x):
    first, *others = range(4)
    return x * (first + sum(others))


@case(t(4, 6), ops=6)
def unpack_split_qkv(x):
    q, k, v = x.split(2, dim=-1)
    return q * k + v


@case(t(4, 3), ops=4)
def unpack_chunk(x):
    a, b = x.chunk(2)
    return a + b


@case(t(3, 4), ops=6)
def unpack_unbind(x):
    a, b, c = x.unbind(0)
    return a + b + c


@case(t(3, 4), ops=4)
def unpack_max_dim(x):
    vals, idx = x.max(dim=1)
    return vals * 2, idx


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
