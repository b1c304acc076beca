"""Python numbers that change from call to call (a diffusion timestep, a step count): after the first change they
are symbolic, and what the program builds from them stays symbolic too, so later values compile nothing."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter


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
