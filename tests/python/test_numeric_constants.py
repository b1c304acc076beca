"""Numbers whose type derives from a builtin one (numpy scalars, IntEnum members) reach graphs as the builtin
number: a graph's code writes its constants by repr(), and `np.float64(8.0)` names a module it does not import."""
import enum

import numpy as np
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
