"""Capture corpus: assorted combinations.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import collections
import math
import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.corpus.harness import case_registry, check, program_params, t
from tests.corpus.shared import GLOBAL_TABLE, MODULE_LIST, sin_plus


CASES, case = case_registry()


# ---- assorted combinations ---------------------------------------------------------------------


@case(t(3), ops=3)
def augassign_subscript_containers(x):
    d = {"k": x}
    d["k"] += 1
    lst = [x * 2]
    lst[0] *= 3
    return d, lst


@case(t(3, 4), ops=3)
def augassign_tensor_subscript(x):
    x[0] += 1
    return x


@case(t(3, 4), ops=3)
def setitem_boolean_mask(x):
    y = x.clone()
    y[y < 0] = 0.0
    return y


@case(t(3), t(3), ops=2)
def slice_assign_local_list(x, y):
    lst = [x, x, x]
    lst[1:] = [y, y * 2]
    return torch.stack(lst)


@case(t(3, 4), ops=1)
def walrus_shape(x):
    if (n := x.shape[0]) > 2:
        return x * n
    return x


@case(t(3, 4), ops=2)
def index_with_built_tuple(x):
    idx = (slice(None), 0)
    return x[idx], x[..., None]


@case(t(3, 4), ops=1)
def size_unpack_and_concat(x):
    b, c = x.size()
    return x.view(x.shape + (1,)), b * c


@case(t(2, 3, 4), ops=1)
def math_prod_shape(x):
    return x.reshape(math.prod(x.shape))


@case(t(3), t(3), ops=2)
def operator_module_functions(x, y):
    return operator.add(x, y), operator.mul(x, 2)


@case({"a": t(3), "b": t(3)}, ops=2)
def enumerate_dict_items_nested_unpack(d):
    out = []
    for i, (k, v) in enumerate(d.items()):
        out.append(v * i)
    return out


@case(t(3), ops=2)
def for_starred_target(x):
    for a, *rest in [(1, 2, 3), (4, 5)]:
        x = x + a * len(rest)
    return x


_GLOBAL_WEIGHTS = [t(3), t(3)]


@case(t(3), ops=2)
def global_list_of_tensors(x):
    for w in _GLOBAL_WEIGHTS:
        x = x * w
    return x


@case(t(3), ops=2)
def global_dict_items(x):
    for k, v in GLOBAL_TABLE.items():
        x = x * v if k == "scale" else x + v
    return x


@case(MODULE_LIST, t(2, 4), ops=4)
def listcomp_over_modulelist(ml, x):
    return torch.stack([m(x) for m in ml])


class OptionalArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act_fn = F.relu
        self.post = sin_plus

    def forward(self, x, mask=None, *extra, scale=1.0):
        y = self.act_fn(self.fc(x))
        if mask is not None:
            y = y * mask
        for e in extra:
            y = y + e
        return self.post(y) * scale


_OPTIONAL_ARGS = OptionalArgs()


@case(_OPTIONAL_ARGS, t(2, 4), t(2, 4), ops=7)
def module_call_with_extra_args(m, x, mask):
    return m(x, mask, x, scale=2.0)


@case(_OPTIONAL_ARGS, t(2, 4), ops=5)
def module_call_with_defaults(m, x):
    return m(x)


@case(nn.Linear(4, 4), t(2, 4), ops=2)
def parameter_isinstance(m, x):
    w = m.weight
    if isinstance(w, nn.Parameter) and w.requires_grad:
        return x @ w.t()
    return x


@case(nn.BatchNorm2d(3), t(2, 3, 4, 4), ops=2)
def module_batchnorm_train(m, x):
    return m(x)


@case(t(3), ops=1)
def dtype_in_tuple(x):
    if x.dtype in (torch.float16, torch.float32) and not x.is_cuda and str(x.dtype) == "torch.float32":
        return x.half()
    return x


@case(t(3), {"a": 1}, ops=1)
def len_of_dict_and_str(x, d):
    return x * (len(d) + len("abc"))


Pair = collections.namedtuple("Pair", ["a", "b"])


@case(Pair(t(3), t(3)), ops=2)
def namedtuple_argument(p):
    return p.a * p.b + p[0]


@case(t(3), ops=1)
def namedtuple_construct(x):
    return Pair(x + 1, 2)


@case(t(3), t(3), ops=2)
def lambda_varargs(x, y):
    f = lambda *a, **k: a[0] * k["s"] + a[1]  # noqa: E731
    return f(x, y, s=2)


@case(t(3), ops=2)
def nested_function_collects_kwargs(x):
    def inner(v, **opts):
        return v * opts.get("scale", 1.0) + len(opts)

    return inner(x, scale=3.0, other="o")


@case([t(3), t(3), t(3)], ops=3)
def conditional_in_comprehension(xs):
    return [v * 2 if i % 2 else v - 1 for i, v in enumerate(xs)]


@case([t(3), t(3)], [t(3), t(3)], ops=6)
def genexpr_enumerate_zip_sum(xs, ys):
    return sum(a * b * i for i, (a, b) in enumerate(zip(xs, ys)))


@case(t(3), [1, 2], ops=1)
def return_unmutated_list_argument(x, lst):
    return x + 1, lst


@case(t(3), ops=3)
def early_return_in_loop(x):
    for i in range(5):
        if i == 2:
            return x * i
        x = x + 1
    return x


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
