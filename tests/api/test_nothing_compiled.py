"""A compile that compiles nothing in the frame it was given says so (NothingCompiledWarning),
and raises under fullgraph=True where framejit will not capture that frame at all."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import framejit
from framejit.exc import NothingCompiledWarning, Unsupported


def test_a_frame_framejit_will_not_capture_warns_and_still_runs():
    weight = torch.randn(4, 4)
    fill = framejit.compile(nn.init.zeros_, backend="eager")  # torch internals: run as Python
    with pytest.warns(NothingCompiledWarning, match=r"captures nothing in zeros_.* torch internals") as record:
        fill(weight)
    assert record[0].filename == __file__  # it points at the user's call
    assert torch.equal(weight, torch.zeros(4, 4))  # it ran, as Python
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fill(weight)  # said once, on the first call


def test_under_fullgraph_it_is_an_error():
    with pytest.raises(Unsupported, match="fullgraph=True: framejit captures nothing"):
        framejit.compile(nn.init.zeros_, backend="eager", fullgraph=True)(torch.randn(2))


def test_a_first_call_that_compiles_no_graph_warns():
    def no_tensor_ops(x):
        return x

    with pytest.warns(NothingCompiledWarning, match="compiled no graph in the first call of .*no_tensor_ops"):
        framejit.compile(no_tensor_ops, backend="eager")(torch.randn(3))


@pytest.mark.parametrize(
    "make",
    [
        lambda: framejit.compile(lambda x: x.sin() + 1, backend="eager"),
        lambda: framejit.compile(nn.Linear(3, 3), backend="eager"),
    ],
)
def test_a_compile_that_compiles_says_nothing(make):
    compiled = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(torch.randn(3))
