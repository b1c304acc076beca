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


class _Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.linear(x))


@framejit.disable(recursive=False)
def _call(module, x):
    return module(x)


class _Hands(nn.Module):
    """A wrapper whose own frame does no tensor op; its module's forward is a frame of its own, captured (as DDP's
    forward calls its module)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _Inner()

    def forward(self, x):
        return _call(self.inner, x)


def test_a_first_call_that_runs_a_graph_compiled_for_another_instance_says_nothing():
    compiled = []

    def counting(gm, example_inputs):
        compiled.append(gm)
        return gm.forward

    x = torch.randn(2, 4)
    framejit.compile(_Hands(), backend=counting)(x)
    assert len(compiled) == 1
    second = _Hands()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NothingCompiledWarning)
        out = framejit.compile(second, backend=counting)(x)  # the first instance's graph runs on its weights
    assert len(compiled) == 1
    torch.testing.assert_close(out, second(x))
    with pytest.warns(NothingCompiledWarning, match="compiled no graph in the first call"):
        framejit.compile(lambda t: t, backend=counting)(x)  # nothing compiled and nothing run: still said
