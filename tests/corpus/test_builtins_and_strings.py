"""Capture corpus: f-strings and str ops on constants, builtins.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import math

import pytest
import torch

from tests.corpus.harness import case_registry, check, program_params, t


CASES, case = case_registry()


# ---- f-strings and str ops on constants -------------------------------------------------------


@case(t(3), 2, ops=1)
def fstring_dict_key(x, n):
    key = f"layer_{n}"
    return {key: x * n}


@case(t(3), 3.14159, ops=1)
def fstring_format_spec_and_conversions(x, v):
    return x + 1, f"{v:.2f}|{v!r}|{'s'!s:>3}|{v!a}"


@case(t(3, 4), ops=1)
def fstring_of_metadata(x):
    return x * 2, f"shape={tuple(x.shape)} dtype={x.dtype} n={x.numel():04d}"


@case(t(3), "relu", ops=1)
def str_methods(x, mode):
    if mode.upper() == "RELU" and mode.startswith("re") and mode.replace("r", "R") == "Relu":
        return torch.relu(x)
    return x


@case(t(3), "a,b,c", ops=1)
def str_split_join(x, spec):
    parts = spec.split(",")
    name = "-".join(parts)
    return x * len(parts), name


@case(t(3), 3, ops=1)
def str_percent_format(x, n):
    label = "n=%d" % n
    return x * n, label + "!"


@case(t(3), "w", ops=1)
def str_concat_repeat(x, s):
    name = s + "_" + s * 2
    return x * len(name), name


@case(t(3, 4), ops=1)
def str_format_method(x):
    s = "{}-{}".format(x.shape[0], x.dtype)
    return x + 1, s


# ---- builtins -----------------------------------------------------------------------------------


@case([t(3), t(3)], ops=1)
def builtin_len(xs):
    return xs[0] * len(xs)


@case(t(3), 2, ops=2)
def builtin_min_max_constants(x, n):
    return x * min(3, n) + max([1, n, 5])


@case(t(3, 4), ops=1)
def builtin_min_max_shape(x):
    return x.view(max(x.shape), min(x.shape))


@case(t(3), -3, ops=2)
def builtin_abs(x, n):
    return abs(x) * abs(n)


@case([t(3), t(3)], ops=1)
def builtin_tuple_list(xs):
    tup = tuple(xs)
    lst = list(tup)
    lst.append(tup[0])
    return torch.stack(lst)


@case(t(3), ops=2)
def builtin_dict(x):
    d = dict(a=x, b=2)
    d2 = dict(zip(["c", "d"], [x * 2, 3]))
    return d["a"] * d["b"], d2


@case([t(3), t(3), t(3)], ops=3)
def builtin_sum_tensors(xs):
    return sum(xs)


@case(t(3), ops=1)
def builtin_sum_constants_start(x):
    return sum([1, 2, 3], 10) * x


@case(t(3), ops=1)
def builtin_any_all_constants(x):
    return x * 2 if any([0, 1]) and all((1, 2)) else x


@case(t(3), ops=1)
def builtin_sorted_constants(x):
    order = sorted([3, 1, 2], reverse=True)
    return x * order[0], order


@case(t(3), ops=2)
def builtin_int_float_constants(x):
    return x * int(3.7) + float("0.5")


@case(t(3), ops=1)
def builtin_round_divmod_pow(x):
    q, r = divmod(7, 2)
    return x * (round(2.6) + q + r + pow(2, 3))


@case(t(3), ops=2)
def builtin_range_object(x):
    r = range(2, 10, 3)
    return x * len(r) + r[-1]


@case(t(3), 4, ops=1)
def builtin_str_bool(x, n):
    s = str(n)
    return x * int(s) if bool(n) else x


@case(t(3), ops=1)
def builtin_hasattr_tensor(x):
    return x + 1 if hasattr(x, "shape") else x


@case(t(3), ops=1)
def builtin_hasattr_tensor_missing(x):
    return x + 1 if not hasattr(x, "nonexistent_attr") else x


@case(t(3, 4), ops=2)
def builtin_getattr_tensor(x):
    return getattr(x, "shape")[0] * getattr(x, "sum")()


@case(t(3), ops=1)
def builtin_callable(x):
    return x * 2 if callable(torch.relu) and not callable(3) else x


@case(t(3), ops=2)
def builtin_math(x):
    return x * math.sqrt(4.0) + math.floor(2.7)


@case(t(3), ops=1)
def builtin_filter_constants(x):
    vals = list(filter(None, [0, 1, 2]))
    return x * len(vals)


@case(t(3), ops=1)
def builtin_iter_next(x):
    it = iter([1, 2])
    a = next(it)
    b = next(it)
    c = next(it, 10)
    return x * (a + b + c)


@case(t(3), torch.sigmoid, ops=1)
def builtin_function_argument(x, fn):
    return fn(x)


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
