"""Numbers whose type derives from a builtin one (numpy scalars, IntEnum members) reach graphs as the builtin
number: a graph's code writes its constants by repr(), and `np.float64(8.0)` names a module it does not import."""

import enum

import numpy as np
import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


class Axis(enum.IntEnum):
    LAST = -1


def test_numpy_scalars_and_int_enums_passed_in_are_plain_numbers_in_the_graph():
    def fn(x, scale, shift):
        return x * scale + shift, x.sum(Axis.LAST)

    x = torch.randn(2, 3)
    got, want = run_fullgraph(fn, x, np.float64(8.0), np.float32(0.5)), fn(x, np.float64(8.0), np.float32(0.5))
    assert all(same(a, b) and a.dtype == b.dtype for a, b in zip(got, want))


def test_a_numpy_scalar_computed_before_a_graph_break_reaches_the_continuations_graph():
    def fn(x):
        scale = np.sqrt(64.0)  # numpy runs as Python: the graph breaks here
        return x * scale + np.int64(3)

    x = torch.randn(3)
    cnt = CompileCounter()
    got = framejit.optimize(cnt)(fn)(x)
    assert same(got, fn(x)) and got.dtype == fn(x).dtype and cnt.frame_count >= 1


def test_a_numpy_function_of_constants_is_computed_now():
    def fn(x, width):
        return x * np.sqrt(width) + np.log(np.float32(2.0))  # a model scaling by sqrt(d_model)

    x = torch.randn(3)
    got, want = run_fullgraph(fn, x, 64), fn(x, 64)
    assert same(got, want) and got.dtype == want.dtype


def test_a_numpy_function_giving_an_array_is_made_in_the_graph():
    def fn(x):  # through torch._numpy (tests/python/test_numpy_on_tensors.py)
        return x + torch.from_numpy(np.sqrt([4.0, 9.0, 16.0])).float()

    x = torch.randn(3)
    explained = framejit.explain(fn)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    assert same(framejit.optimize("eager")(fn)(x), fn(x))


class Dim(enum.IntEnum):
    LAST = -1


SCALE = np.sqrt(32.0)  # a numpy.float64, as models compute embedding scales


@pytest.mark.parametrize("scale", [SCALE, np.float64(0.5), 2.0])
def test_numpy_scalar_arguments(scale):
    def fn(x, s):
        x = x * s
        x *= SCALE
        return x.sum(Dim.LAST) + torch.full((), s)

    x = torch.randn(2, 3)
    torch.testing.assert_close(run_fullgraph(fn, x, scale), fn(x, scale))


def test_a_torch_function_of_numbers_alone_is_a_tensor_the_graph_makes():
    # torch.div on two ints makes a 0-d tensor (eager does too); used as a size, its value is known at trace time
    def fn(x, seq_len, window):
        chunks = torch.div(seq_len, window, rounding_mode="trunc") - 1
        return x.new_zeros((2, chunks + 1, window)) + x.sum(), chunks, torch.true_divide(7, 2) * x

    cnt = CompileCounter()
    x = torch.randn(3)
    got, want = framejit.optimize(cnt)(fn)(x, 8, 2), fn(x, 8, 2)
    assert same(got, want) and got[1].dtype == want[1].dtype == torch.int64
    assert cnt.frame_count == 1


def test_random_torch_functions_of_numbers_alone_stay_out_of_the_graph():
    def fn(x):
        return x + torch.normal(0.0, 1.0, (3,), generator=None).mul(0), torch.manual_seed(0) is not None

    cnt = CompileCounter()
    got = framejit.optimize(cnt)(fn)(torch.ones(3))
    assert same(got[0], torch.ones(3)) and got[1] is True
