"""Scalars of a subclass of a Python scalar (numpy.float64, an IntEnum) used as graph-op arguments: the graph's
code gets the plain scalar they equal (FX writes arguments with repr, and `np.float64(2.0)` names numpy)."""
import enum

import numpy as np
import pytest
import torch

from tests.helpers import run_fullgraph


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
