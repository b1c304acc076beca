"""Switching a model between train() and eval() recompiles, and both modes stay cached and correct."""

import copy

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import assert_buffers_equal


# ---------------------------------------------------------------------------------------------
# train()/eval() switching


class DropBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.lin(x)))


def test_train_eval_switch_recompiles_and_stays_correct():
    model = DropBN()
    ref_model = copy.deepcopy(model)
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    x = torch.randn(8, 6)

    def check(mode):
        model.train(mode)
        ref_model.train(mode)
        torch.manual_seed(123)
        expected = ref_model(x)
        torch.manual_seed(123)
        actual = opt(x)
        assert same(actual, expected), f"mode training={mode}"
        assert_buffers_equal(model, ref_model)

    check(False)
    assert cnt.frame_count == 1
    check(True)
    assert cnt.frame_count == 2, "switching to train() must recompile"
    check(False)
    check(True)
    assert cnt.frame_count == 2, "both modes are cached"
    # eval output is deterministic, train output depends on dropout
    model.eval()
    assert torch.equal(opt(x), opt(x))
