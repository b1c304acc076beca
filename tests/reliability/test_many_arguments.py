"""Generated code with more values than fit in one byte, called many times.

CPython 3.11 specialises a call of a C function after about eight runs of the code (quickening) and then skips
the CALL after PRECALL by a fixed length, which lands inside CALL's inline cache when an EXTENDED_ARG sits in
front of it: a graph of 255 or more inputs crashed the interpreter on its 7th call. Each case here runs past
that warm-up, its results compared with eager's every time."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter

CALLS = 20  # past CPython's quickening (8 runs) and a few specialised runs after it


def stack_all(*ts):
    return torch.stack(ts).sum(0) + 1 if ts else torch.ones(3)


@pytest.mark.parametrize("n", [0, 1, 254, 255, 256, 1000, pytest.param(5000, marks=pytest.mark.slow)])
def test_a_graph_of_n_inputs_runs_many_times(n):
    counter = CompileCounter()
    compiled = framejit.compile(stack_all, backend=counter)
    for call in range(CALLS):
        ts = [torch.full((3,), float(i + call)) for i in range(n)]
        assert torch.equal(compiled(*ts), stack_all(*ts)), call
    assert counter.frame_count == 1
    assert counter.op_count >= 1


def test_a_sequential_of_254_parameters_runs_under_no_grad():
    """The issue's model: 127 Linear layers, their 254 parameters and the input as graph inputs."""
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(127)])
    compiled = framejit.compile(model, backend="eager")
    with torch.no_grad():
        for call in range(CALLS):
            x = torch.randn(2, 4)
            assert torch.equal(compiled(x), model(x)), call


def _many_locals_with_a_break(n: int):
    """A function holding `n` tensors in locals across a graph break: its continuation takes them all."""
    names = [f"v{i}" for i in range(n)]
    lines = ["def many(x):"]
    lines += [f"    {name} = x + {i}" for i, name in enumerate(names)]
    lines += ["    print('', end='')", f"    return {' + '.join(names)}"]
    namespace: dict = {}
    exec("\n".join(lines), namespace)
    return namespace["many"]


@pytest.mark.parametrize("n", [254, 300])
def test_a_continuation_of_n_live_values_runs_many_times(n):
    fn = _many_locals_with_a_break(n)
    counter = CompileCounter()
    compiled = framejit.compile(fn, backend=counter)
    for call in range(CALLS):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)
    assert counter.frame_count == 2  # the graph before the break and the continuation's


def _total(*ts, alpha):
    return sum(ts) * alpha


def make_partial(x):
    return functools.partial(_total, *[x + i for i in range(300)], alpha=2)


def test_a_rebuilt_call_of_many_arguments_and_a_keyword():
    """Code that rebuilds a value calls its maker with every part: a functools.partial made in the trace with 300
    arguments and a keyword goes as a tuple and a dict."""
    compiled = framejit.compile(make_partial, backend="eager")
    for call in range(CALLS):
        x = torch.randn(3)
        got, want = compiled(x), make_partial(x)
        assert got.func is _total and got.keywords == {"alpha": 2} and len(got.args) == 300
        assert torch.equal(got(), want()), call
