"""A user's TorchDispatchMode (FlopCounterMode, a logging mode) sees eager's ops: under one, frames run as Python,
as under torch.compile, and framejit says so once; outside it the same code compiles as before."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import framejit
from framejit.exc import FramejitWarning, NothingCompiledWarning
from framejit.testing import CompileCounter


class LogOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_a_mode_sees_eagers_ops_and_framejit_says_it_runs_as_python():
    m, x = model(), torch.randn(2, 8)
    with LogOps() as eager:
        want = m(x)
    counter = CompileCounter()
    compiled = framejit.optimize(counter)(m)
    with pytest.warns(FramejitWarning, match=r"TorchDispatchMode \(LogOps\) is active.*Sequential.forward") as said:
        with LogOps() as seen:
            got = compiled(x)
    assert not any(issubclass(w.category, NothingCompiledWarning) for w in said)  # said once, not twice
    torch.testing.assert_close(got, want)
    assert seen.ops == eager.ops and counter.frame_count == 0  # no fake op reached the mode either
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per compiled function
        with LogOps():
            compiled(x)
    torch.testing.assert_close(compiled(x), want)  # and outside the mode it compiles
    assert counter.frame_count == 1


def test_flop_counts_of_a_compiled_model_are_eagers():
    m, x = model(), torch.randn(2, 8)
    with FlopCounterMode(display=False) as eager:
        m(x)
    compiled = framejit.compile(m, backend="eager")
    compiled(x)  # compiled outside the mode first: its entry is not used under the mode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FramejitWarning)
        with FlopCounterMode(display=False) as counted:
            compiled(x)
    assert counted.get_total_flops() == eager.get_total_flops() > 0


def test_a_torch_nn_module_compiles_after_its_forward_ran_as_python_under_framejit():
    """nn.Linear's forward, met as a frame of torch's own (run as Python) while framejit was on, is still captured
    when an nn.Linear itself is compiled."""
    linear, x = nn.Linear(8, 8), torch.randn(2, 8)
    with LogOps():
        framejit.compile(model(), backend="eager")(x)  # Linear.forward frames run under the callback
    counter = CompileCounter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NothingCompiledWarning)
        torch.testing.assert_close(framejit.optimize(counter)(linear)(x), linear(x))
    assert counter.frame_count == 1


def test_explain_of_a_torch_nn_module_captures_its_forward():
    report = framejit.explain(model())(torch.randn(2, 8))
    assert (report.graph_count, report.graph_break_count, report.op_count) == (1, 0, 3)
