"""Capture corpus: BINARY_OP on tensors (in place too), Python numbers mixed with tensors,
comparisons, unary ops, `is`, `in`.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.corpus.harness import case_registry, check, ints, pos, program_params, t


CASES, case = case_registry()


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
    return x**y


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
    return (x + y) * (x - y) / z + x**2


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
    return x**2 + 2**x


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
    vals = [a + b, a - b, a * b, a / b, a // b, a % b, a**b, a & b, a | b, a ^ b, a << b, a >> b]
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


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
