"""A corpus of small programs for the symbolic interpreter (issue 2, item 4), each checked against eager.

Every program is compiled with `nopython=True` (fullgraph) and must give one graph
(or none, for programs with no graph op) with an exact op count, the same result
as eager (values, nesting, dtypes, requires_grad), the same state of its arguments
afterwards (mutated tensors, lists, dicts, objects), the same grad mode afterwards,
and a cache hit on a second call.

How ops are counted (CompileCounter.op_count: call_function/call_method/call_module nodes):
every torch function, tensor method or Python operator applied to a tensor is one
node; metadata reads (shape, size(), dim(), dtype, device, ndim, len(x), numel()...)
and arithmetic on Python constants add none; `x.T` / `x.mT` is one getattr node; an
op returning a tuple of tensors (chunk, split, unbind, max(dim), sort, topk...) is one
node plus one getitem node per tensor element (used or not); every grad-mode switch
(`torch.no_grad()` enter/exit, `torch.set_grad_enabled(b)`) is one
`torch._C._set_grad_enabled` node, the restore at the end of a block that closes the
graph included (the graph must leave grad mode as eager does).
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import dis
import math
import operator
import types

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from framejit.testing import CompileCounter, same

# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------


def _is_user_object(value):
    return type(value).__module__ == __name__ and hasattr(value, "__dict__") \
        and not isinstance(value, (nn.Module, type, types.FunctionType))


def clone(value):
    """Fresh copies of tensors and containers (and of this file's plain objects); modules,
    functions and classes are shared (they are guarded by identity)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, tuple):
        items = [clone(v) for v in value]
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, clone(v)) for k, v in value.items())
    if _is_user_object(value):
        new = copy.copy(value)
        new.__dict__ = clone(dict(value.__dict__))
        return new
    return value


