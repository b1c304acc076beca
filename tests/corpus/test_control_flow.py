"""Capture corpus: for loops, while loops, branches on Python constants, comprehensions and
generator expressions.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch

from tests.corpus.harness import case_registry, check, program_params, rg, t


CASES, case = case_registry()


# ---- for loops --------------------------------------------------------------------------------


@case(t(3), ops=3)
def for_range(x):
    for i in range(3):
        x = x + i
    return x


@case(t(3), ops=2)
def for_range_step(x):
    for i in range(4, 0, -2):
        x = x * i
    return x


@case([t(3), t(3), t(3)], ops=3)
def for_list(xs):
    acc = 0
    for v in xs:
        acc = acc + v
    return acc


@case(t(3), ops=2)
def for_tuple_constants(x):
    for s in (1.5, 2.5):
        x = x * s
    return x


@case({"a": t(3), "b": t(3)}, ops=2)
def for_dict_items(d):
    out = {}
    for k, v in d.items():
        out[k + "_2"] = v * 2
    return out


@case({"a": t(3), "b": t(3)}, ops=2)
def for_dict_keys(d):
    acc = []
    for k in d.keys():
        acc.append(d[k] + 1)
    return acc


@case({"a": t(3), "b": t(3)}, ops=2)
def for_dict_direct(d):
    acc = []
    for k in d:
        acc.append(d[k] - 1)
    return acc


@case({"a": t(3), "b": t(3)}, ops=3)
def for_dict_values(d):
    acc = 1.0
    for v in d.values():
        acc = v * acc
    return acc.exp()


@case([t(3), t(3), t(3)], ops=7)
def for_enumerate(xs):
    acc = xs[0] * 0
    for i, v in enumerate(xs):
        acc = acc + v * i
    return acc


@case([t(3), t(3)], ops=2)
def for_enumerate_start(xs):
    out = []
    for i, v in enumerate(xs, start=1):
        out.append(v / i)
    return out


@case([t(3), t(3)], [t(3), t(3)], ops=2)
def for_zip(xs, ys):
    return [a * b for a, b in zip(xs, ys)]


@case([t(3), t(3)], [t(3), t(3)], (1.0, 2.0), ops=4)
def for_zip_three(xs, ys, ws):
    out = []
    for a, b, w in zip(xs, ys, ws):
        out.append(a * w + b)
    return out


@case([t(3), t(3), t(3)], ops=3)
def for_reversed(xs):
    out = []
    for v in reversed(xs):
        out.append(v.neg())
    return out


@case(t(3), ops=4)
def for_nested_loops(x):
    for i in range(2):
        for j in range(2):
            x = x + i * j
    return x


@case(t(3), ops=3)
def for_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + 1
    return x


@case(t(3), ops=2)
def for_continue(x):
    for i in range(4):
        if i % 2:
            continue
        x = x * 2
    return x


@case(t(3), ops=3)
def for_else(x):
    for i in range(2):
        x = x - i
    else:
        x = x * 10
    return x


@case(t(3, 4), ops=7)
def for_over_tensor(x):
    return [row * 2 for row in x]  # unbind, its three items, three products


@case(t(2, 3, 4), ops=1)
def for_over_shape(x):
    n = 1
    for d in x.shape:
        n *= d
    return x.reshape(n)


@case(t(3), ops=1)
def for_over_string(x):
    n = 0
    for ch in "abc":
        n += ord(ch)
    return x + n


# ---- while loops and branches on Python constants --------------------------------------------


@case(t(3), 3, ops=3)
def while_countdown(x, n):
    while n > 0:
        x = x * 2
        n -= 1
    return x


@case(t(3), ops=4)
def while_counter(x):
    i = 0
    while i < 4:
        x = x + 1
        i += 1
    return x


@case(t(3), ops=2)
def while_true_break(x):
    i = 0
    while True:
        if i >= 2:
            break
        x = x * 3
        i += 1
    return x


@case(t(3), 5, ops=1)
def if_int_arg(x, n):
    if n > 2:
        return x + 1
    else:
        return x - 1


@case(t(3), 0, ops=1)
def if_elif_else(x, n):
    if n == 1:
        y = x + 1
    elif n == 0:
        y = x * 2
    else:
        y = x - 1
    return y


@case(t(3), True, ops=1)
def if_ternary_bool(x, flag):
    return x * 2 if flag else x * 3


@case(t(3), t(3), ops=1)
def if_isinstance_tensor(x, y):
    if isinstance(y, torch.Tensor):
        return x + y
    return x


@case(t(3), 2, ops=1)
def if_isinstance_number(x, n):
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        return x * n
    return x


@case([t(3), t(3)], ops=1)
def if_isinstance_container(xs):
    if isinstance(xs, (list, tuple)):
        return torch.stack(xs)
    return xs


@case([t(3), t(3)], ops=1)
def if_len(xs):
    if len(xs) == 2:
        return xs[0] * xs[1]
    return xs[0]


@case(t(4, 3), ops=1)
def if_shape_compare(x):
    if x.shape[0] > x.shape[1]:
        return x.t()
    return x


@case(t(4, 3), ops=1)
def if_dim_ndim(x):
    if x.dim() == 2 and x.ndim < 3:
        return x.unsqueeze(0)
    return x


@case(t(4, 3), ops=1)
def if_dtype(x):
    if x.dtype == torch.float32:
        return x.double()
    return x


@case(t(4, 3), ops=1)
def if_device(x):
    if x.device.type == "cpu" and x.device == torch.device("cpu"):
        return x + 1
    return x - 1


@case(t(4, 3), ops=1)
def if_is_floating_point(x):
    return x.floor() if x.is_floating_point() else x


@case(t(4, 3), ops=1)
def if_numel(x):
    return x.sum() if x.numel() > 10 else x.mean()


@case(t(4, 3), ops=1)
def if_shape_equals_tuple(x):
    if x.shape == (4, 3) and x.size() == torch.Size([4, 3]):
        return x.view(12)
    return x


@case(t(4, 3), ops=1)
def if_size_call(x):
    if x.size(-1) == 3 and x.size()[0] == 4:
        return x.flip(0)
    return x


@case(rg(4, 3), ops=1)
def if_requires_grad(x):
    return x * 2 if x.requires_grad else x * 3


@case(t(3), None, ops=1)
def or_default(x, s):
    scale = s or 2.0
    return x * scale


@case(t(3), 2, ops=1)
def and_value(x, n):
    m = n and n * 10
    return x + m


@case(t(3), 2, 3, ops=1)
def and_or_conditions(x, a, b):
    if a > 1 and b < 5 or a == 0:
        return x * a
    return x * b


@case(t(3), [], {"k": 1}, ops=2)
def container_truthiness(x, lst, d):
    y = x + 1 if not lst else x
    return y * d["k"] if d else y


# ---- comprehensions and generator expressions -------------------------------------------------


@case([t(3), t(3), t(3)], ops=3)
def listcomp_basic(xs):
    return [v * 2 for v in xs]


@case(t(3), ops=3)
def listcomp_condition(x):
    return [x * i for i in range(5) if i % 2 == 0]


@case({"a": t(3), "b": t(3)}, ops=2)
def dictcomp(d):
    return {k: v + 1 for k, v in d.items()}


@case(t(3), ops=1)
def setcomp_constants(x):
    s = {i % 3 for i in range(10)}
    return x * len(s)


@case([t(3), t(3)], ops=2)
def genexpr_tuple(xs):
    return tuple(v.sin() for v in xs)


@case([t(3), t(3), t(3)], ops=6)
def genexpr_sum(xs):
    return sum(v * v for v in xs)


@case([t(3), t(3)], ops=2)
def genexpr_list(xs):
    return list(v.exp() for v in xs)


@case(t(2, 3), ops=1)
def genexpr_all_any(x):
    if all(d > 0 for d in x.shape) and not any(d > 10 for d in x.shape):
        return x + 1
    return x


@case([t(3), t(3)], [t(3), t(3), t(3)], ops=6)
def listcomp_nested(xs, ys):
    return [[a * b for b in ys] for a in xs]


@case([t(3), t(3)], 2.0, ops=2)
def listcomp_closure(xs, scale):
    return [v * scale for v in xs]


@case(t(3), ops=1)
def genexpr_sum_constants(x):
    return x * sum(i * i for i in range(4))


@case(t(3, 4), ops=1)
def dictcomp_constants(x):
    sizes = {f"d{i}": s for i, s in enumerate(x.shape)}
    return x.view(sizes["d1"], sizes["d0"])


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
