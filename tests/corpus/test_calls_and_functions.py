"""Capture corpus: calls with *args/**kwargs and keyword arguments, MAKE_FUNCTION
(lambdas, nested functions, closures), user functions (inlined).

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch

from tests.corpus.harness import case_registry, check, program_params, t
from tests.corpus.shared import sin_plus


CASES, case = case_registry()


# ---- calls: *args/**kwargs (CALL_FUNCTION_EX), keyword arguments (KW_NAMES) -----------------


@case(t(3), t(3), ops=1)
def call_ex_args(x, y):
    args = (x, y)
    return torch.add(*args)


@case(t(3), t(3), ops=1)
def call_ex_kwargs(x, y):
    kw = {"alpha": 2}
    return torch.add(x, y, **kw)


@case([t(3), t(3)], ops=1)
def call_ex_list_arg(xs):
    return torch.maximum(*xs)


@case(t(3, 4), ops=1)
def call_ex_method_kwargs(x):
    return x.sum(**{"dim": 1, "keepdim": True})


@case(t(3), t(3), ops=1)
def call_ex_star_and_kw(x, y):
    args = [x]
    kwargs = dict(other=y)
    return torch.maximum(*args, **kwargs)


def _varargs_fn(*args, **kwargs):
    return args[0] * kwargs["scale"] + len(args)


@case(t(3), ops=2)
def call_user_varargs(x):
    return _varargs_fn(x, 1, 2, scale=3.0)


def _kw_target(x, y, *, alpha=1.0):
    return x + alpha * y


def _forwarder(*args, **kwargs):
    return _kw_target(*args, **kwargs)


@case(t(3), t(3), ops=2)
def call_forwarding(x, y):
    return _forwarder(x, y, alpha=0.5)


@case(t(3, 4), ops=1)
def kw_torch_sum(x):
    return torch.sum(x, dim=1, keepdim=True)


@case(t(3, 4), ops=1)
def kw_tensor_method(x):
    return x.clamp(min=-0.5, max=0.5)


def _affine(x, scale=1.0, shift=0.0):
    return x * scale + shift


@case(t(3), ops=2)
def kw_user_function(x):
    return _affine(x, shift=1.0, scale=2.0)


@case(t(3), ops=2)
def kw_mixed_positional(x):
    return _affine(x, 3.0, shift=-1.0)


@case(t(3), ops=2, kwargs={"scale": 2.0, "bias": None})
def called_with_keywords(x, *, scale, bias=1.0):
    y = x * scale
    if bias is not None:
        y = y + bias
    return y + 1


# ---- MAKE_FUNCTION: lambdas, nested functions, closures --------------------------------------


@case(t(3), t(3), ops=3)
def lambda_local(x, y):
    f = lambda v: v * 2  # noqa: E731
    return f(x) + f(y)


@case(t(3), ops=2)
def nested_def_defaults(x):
    def inner(v, s=2.0, *, b=0.5):
        return v * s + b

    return inner(x)


@case(t(3), ops=3)
def closure_factory_in_frame(x):
    def mk(k):
        return lambda v: v * k

    return mk(2)(x) + mk(3)(x)


@case(t(3), t(3), ops=2)
def lambda_map(x, y):
    return list(map(lambda v: v + 1, [x, y]))


@case(t(3), ops=2)
def nested_closure_two_levels(x):
    a = 2.0

    def outer(v):
        def inner(w):
            return w * a

        return inner(v) + a

    return outer(x)


@case(t(3), ops=1)
def lambda_default_capture(x):
    fs = [lambda v, i=i: v * i for i in range(3)]
    return fs[2](x)


@case(t(3), ops=3)
def nested_appends_to_enclosing_list(x):
    out = []

    def push(v):
        out.append(v * 2)

    push(x)
    push(x + 1)
    return out


@case(t(3), ops=1)
def sorted_key_builtin(x):
    names = sorted(["bb", "a", "ccc"], key=len)
    return x * len(names[-1])


@case(t(3), ops=1)
def sorted_key_lambda(x):
    names = sorted(["bb", "a", "ccc"], key=lambda s: -len(s))
    return x * len(names[0])


# ---- user functions (inlined) ---------------------------------------------------------------------


def _fact(x, n):
    return x if n <= 1 else _fact(x * n, n - 1)


@case(t(3), ops=3)
def recursion_linear(x):
    return _fact(x, 4)


def _fib(x, n):
    return x if n < 2 else _fib(x, n - 1) + _fib(x, n - 2)


@case(t(3), ops=4)
def recursion_tree(x):
    return _fib(x, 4)


def _defaults(x, a=1.0, b=2.0, *, c=3.0, d=None):
    y = x * a + b
    if d is not None:
        y = y - d
    return y * c


@case(t(3), ops=3)
def user_fn_defaults(x):
    return _defaults(x)


@case(t(3), ops=4)
def user_fn_kwonly(x):
    return _defaults(x, 2.0, c=0.5, d=1.0)


def _posonly(x, /, s):
    return x * s


@case(t(3), ops=1)
def user_fn_posonly(x):
    return _posonly(x, s=2)


def _returns_tuple(x):
    return x + 1, x - 1


@case(t(3), ops=3)
def user_fn_multiple_returns(x):
    a, b = _returns_tuple(x)
    return a * b


def _level3(x):
    return x.relu()


def _level2(x):
    return _level3(x) * 2


def _level1(x):
    return _level2(x) + 1


@case(t(3), ops=3)
def user_fn_chain(x):
    return _level1(x)


def _append_to(lst, v):
    lst.append(v)
    return len(lst)


@case(t(3), ops=3)
def user_fn_mutates_local_list(x):
    out = [x]
    n = _append_to(out, x * 2)
    return torch.cat(out) * n


@case(t(3), sin_plus, ops=2)
def user_fn_as_argument(x, fn):
    return fn(x)


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
