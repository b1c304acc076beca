"""Graph breaks: regressions.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import torch

import framejit
from framejit.testing import CompileCounter, same


# ---------------------------------------------------------------------------------------------
# regressions
# ---------------------------------------------------------------------------------------------


def _brk_for_regressions():
    return None


framejit.disallow_in_graph(_brk_for_regressions)


class _SuperBase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class _SuperChild(_SuperBase):
    def forward(self, x):
        y = x.sin()
        _brk_for_regressions()
        return super().forward(y) + 1  # zero-argument super() in the continuation needs `self` first


def test_zero_argument_super_after_a_break():
    model = _SuperChild()
    x = torch.randn(2, 4)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(model)
    assert same(compiled(x), model(x))
    assert same(compiled(x), model(x))
    assert cnt.frame_count == 2  # before the break, and the continuation (self and a module live across it)
