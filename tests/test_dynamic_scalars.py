"""Python numbers that change from call to call (a diffusion timestep, a step count): after the first change they
are symbolic, and what the program builds from them stays symbolic too, so later values compile nothing."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend, same


@pytest.mark.parametrize(
    "make",
    [
        lambda t: torch.tensor([t]),  # diffusers' `torch.tensor([timesteps], dtype=torch.long)`
        lambda t: torch.tensor([t], dtype=torch.long),
        lambda t: torch.tensor(t),
        lambda t: torch.tensor([[t, 2], [3, t]], dtype=torch.float32),
        lambda t: torch.as_tensor([t * 0.5, 1.0]),
    ],
    ids=["list", "list-long", "scalar", "nested-float32", "float-items"],
)
def test_a_tensor_made_of_a_changing_int_compiles_twice_at_most(make):
    def step(x, t):
        return x + make(t)

    counter = CompileCounter()
    compiled = framejit.compile(step, backend=counter)
    for t in (999, 978, 957, 936, 915):
        got, expected = compiled(torch.ones(2, 2), t), step(torch.ones(2, 2), t)
        assert torch.equal(got, expected) and got.dtype == expected.dtype
    assert counter.frame_count == 2  # the first value, then one graph for every value (as torch.compile)


def test_an_int_passed_through_star_args_becomes_symbolic_after_it_changes():
    def f(x, *args):
        return x + args[0] * args[1]

    counter = CompileCounter()
    compiled = framejit.compile(f, backend=counter)
    for t in (999, 666, 333, 5):
        assert torch.equal(compiled(torch.ones(2), t, 2), f(torch.ones(2), t, 2))
    assert counter.frame_count == 2  # as torch.compile: the first value, then one graph for all


def _scaled(x, s):
    y = x * s + 1
    if s > 0:  # a guard on the symbol: a negative value compiles again
        y = y + s * 2
    return y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_float_argument_that_changes_is_symbolic_from_the_second_compile(backend):
    from framejit.testing import CompileCounterWithBackend

    code = _scaled.__code__.replace()  # a code object of its own: no compile of another test seen before
    fn = type(_scaled)(code, _scaled.__globals__)
    counter = CompileCounterWithBackend(backend)
    compiled = framejit.compile(fn, backend=counter)
    for s in (0.5, 1.5, 2.5, 3.25):
        x = torch.randn(3, requires_grad=backend != "eager")
        torch.testing.assert_close(compiled(x, s), fn(x, s))
    assert counter.frame_count == 2  # as torch.compile: 0.5, then one graph for every positive value
    torch.testing.assert_close(compiled(torch.ones(3), -1.0), fn(torch.ones(3), -1.0))
    assert counter.frame_count == 3  # the branch's guard `s > 0` failed


def test_nan_and_infinities_stay_constants():
    def f(x, s):
        return x + s

    counter = CompileCounter()
    compiled = framejit.compile(f, backend=counter)
    for s in (1.0, 2.0, float("inf"), float("nan")):
        got, expected = compiled(torch.zeros(1), s), f(torch.zeros(1), s)
        torch.testing.assert_close(got, expected, equal_nan=True)


def test_an_int_argument_first_1_then_2_is_symbolic_from_the_second_compile():
    """1 is kept a constant (as torch.compile's 0/1 specialisation), but remembered: 2 is a change."""

    def f(x, n):
        return x + n

    counter = CompileCounter()
    compiled = framejit.compile(f, backend=counter)
    for n in (1, 2, 3, 4):
        assert torch.equal(compiled(torch.ones(5), n), f(torch.ones(5), n))
    assert counter.frame_count == 2


def _lerp_in_place(x, y, weight):
    torch._foreach_lerp_(x, y, weight)
    return x


def _pow_of_a_scalar(base, exponents):
    return torch._foreach_pow(base, exponents)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(
    "fn, make",
    [
        (
            _lerp_in_place,
            lambda: ([torch.full((2, 2), 4.25), torch.full((2, 2), 3.0)], [torch.ones(2, 2)] * 2, torch.tensor(0.5)),
        ),
        (_pow_of_a_scalar, lambda: (torch.tensor(0.8), [torch.tensor(3.4), torch.tensor(7.8)])),
    ],
)
def test_a_foreach_op_reading_a_0_dim_scalar_is_one_graph_under_fullgraph(fn, make, backend):
    """The kernel reads the scalar with .item() (an unbacked symbol its result does not hold): the kernel's own."""
    counter = CompileCounterWithBackend(backend)
    assert same(framejit.optimize(counter, nopython=True)(fn)(*make()), fn(*make()))
    assert counter.frame_count == 1


def _exact_of_int(t, n):
    return t * n.real + n.conjugate() + n.imag + n.numerator * n.denominator


def _exact_of_float(t, m):
    return t * m.real + m.conjugate() + m.imag


@pytest.mark.parametrize(("fn", "values"), [(_exact_of_int, (1, 2, 3, 4)), (_exact_of_float, (0.5, 1.5, 2.5, 3.5))])
def test_a_symbolic_numbers_real_imag_and_conjugate_stay_symbolic(fn, values):
    counter = CompileCounter()
    compiled = framejit.compile(fn, backend=counter, fullgraph=True)
    t = torch.ones(2)
    for v in values:
        torch.testing.assert_close(compiled(t, v), fn(t, v))
    assert counter.frame_count == 2  # the first value, then one symbolic graph for the rest


def _methods_of_int(t, n):
    return t * n.bit_length(), n.as_integer_ratio(), hex(n), bin(n), f"{n:>4}", n.to_bytes(2, "little")


def _methods_of_float(t, m):
    return (2 * t if m.is_integer() else t), m.as_integer_ratio(), m.hex(), repr(m)


@pytest.mark.parametrize(("fn", "values"), [(_methods_of_int, (1, 2, 5)), (_methods_of_float, (0.0, 1.0, 2.5))])
def test_other_methods_of_a_symbolic_number_read_its_guarded_value(fn, values):
    compiled = framejit.compile(fn, backend="eager", fullgraph=True)
    t = torch.ones(2)
    for v in values:  # the second value is symbolic: the method specialises it (no break under fullgraph)
        got, want = compiled(t, v), fn(t, v)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
