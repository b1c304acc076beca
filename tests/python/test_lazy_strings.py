"""A string formatted from a tensor (an error message built before a check) is kept unformatted in the trace:
passing it along costs nothing, reading it is data-dependent, and returning it formats it after the graph, from
the graph's outputs. torch._check_tensor_all becomes a check the graph runs."""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.helpers import run_fullgraph


def check(cond, msg):
    if torch.compiler.is_compiling():
        torch._check_tensor_all(cond)  # the message is only for eager
    elif not cond.all():
        raise RuntimeError(msg)


def fn(x):
    total = (x > -10).sum()
    check(x > -10, f"all of {x.shape[0]} must exceed -10, got {total} ok")
    return x * 2


def test_a_message_with_a_tensor_in_it_is_never_formatted():
    x = torch.randn(5)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_the_check_runs_in_the_graph():
    compiled = framejit.optimize(CompileCounter(), nopython=True)(fn)
    compiled(torch.randn(5))
    with pytest.raises(RuntimeError):
        compiled(torch.full((5,), -20.0))


def test_a_returned_message_is_formatted_after_the_graph():
    def describe(x):
        n = x.sum()
        return x + 1, f"sum={n:>12.4f} max={x.max()}!"

    x = torch.randn(4)
    got, want = run_fullgraph(describe, x), describe(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


def test_reading_the_text_breaks_the_graph_and_matches_eager():
    def fn(x):
        text = f"{x.sum()}"
        return x + len(text)

    x = torch.randn(3)
    torch.testing.assert_close(framejit.optimize(CompileCounter())(fn)(x), fn(x))