def state_same(a, b):
    """Deep equality of argument state after a call (tensors by value, modules by identity)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.requires_grad == b.requires_grad and same(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(state_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(state_same(a[k], b[k]) for k in a)
    if isinstance(a, nn.Module):
        return a is b
    if _is_user_object(a):
        return state_same(vars(a), vars(b))
    return a is b or a == b


def _grad_flags(value):
    from torch.utils import _pytree as pytree
    return [leaf.requires_grad for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _graph_text(cnt):
    return "\n".join(gm.code for gm in cnt.graphs)


def check(fn, *args, ops=None, graphs=1, **kwargs):
    """Run fn eagerly and compiled (fullgraph) on fresh copies of args; compare results, argument
    state, grad mode and graph/op counts; a second compiled call must hit the cache."""
    grad_before = torch.is_grad_enabled()
    eargs, ekwargs = clone(args), clone(kwargs)
    expected = fn(*eargs, **ekwargs)
    assert torch.is_grad_enabled() == grad_before, "the eager program changed grad mode"
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    results = []
    for call in ("first", "second"):
        cargs, ckwargs = clone(args), clone(kwargs)
        try:
            got = compiled(*cargs, **ckwargs)
        finally:
            grad_after = torch.is_grad_enabled()
            torch.set_grad_enabled(grad_before)
        assert grad_after == grad_before, f"{call} call left grad mode {grad_after} (eager: {grad_before})"
        assert same(got, expected), f"{call} call: got {got!r}, eager gave {expected!r}"
        assert _grad_flags(got) == _grad_flags(expected), \
            f"{call} call: requires_grad {_grad_flags(got)} vs eager {_grad_flags(expected)}"
        assert state_same(cargs, eargs) and state_same(ckwargs, ekwargs), \
            f"{call} call: arguments after the call differ from eager's: {cargs!r} vs {eargs!r}"
        assert cnt.frame_count == graphs, \
            f"{call} call: {cnt.frame_count} graphs, expected {graphs}\n{_graph_text(cnt)}"
        if ops is not None:
            assert cnt.op_count == ops, f"{cnt.op_count} ops, expected {ops}\n{_graph_text(cnt)}"
        results.append((got, cargs, ckwargs))
    return cnt, results


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    before = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(before)


# ---------------------------------------------------------------------------------------------
# the corpus: @case(*args, ops=N[, graphs=G][, kwargs={...}]) registers a program
# ---------------------------------------------------------------------------------------------

CASES = []


def case(*args, ops, graphs=1, kwargs=None):
    def register(fn):
        CASES.append((fn, args, kwargs or {}, ops, graphs))
        return fn
    return register


_gen = torch.Generator().manual_seed(1234)


def t(*shape):
    return torch.randn(*shape, generator=_gen)


def pos(*shape):
    """Positive values (bases of **, divisors, log)."""
    return torch.rand(*shape, generator=_gen) + 0.5


def ints(*shape, hi=16):
    return torch.randint(0, hi, shape, generator=_gen)


def rg(*shape):
    return t(*shape).requires_grad_()


# ---- loads and stores: locals, globals, closures, attributes ---------------------------------

@case(t(3, 4), ops=2)
def local_store_load(x):
    y = x + 1
    z = y
    return z * 2


@case(t(3, 4), ops=2)
def local_delete(x):
    y = x + 1
    z = y * 2
    del y
    return z


SCALE = 3.0


@case(t(3, 4), ops=1)
def global_constant(x):
    return x * SCALE


def _sin_plus(v):
    return v.sin() + 1


@case(t(3, 4), ops=3)
def global_function(x):
    return _sin_plus(x) * 2


_GLOBAL_LINEAR = nn.Linear(4, 3)


@case(t(2, 4), ops=1)
def global_module(x):
    return _GLOBAL_LINEAR(x)


_GLOBAL_BIAS = t(4)


@case(t(3, 4), ops=1)
def global_tensor(x):
    return x + _GLOBAL_BIAS


_GLOBAL_TABLE = {"scale": 2.0, "shift": -1.0}


@case(t(3, 4), ops=2)
def global_dict(x):
    return x * _GLOBAL_TABLE["scale"] + _GLOBAL_TABLE["shift"]


@case(t(3, 4), ops=1)
def global_module_attr_chain(x):
    return torch.nn.functional.relu(x)


@case(t(3, 4), ops=2)
def global_math_module(x):
    return x * math.pi / math.sqrt(x.shape[-1])


def _make_closure_const(k):
    def closure_const(x):
        return x * k + k
    return closure_const


case(t(3, 4), ops=2)(_make_closure_const(3))


def _make_closure_tensor(b):
    def closure_tensor(x):
        return x - b
    return closure_tensor


case(t(3, 4), ops=1)(_make_closure_tensor(t(4)))


def _make_closure_fn(act):
    def closure_function(x):
        return act(x) * 2
    return closure_function


case(t(3, 4), ops=2)(_make_closure_fn(torch.tanh))


def _make_closure_module(mod):
    def closure_module(x):
        return mod(x).relu()
    return closure_module


case(t(2, 4), ops=2)(_make_closure_module(nn.Linear(4, 4)))


@case(t(3, 4), ops=2)
def cell_nonlocal_inner(x):
    acc = x

    def add(v):
        nonlocal acc
        acc = acc + v
    add(1)
    add(2)
    return acc


@case(t(3, 4), ops=2)
def cell_argument_captured(x):
    def inner(v):
        return v * x
    return inner(x) + x


@case(t(3), ops=1)
def cell_late_binding(x):
    fns = []
    for i in range(3):
        fns.append(lambda v: v * i)
    return fns[0](x)


# ---- BINARY_OP on tensors --------------------------------------------------------------------

@case(t(3, 4), t(3, 4), ops=1)
def binop_add(x, y):
    return x + y


@case(t(3, 4), t(3, 4), ops=1)
def binop_sub(x, y):
    return x - y


@case(t(3, 4), t(3, 4), ops=1)
def binop_mul(x, y):
    return x * y


@case(t(3, 4), pos(3, 4), ops=1)
def binop_truediv(x, y):
    return x / y


@case(t(3, 4), pos(3, 4), ops=1)
def binop_floordiv(x, y):
    return x // y


@case(t(3, 4), pos(3, 4), ops=1)
def binop_mod(x, y):
    return x % y


@case(pos(3, 4), t(3, 4), ops=1)
def binop_pow(x, y):
    return x ** y


@case(t(3, 4), t(4, 5), ops=1)
def binop_matmul(x, y):
    return x @ y


@case(ints(3, 4), ints(3, 4), ops=1)
def binop_and(x, y):
    return x & y


@case(ints(3, 4), ints(3, 4), ops=1)
def binop_or(x, y):
    return x | y


@case(ints(3, 4), ints(3, 4), ops=1)
def binop_xor(x, y):
    return x ^ y


@case(ints(3, 4), ints(3, 4, hi=4), ops=1)
def binop_lshift(x, y):
    return x << y


@case(ints(3, 4), ints(3, 4, hi=4), ops=1)
def binop_rshift(x, y):
    return x >> y


@case(t(3, 4), t(3, 4), pos(3, 4), ops=6)
def binop_expression(x, y, z):
    return (x + y) * (x - y) / z + x ** 2


# ---- in-place BINARY_OP on tensors (the argument is mutated, as in eager) ---------------------

@case(t(3, 4), t(3, 4), ops=1)
def inplace_binop_add(x, y):
    x += y
    return x


@case(t(3, 4), t(3, 4), ops=1)
def inplace_binop_sub(x, y):
    x -= y
    return x


@case(t(3, 4), t(3, 4), ops=1)
def inplace_binop_mul(x, y):
    x *= y
    return x


@case(t(3, 4), pos(3, 4), ops=1)
def inplace_binop_truediv(x, y):
    x /= y
    return x


@case(t(3, 4), pos(3, 4), ops=1)
def inplace_binop_floordiv(x, y):
    x //= y
    return x


@case(t(3, 4), pos(3, 4), ops=1)
def inplace_binop_mod(x, y):
    x %= y
    return x


@case(pos(3, 4), t(3, 4), ops=1)
def inplace_binop_pow(x, y):
    x **= y
    return x


@case(t(3, 4), t(4, 4), ops=1)
def inplace_binop_matmul(x, y):
    x @= y
    return x


@case(ints(3, 4), ints(3, 4), ops=3)
def inplace_binop_bitwise(x, y):
    x &= y
    x |= 8
    x ^= y
    return x


@case(ints(3, 4), ints(3, 4, hi=4), ops=2)
def inplace_binop_shifts(x, y):
    x <<= y
    x >>= 1
    return x


# ---- Python numbers mixed with tensors -------------------------------------------------------

@case(t(3, 4), ops=1)
def number_radd(x):
    return 2 + x


@case(t(3, 4), ops=1)
def number_sub(x):
    return x - 1.5


@case(t(3, 4), ops=1)
def number_rsub(x):
    return 1 - x


@case(t(3, 4), ops=1)
def number_rmul(x):
    return 3 * x


@case(pos(3, 4), ops=1)
def number_rtruediv(x):
    return 1 / x


@case(t(3, 4), ops=2)
def number_floordiv_mod(x):
    return x // 2, x % 3


@case(t(3, 4), ops=3)
def number_pow_both_sides(x):
    return x ** 2 + 2 ** x


@case(ints(3, 4), ops=3)
def number_bitwise(x):
    return (x & 6) | 1 ^ x


@case(ints(3, 4, hi=4), ops=3)
def number_shifts_reflected(x):
    return (1 << x) + (64 >> x)


@case(t(3, 4), ops=7)
def number_inplace_chain(x):
    x += 1
    x -= 0.5
    x *= 2
    x /= 4
    x **= 2
    x //= 1
    x %= 3
    return x


@case(ints(3, 4), ops=5)
def number_inplace_bitwise_chain(x):
    x &= 7
    x |= 8
    x ^= 3
    x <<= 1
    x >>= 2
    return x


@case(t(3), 7, 3, ops=1)
def python_number_binops(x, a, b):
    vals = [a + b, a - b, a * b, a / b, a // b, a % b, a ** b, a & b, a | b, a ^ b, a << b, a >> b]
    return x * sum(vals)


@case(t(3), 7, 3, ops=1)
def python_number_inplace(x, a, b):
    c = a
    c += b
    c -= 1
    c *= 2
    c //= 3
    c %= 5
    c **= 2
    c &= 0xFF
    c |= 1
    c ^= 3
    c <<= 2
    c >>= 1
    c /= 2
    return x * c


@case(t(3), 2.5, ops=1)
def python_float_arg(x, f):
    return x * (f * 2 - 1.0)


@case(t(3, 4), ops=1)
def shape_times_tensor(x):
    return x.shape[0] * x


# ---- comparisons, unary ops, `is`, `in` ------------------------------------------------------

@case(t(3, 4), t(3, 4), ops=6)
def compare_tensors(x, y):
    return x < y, x <= y, x == y, x != y, x > y, x >= y


@case(t(3, 4), ops=6)
def compare_tensor_numbers(x):
    return x < 0, x <= 0.5, x == 1, x != 0, x > -1, 0.5 >= x


@case(t(3), 3, ops=1)
def compare_constants(x, n):
    if n < 5 and n <= 5 and n == 3 and n != 4 and n > 1 and n >= 3 and 1 < n < 4:
        return x + 1
    return x - 1


@case(t(3, 4), ops=1)
def unary_neg(x):
    return -x


@case(t(3, 4), ops=1)
def unary_pos(x):
    return +x


@case(ints(3, 4), ops=1)
def unary_invert(x):
    return ~x


@case(t(3, 4), ops=2)
def unary_invert_bool(x):
    return ~(x > 0)


@case(t(3, 4), ops=2)
def unary_neg_expression(x):
    return -(x * 2)


@case(t(3), 3, ops=3)
def unary_on_constants(x, n):
    return x * (-n) + (~n) + (+n)


@case(t(3), False, ops=1)
def unary_not_constant(x, flag):
    if not flag:
        return x * 2
    return x * 3


@case(t(3), None, ops=1)
def is_none(x, y):
    if y is None:
        return x * 2
    return x * y


@case(t(3), t(3), ops=1)
def is_not_none(x, y):
    if y is not None:
        return x * y
    return x


@case(t(3), ops=1)
def is_same_tensor(x):
    y = x
    if y is x:
        return x + 1
    return x - 1


@case(t(3), t(3), ops=1)
def is_different_tensors(x, y):
    if x is y:
        return x + 1
    return x - y


@case(t(3), ops=1)
def is_type_and_dtype(x):
    if type(x) is torch.Tensor and x.dtype is torch.float32:
        return x * 2
    return x


@case(t(3), "gelu", ops=1)
def in_tuple_of_str(x, mode):
    if mode in ("relu", "gelu"):
        return F.gelu(x)
    return x


@case(t(3), 2, ops=1)
def not_in_list(x, n):
    if n not in [1, 3]:
        return x * n
    return x


@case(t(3), {"a": 1.0, "b": 2.0}, ops=1)
def in_dict(x, d):
    if "b" in d and "z" not in d:
        return x * d["b"]
    return x


@case(t(3), 3, ops=1)
def in_range(x, n):
    return x + 1 if n in range(5) else x - 1


@case(t(3), "leaky_relu", ops=1)
def in_string(x, mode):
    return F.leaky_relu(x) if "relu" in mode else x


@case(t(3), t(3), ops=1)
def tensor_in_list_by_identity(x, y):
    if x in [x, y]:
        return x * 2
    return x


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
    return x[:, x.shape[1] // 2:]


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


@case(t(2, 3), ops=3)
def unpack_tensor(x):
    a, b = x
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


@case(t(3, 4), ops=6)
def for_over_tensor(x):
    return [row * 2 for row in x]


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


# ---- torch functions ---------------------------------------------------------------------------

@case(t(3), t(3), ops=2)
def torch_cat_stack(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y), 1)


@case(t(3), t(3), ops=2)
def torch_where(x, y):
    return torch.where(x > 0, x, y)


@case(t(3, 4), t(4, 2), ops=2)
def torch_matmul_einsum(x, y):
    return torch.matmul(x, y), torch.einsum("ij,jk->ik", x, y)


@case(t(3, 4), ops=3)
def torch_factories(x):
    return torch.zeros_like(x) + torch.ones(3, 4)


@case(t(3, 4), ops=2)
def torch_factory_from_metadata(x):
    z = torch.zeros(x.size(0), 2, dtype=x.dtype, device=x.device)
    return torch.cat([x, z], dim=1)


@case(t(3), ops=4)
def torch_arange_full(x):
    return (x + torch.arange(3)) * torch.full((3,), 2.0)


@case(t(3, 4), ops=2)
def torch_tensor_constant(x):
    return x * torch.tensor([1.0, 2.0, 3.0, 4.0])


@case(t(3, 4), ops=3)
def torch_clamp_reductions(x):
    return torch.clamp(x, min=-0.5, max=0.5), torch.mean(x, dim=0), torch.amax(x, 1)


@case(t(3, 4), t(3, 4), ops=2)
def torch_max_overloads(x, y):
    return torch.max(x), torch.max(x, y)


@case(t(3, 4), ops=3)
def torch_max_dim_returned(x):
    return torch.max(x, 1)


@case(t(2, 3, 4), t(2, 4, 5), ops=2)
def torch_flatten_bmm(x, y):
    return torch.flatten(torch.bmm(x, y), 1)


@case(t(3, 5), t(3, 4), t(4, 5), ops=1)
def torch_addmm_kwargs(b, x, y):
    return torch.addmm(b, x, y, beta=0.5, alpha=2.0)


@case(t(3, 4), ops=4)
def torch_var_mean(x):
    v, m = torch.var_mean(x, dim=1)
    return v + m


@case(t(3, 4), ops=3)
def torch_sort_descending(x):
    return torch.sort(x, dim=1, descending=True)


@case(t(3, 4), ops=2)
def torch_cumsum_softmax(x):
    return torch.cumsum(x, dim=1), torch.softmax(x, -1)


@case(t(3), ops=1)
def torch_constant_queries(x):
    if torch.is_grad_enabled():
        y = x * 2
    else:
        y = x
    return y, torch.get_default_dtype()


# ---- torch.nn.functional -----------------------------------------------------------------------

@case(t(3, 4), ops=2)
def functional_relu_gelu(x):
    return F.relu(x), F.gelu(x, approximate="tanh")


@case(t(3, 4), ops=2)
def functional_softmax_log_softmax(x):
    return F.softmax(x, -1), F.log_softmax(x, dim=1)


@case(t(2, 4), t(3, 4), t(3), ops=1)
def functional_linear(x, w, b):
    return F.linear(x, w, b)


@case(t(1, 2, 6, 6), t(3, 2, 3, 3), ops=1)
def functional_conv2d(x, w):
    return F.conv2d(x, w, padding=1)


@case(t(1, 2, 6, 6), ops=2)
def functional_pools(x):
    return F.max_pool2d(x, 2), F.avg_pool2d(x, kernel_size=3, stride=1)


@case(t(3, 4), ops=3)
def functional_norms_dropout(x):
    return F.layer_norm(x, (4,)), F.normalize(x, dim=-1), F.dropout(x, p=0.5, training=False)


@case(t(3, 4), ops=1)
def functional_pad(x):
    return F.pad(x, (1, 2), value=0.5)


@case(t(3, 5), ints(3, hi=5), ops=1)
def functional_cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


@case(t(3, 4), t(3, 4), ops=1)
def functional_mse(x, y):
    return F.mse_loss(x, y, reduction="sum")


@case(t(3, 4), ops=3)
def functional_silu_tanh(x):
    return F.silu(x) * torch.tanh(x)


@case(ints(2, 3, hi=10), t(10, 4), ops=1)
def functional_embedding(idx, w):
    return F.embedding(idx, w)


@case(t(1, 2, 4, 4), ops=1)
def functional_interpolate(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


@case(t(3, 4), ops=1)
def functional_leaky_relu_kw(x):
    return F.leaky_relu(x, negative_slope=0.2)


# ---- tensor methods and attributes --------------------------------------------------------------

@case(t(3, 4), ops=2)
def method_sum_mean(x):
    return x.sum(dim=1), x.mean()


@case(pos(3, 4), ops=4)
def method_chain(x):
    return x.sin().cos(), x.log().exp()


@case(t(3, 4), ops=3)
def method_view_reshape(x):
    return x.view(-1), x.reshape(2, 6), x.view(x.shape[1], x.shape[0])


@case(t(2, 3, 4), ops=3)
def method_permute_transpose_contiguous(x):
    return x.permute(2, 0, 1).transpose(0, 1).contiguous()


@case(t(3, 4), ops=2)
def attr_T(x):
    return x.T @ x


@case(t(2, 3, 4), ops=3)
def attr_mT_and_t(x):
    return x.mT, x[0].t()


@case(t(3, 4), ops=2)
def method_unsqueeze_squeeze(x):
    return x.unsqueeze(0).squeeze(0)


@case(t(1, 4), ops=2)
def method_expand_repeat(x):
    return x.expand(3, 4), x.repeat(2, 1)


@case(t(3, 4), ints(3, 4), ops=4)
def method_dtype_conversions(x, i):
    return x.double(), x.to(torch.float16), x.int(), x.type_as(i)


@case(t(3, 4), ops=3)
def method_clone_detach_new(x):
    return x.clone(), x.detach(), x.new_zeros(2, 2)


@case(t(3, 4), ops=2)
def method_masked_fill(x):
    return x.masked_fill(x < 0, 0.0)


@case(t(3, 4), ops=2)
def method_argmax_softmax(x):
    return x.argmax(dim=1), x.softmax(-1)


@case(t(3, 4), ops=4)
def method_sort_unpacked(x):
    v, i = x.sort(dim=-1)
    return v, i.float()


@case(t(3, 4), ops=4)
def method_max_named_fields(x):
    m = x.max(dim=1)
    return m.values + 1, m.indices


@case(t(3, 4), ops=3)
def method_min_values(x):
    return x.min(dim=0).values


@case(t(3, 4), ops=3)
def method_topk_returned(x):
    return x.topk(2, dim=-1)


@case(t(6, 2), ops=5)
def method_chunk_index(x):
    return x.chunk(3)[0] * 2


@case(t(6, 2), ops=4)
def method_split_returned(x):
    return x.split(2)


@case(t(4, 3), ops=3)
def torch_split_sizes(x):
    a, b = torch.split(x, [1, 3], dim=0)
    return b


@case(t(3, 4), ops=1)
def method_to_same_device_dtype(x):
    return x.to(x.device, x.dtype)


@case(t(3, 4), ops=2)
def method_view_star_shape(x):
    return x.view(*x.shape[:-1], 2, 2), x.flatten()


@case(t(3, 4), ops=1)
def method_new_ones_shape(x):
    return x.new_ones(x.shape)


@case(t(3, 4), ops=1)
def metadata_methods(x):
    n = x.numel()
    s = x.stride()
    c = x.is_contiguous()
    e = x.element_size()
    return x * n, s, c, e


@case(t(3, 4), ops=1)
def metadata_len_ndim(x):
    return x * len(x), x.ndim, x.dim(), x.size(1), x.shape[-1]


@case(t(3, 4), ops=1)
def inplace_method_add(x):
    x.add_(1)
    return x


@case(t(3, 4), t(3, 4), ops=2)
def inplace_method_chain(x, y):
    return x.mul_(2).add_(y)


@case(t(3, 4), ops=3)
def inplace_on_clone(x):
    y = x.clone()
    y.mul_(2)
    y[0] = 0.0
    return y


@case(t(5, 3), ints(2, hi=5), ops=2)
def setitem_tensor_index(x, idx):
    y = x.clone()
    y[idx] = -1.0
    return y


@case(t(3, 4), t(3, 4), ops=2)
def setitem_slice_on_input(x, y):
    x[:, 0] = y[:, 1]
    return x


@case(t(3, 4), t(3, 4), ops=3)
def inplace_relu_clamp_copy(x, y):
    torch.relu_(x)
    x.clamp_(max=0.5)
    y.copy_(x)
    return x, y


@case(t(3, 4), t(3, 4), ops=3)
def inplace_zero_fill(x, y):
    x.zero_()
    y.fill_(2.0)
    return x + y


@case(t(3, 4), ops=2)
def inplace_masked_fill(x):
    x.masked_fill_(x > 0, 0.0)
    return x


@case(t(3, 4), ops=2)
def inplace_through_view(x):
    v = x.view(-1)
    v.add_(1)
    return x


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


# ---- grad mode blocks ----------------------------------------------------------------------------

@case(rg(3), ops=4)
def grad_no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x


@case(rg(3), ops=3)
def grad_no_grad_return_inside(x):
    with torch.no_grad():
        return x * 2


@case(rg(3), ops=7)
def grad_enable_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a + b


@case(rg(3), ops=4)
def grad_set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y * x


@case(rg(3), ops=4)
def grad_set_grad_enabled_calls(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y + x


@case(rg(3), ops=3)
def grad_query_inside_no_grad(x):
    with torch.no_grad():
        flag = torch.is_grad_enabled()
    return (x * 2 if not flag else x * 3), flag


def _frozen_scale(v):
    with torch.no_grad():
        return v * 2


@case(rg(3), ops=4)
def grad_no_grad_in_inlined_function(x):
    return _frozen_scale(x) + x


# ---- user-defined objects -----------------------------------------------------------------------

class Config:
    DEPTH = 3

    def __init__(self, scale=2.0, act="relu", depth=2, bias=None):
        self.scale = scale
        self.act = act
        self.depth = depth
        self.bias = bias

    @property
    def double_scale(self):
        return self.scale * 2

    def activate(self, x):
        return torch.relu(x) if self.act == "relu" else torch.tanh(x)

    def factor(self):
        return self.scale + self.depth

    @staticmethod
    def shift(x):
        return x + 1

    @classmethod
    def default_depth(cls):
        return cls.DEPTH


@dataclasses.dataclass
class DataConfig:
    alpha: float = 0.5
    n: int = 2
    name: str = "dc"
    dims: tuple = (2, 3)


class Outer:
    def __init__(self):
        self.inner = Config(scale=4.0)
        self.tag = "outer"


class Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, x):
        return x * self.s


class Holder:
    def __init__(self, weight):
        self.weight = weight


class Counter:
    def __init__(self):
        self.count = 0


@case(t(3), Config(), ops=2)
def object_attributes(x, cfg):
    return x * cfg.scale + cfg.depth


@case(t(3), Config(), ops=1)
def object_property(x, cfg):
    return x * cfg.double_scale


@case(t(3), Config(act="tanh"), ops=1)
def object_method_branching_on_attr(x, cfg):
    return cfg.activate(x)


@case(t(3), Config(), ops=1)
def object_method_constant(x, cfg):
    return x * cfg.factor()


@case(t(3), Config(), ops=1)
def object_staticmethod(x, cfg):
    return cfg.shift(x)


@case(t(3), ops=1)
def class_staticmethod(x):
    return Config.shift(x)


@case(t(3), Config(), ops=1)
def object_classmethod(x, cfg):
    return x * cfg.default_depth()


@case(t(3), ops=1)
def class_classmethod(x):
    return x * Config.default_depth()


@case(t(3), Config(), ops=2)
def object_getattr_builtin(x, cfg):
    return x * getattr(cfg, "scale") + getattr(cfg, "missing", 0.0)


@case(t(3), Config(), ops=1)
def object_hasattr_isinstance(x, cfg):
    if hasattr(cfg, "act") and not hasattr(cfg, "nope") and isinstance(cfg, Config):
        return x * 2
    return x


@case(t(3), Config(bias=None), ops=1)
def object_none_attribute(x, cfg):
    return x + cfg.bias if cfg.bias is not None else x * 2


@case(t(3), DataConfig(), ops=2)
def dataclass_fields(x, dc):
    return x * dc.alpha + dc.n, dc.name


@case(t(6), DataConfig(), ops=1)
def dataclass_tuple_field(x, dc):
    return x.view(*dc.dims)


@case(t(3), Outer(), ops=1)
def object_nested_attributes(x, o):
    return x * o.inner.scale, o.tag


@case(t(3), Scaler(3.0), ops=1)
def object_callable(x, s):
    return s(x)


@case(t(3), Holder(t(3)), ops=1)
def object_tensor_attribute(x, h):
    return x + h.weight


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


@case(t(3), _sin_plus, ops=2)
def user_fn_as_argument(x, fn):
    return fn(x)


# ---- nn.Modules -------------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class HelperMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 0.5

    def _act(self, x):
        return F.gelu(x) * self.scale

    def _bias_like(self, x):
        return torch.ones_like(x)

    def forward(self, x):
        return self._act(self.fc(x)) + self._bias_like(x)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * 2


class Child(Base):
    def forward(self, x):
        return super().forward(x) + 1


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @property
    def out_dim(self):
        return self.fc.out_features

    def forward(self, x):
        return self.fc(x).view(-1, self.out_dim)


class WithStaticAndClass(nn.Module):
    FACTOR = 3.0

    @staticmethod
    def _norm(x):
        return x / x.norm(dim=-1, keepdim=True)

    @classmethod
    def _factor(cls):
        return cls.FACTOR

    def forward(self, x):
        return self._norm(x) * self._factor()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class SeqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))

    def forward(self, x):
        return self.seq(x)


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4, generator=_gen))
        self.register_buffer("shift", torch.randn(4, generator=_gen))
        self.use_shift = True

    def forward(self, x):
        y = x @ self.weight
        if self.use_shift:
            y = y + self.shift
        return y


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(self.flatten(x))


_MODULE_LIST = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
_NORM_LIST = nn.ModuleList([nn.LayerNorm(4) for _ in range(3)])
_SEQUENTIAL = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
_NAMED_SEQUENTIAL = nn.Sequential(collections.OrderedDict(
    [("first", nn.Linear(4, 4)), ("act", nn.Sigmoid()), ("drop", nn.Dropout(0.5)), ("id", nn.Identity())])).eval()
_MODULE_DICT = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})


@case(MLP(), t(2, 4), ops=3)
def module_mlp(m, x):
    return m(x)


@case(HelperMethods(), t(2, 4), ops=5)
def module_helper_methods(m, x):
    return m(x)


@case(Child(), t(2, 4), ops=3)
def module_super_forward(m, x):
    return m(x)


@case(WithProperty(), t(2, 4), ops=2)
def module_property(m, x):
    return m(x)


@case(WithStaticAndClass(), t(2, 4), ops=3)
def module_static_and_class_methods(m, x):
    return m(x)


@case(Stack(), t(2, 4), ops=6)
def module_list_loop(m, x):
    return m(x)


@case(SeqModel(), t(2, 4), ops=3)
def module_sequential_call(m, x):
    return m(x)


@case(Affine(), t(2, 4), ops=2)
def module_parameter_buffer(m, x):
    return m(x)


@case(SmallCNN().eval(), t(1, 2, 4, 4), ops=6)
def module_cnn_eval(m, x):
    return m(x)


@case(MLP(), t(2, 4), ops=3)
def module_forward_called_directly(m, x):
    return m.forward(x)


@case(_SEQUENTIAL, t(2, 4), ops=3)
def sequential_iterate(seq, x):
    for layer in seq:
        x = layer(x)
    return x


@case(_SEQUENTIAL, t(2, 4), ops=3)
def sequential_index(seq, x):
    return seq[-1](seq[0](x).relu())


@case(_NAMED_SEQUENTIAL, t(2, 4), ops=3)
def sequential_named_children(seq, x):
    return seq(x)


@case(_MODULE_LIST, t(2, 4), ops=6)
def modulelist_enumerate(ml, x):
    for i, layer in enumerate(ml):
        x = layer(x) * (i + 1)
    return x


@case(_MODULE_LIST, t(2, 4), ops=1)
def modulelist_len_index(ml, x):
    return ml[len(ml) - 1](x)


@case(_MODULE_LIST, _NORM_LIST, t(2, 4), ops=6)
def modulelist_zip(ml, norms, x):
    for layer, norm in zip(ml, norms):
        x = norm(layer(x))
    return x


@case(_MODULE_LIST, t(2, 4), ops=2)
def modulelist_slice(ml, x):
    for layer in ml[:2]:
        x = layer(x)
    return x


@case(_MODULE_LIST, t(2, 4), ops=3)
def modulelist_reversed(ml, x):
    for layer in reversed(ml):
        x = layer(x)
    return x


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_items(md, x):
    return {k: h(x) for k, h in md.items()}


@case(_MODULE_DICT, t(2, 4), ops=4)
def moduledict_keys_index(md, x):
    return [md[k](x).sum() for k in md.keys()]


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_values(md, x):
    outs = []
    for h in md.values():
        outs.append(h(x))
    return outs


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_iterate_contains(md, x):
    return [md[k](x) for k in md if k in md and "z" not in md]


@case(nn.Linear(4, 4), t(2, 4), ops=5)
def module_parameters_genexpr(m, x):
    return x * sum(p.sum() for p in m.parameters())


@case(nn.Linear(4, 4), t(2, 4), ops=1)
def module_named_parameters_metadata(m, x):
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    return m(x), shapes


@case(nn.Linear(4, 3), t(2, 4), ops=1)
def module_introspection(m, x):
    if isinstance(m, nn.Linear) and m.in_features == x.shape[-1] and m.bias is not None:
        return m(x)
    return x


@case(nn.Linear(4, 4), t(2, 4), ops=4)
def module_under_no_grad(m, x):
    with torch.no_grad():
        y = m(x)
    return y * 2


# ---- returning mixed structures ---------------------------------------------------------------------

@case(t(3), ops=1)
def return_mixed_tuple(x):
    return x + 1, 3, "s", None, 2.5


@case(t(3), ops=3)
def return_nested(x):
    return {"a": [x + 1, (x * 2, 5)], "b": {"c": x - 1}, "d": (1, "two")}


@case(t(3), t(3), ops=1)
def return_inputs_and_new(x, y):
    return [x, y + 1, x]


@case(t(3), ops=1)
def return_metadata_with_tensor(x):
    return x * 2, x.shape, x.dtype, x.device, range(2), slice(1, 2)


@case(t(3), ops=2)
def return_dict_int_keys(x):
    return {0: x + 1, 1: x - 1}


@case(t(3), ops=1)
def return_same_list_twice(x):
    lst = [x + 1]
    return lst, lst


@case(t(3), t(3), ops=1)
def return_input_unchanged_with_op(x, y):
    return x, y * 2


# ---- programs with no graph op: not compiled ----------------------------------------------------------

@case(t(3), ops=0, graphs=0)
def no_op_constant(x):
    return 3


@case(t(3, 4), ops=0, graphs=0)
def no_op_shape_arithmetic(x):
    return x.shape[0] * 2 + x.ndim


@case(t(3), ops=0, graphs=0)
def no_op_identity(x):
    return x


@case(t(3), t(3), ops=0, graphs=0)
def no_op_reorder(x, y):
    return [y, x], {"x": x}


@case(4, ops=0, graphs=0)
def no_op_fstring(n):
    return f"n={n}"


@case(t(3, 4), ops=0, graphs=0)
def no_op_metadata(x):
    return x.dtype, x.numel(), x.is_contiguous(), x.size()


# ---- side effects on arguments (checked by comparing argument state with eager's) -----------------

@case(t(3), [], ops=2)
def side_effect_list_append(x, out):
    out.append(x + 1)
    return x * 2


@case(t(3), [1], ops=1)
def side_effect_list_extend_insert_pop(x, out):
    out.extend([x * 2, 3])
    out.insert(0, "s")
    out.pop()
    return len(out)


@case(t(3), [], ops=2)
def side_effect_list_then_read(x, out):
    out.append(x * 2)
    return out[-1] + 1


@case(t(3), {}, ops=1)
def side_effect_dict_setitem(x, d):
    d["y"] = x * 2
    return x


@case(t(3), {"a": 1, "b": t(3)}, ops=1)
def side_effect_dict_update_pop(x, d):
    d.update(c=x + 1)
    d.pop("a")
    return d["b"]


@case(t(3), {"lst": []}, ops=1)
def side_effect_nested_list_in_dict(x, d):
    d["lst"].append(x.exp())
    return None


@case(t(3), Config(), ops=1)
def side_effect_setattr_object(x, cfg):
    cfg.last = x + 1
    return x


@case(t(3), Counter(), ops=1)
def side_effect_object_counter(x, c):
    c.count += 1
    return x * c.count


@case(t(3), Config(), ops=1)
def side_effect_setattr_builtin(x, cfg):
    setattr(cfg, "extra", x * 2)
    return cfg.extra


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
    for k, v in _GLOBAL_TABLE.items():
        x = x * v if k == "scale" else x + v
    return x


@case(_MODULE_LIST, t(2, 4), ops=4)
def listcomp_over_modulelist(ml, x):
    return torch.stack([m(x) for m in ml])


class OptionalArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act_fn = F.relu
        self.post = _sin_plus

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

PARAMS = [pytest.param(fn, args, kwargs, ops, graphs, id=fn.__name__) for fn, args, kwargs, ops, graphs in CASES]
assert len({p.id for p in PARAMS}) == len(PARAMS), "program names must be unique"


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", PARAMS)
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)


def test_corpus_size():
    assert len(CASES) >= 160


# ---------------------------------------------------------------------------------------------
# dedicated tests: identity of returned values and side effects on globals / closures
# ---------------------------------------------------------------------------------------------

def test_returned_input_is_the_same_object():
    cnt, results = check(return_input_unchanged_with_op, t(3), t(3), ops=1)
    for got, cargs, _ in results:
        assert got[0] is cargs[0]


def test_returned_mutated_argument_is_the_same_list():
    def side_effect_return_mutated_arg(x, out):
        out.append(x * 2)
        return out
    cnt, results = check(side_effect_return_mutated_arg, t(3), [], ops=1)
    for got, cargs, _ in results:
        assert got is cargs[1] and len(got) == 1


def test_same_list_returned_twice_keeps_identity():
    cnt, results = check(return_same_list_twice, t(3), ops=1)
    for got, _, _ in results:
        assert got[0] is got[1]


def test_inplace_returns_the_input_tensor():
    cnt, results = check(inplace_method_add, t(3, 4), ops=1)
    for got, cargs, _ in results:
        assert got is cargs[0]


counter = 0


def side_effect_global_counter(x):
    global counter
    counter += 1
    return x + counter


def test_side_effect_global_counter():
    global counter
    x = t(3)
    counter = 0
    expected = side_effect_global_counter(x)
    expected_counter = counter
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(side_effect_global_counter)
    for _ in range(2):
        counter = 0
        got = compiled(x)
        assert same(got, expected)
        assert counter == expected_counter == 1
        assert cnt.frame_count == 1 and cnt.op_count == 1


_stash = None


def side_effect_global_tensor(x):
    global _stash
    _stash = x * 2
    return x + 1


def test_side_effect_global_tensor():
    global _stash
    x = t(3)
    _stash = None
    expected = side_effect_global_tensor(x)
    expected_stash = _stash
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(side_effect_global_tensor)
    for _ in range(2):
        _stash = None
        got = compiled(x)
        assert same(got, expected)
        assert isinstance(_stash, torch.Tensor) and same(_stash, expected_stash)
        assert cnt.frame_count == 1 and cnt.op_count == 2


def _make_bumper():
    calls = 0

    def side_effect_closure_nonlocal(x):
        nonlocal calls
        calls += 1
        return x * calls
    return side_effect_closure_nonlocal, lambda: calls


def test_side_effect_closure_nonlocal():
    x = t(3)
    eager_fn, eager_calls = _make_bumper()
    expected = eager_fn(x)
    fn, calls = _make_bumper()
    cnt = CompileCounter()
    got = framejit.optimize(cnt, nopython=True)(fn)(x)
    assert same(got, expected)
    assert calls() == eager_calls() == 1
    assert cnt.frame_count == 1 and cnt.op_count == 1


def test_optimized_module_wrapper():
    m = MLP()
    x = t(2, 4)
    cnt = CompileCounter()
    opt = framejit.optimize(cnt, nopython=True)(m)
    assert same(opt(x), m(x))
    assert same(opt(x), m(x))
    assert cnt.frame_count == 1 and cnt.op_count == 3


# ---------------------------------------------------------------------------------------------
# every opcode in the corpus has a handler (or is a known exception-path-only opcode)
# ---------------------------------------------------------------------------------------------

# Opcodes that appear in the corpus' bytecode without a handler, and why that is fine.
KNOWN_UNSUPPORTED = {
}


def _corpus_code_objects():
    """Code objects of every program, of the functions and class methods (of this file) they
    reach through their globals, closures and arguments, and of everything nested in them."""
    codes = {}
    seen_objects = set()

    def walk_code(code):
        if code in codes:
            return
        codes[code] = None
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk_code(const)

    def walk_object(obj, f_globals=None):
        if id(obj) in seen_objects:
            return
        seen_objects.add(id(obj))
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            obj = obj.fget
        if isinstance(obj, types.FunctionType):
            if obj.__code__.co_filename != __file__:
                return
            walk_code(obj.__code__)
            names = set()
            stack = [obj.__code__]
            while stack:
                code = stack.pop()
                names.update(code.co_names)
                stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in names:
                if name in obj.__globals__:
                    walk_object(obj.__globals__[name])
            for cell in obj.__closure__ or ():
                try:
                    walk_object(cell.cell_contents)
                except ValueError:
                    pass
        elif isinstance(obj, type):
            if obj.__module__ != __name__:
                return
            for klass in obj.__mro__:
                if klass.__module__ == __name__:
                    for attr in vars(klass).values():
                        walk_object(attr)
        elif isinstance(obj, nn.Module):
            for sub in obj.modules():
                walk_object(type(sub))
        elif _is_user_object(obj):
            walk_object(type(obj))
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk_object(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                walk_object(item)

    for fn, args, kwargs, _, _ in CASES:
        walk_object(fn)
        walk_object(args)
        walk_object(kwargs)
    for extra in (side_effect_global_counter, side_effect_global_tensor, _make_bumper):
        walk_object(extra)
    return list(codes)


def test_every_corpus_opcode_has_a_handler():
    import framejit.convert  # noqa: F401  (registers the opcode handlers)
    from framejit.trace.translator import OPCODE_HANDLERS as HANDLERS
    codes = _corpus_code_objects()
    assert len(codes) >= len(CASES)
    met = {}
    for code in codes:
        for inst in dis.get_instructions(code):
            met.setdefault(inst.opname, code.co_qualname)
    missing = {op: where for op, where in met.items()
               if HANDLERS[dis.opmap[op]] is None and op not in KNOWN_UNSUPPORTED}
    assert not missing, f"opcodes without a handler (opcode: first code object using it): {missing}"
    # the allowlist holds only opcodes that really lack a handler
    for op in KNOWN_UNSUPPORTED:
        assert HANDLERS[dis.opmap[op]] is None, f"{op} now has a handler: remove it from KNOWN_UNSUPPORTED"
