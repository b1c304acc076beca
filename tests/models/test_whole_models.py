"""Whole models captured as one graph each (fullgraph=True), differential against eager:
outputs, gradients of parameters and inputs, and module state (BatchNorm running stats)."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import framejit
from framejit.testing import CompileCounter, EagerAndRecordGraphs, same

from tests.helpers import (
    BACKEND_KINDS,
    DropoutMLP,
    SmallCNN,
    assert_buffers_equal,
    make_backend,
    randomize_bn_stats_and_affine,
    square_mean_loss,
)


# ---------------------------------------------------------------------------------------------
# models


class SelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(x).reshape(b, t, self.n_heads, self.d_head).transpose(1, 2)
        k = self.k(x).reshape(b, t, self.n_heads, self.d_head).transpose(1, 2)
        v = self.v(x).reshape(b, t, self.n_heads, self.d_head).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        attn = self.drop(torch.softmax(scores, dim=-1))
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        return self.out(y)


class EncoderBlock(nn.Module):
    def __init__(self, d_model=32, n_heads=4, d_ff=64):
        super().__init__()
        self.attn = SelfAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        h = F.gelu(self.ff1(self.ln2(x)))
        x = x + self.drop(self.ff2(h))
        return x


class ModuleTree(nn.Module):
    def __init__(self, d=12):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, d))
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(d, 4), "b": nn.Sequential(nn.Linear(d, 4), nn.Sigmoid())})
        self.acts = nn.ModuleDict({"relu": nn.ReLU(), "gelu": nn.GELU()})

    def forward(self, x):
        x = self.stem(x)
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        x = self.acts["gelu"](x)
        outs = {}
        for name, head in self.heads.items():
            outs[name] = head(x)
        return outs["a"] * 2 + self.acts["relu"](outs["b"]), outs


def _mlp():
    return DropoutMLP().eval(), (torch.randn(4, 16),)


def _cnn_eval():
    m = SmallCNN()
    randomize_bn_stats_and_affine(m)
    return m.eval(), (torch.randn(2, 3, 16, 16),)


def _cnn_train():
    m = SmallCNN()
    randomize_bn_stats_and_affine(m)
    return m.train(), (torch.randn(4, 3, 16, 16),)


def _encoder_block():
    return EncoderBlock().eval(), (torch.randn(2, 7, 32),)


def _tree():
    return ModuleTree(), (torch.randn(5, 12),)


MODELS = {"mlp": _mlp, "cnn_eval": _cnn_eval, "cnn_train": _cnn_train, "encoder": _encoder_block, "tree": _tree}


def _grads(model, x):
    return [p.grad for p in model.parameters()], x.grad


# ---------------------------------------------------------------------------------------------
# one graph, eager's results, eager's gradients


@pytest.mark.parametrize("backend_kind", BACKEND_KINDS)
@pytest.mark.parametrize("model_name", list(MODELS))
def test_model_one_graph_matches_eager(model_name, backend_kind):
    model, inputs = MODELS[model_name]()
    ref_model = copy.deepcopy(model)
    backend = make_backend(backend_kind)
    opt = framejit.compile(model, backend=backend, fullgraph=True)
    for call in ("first", "second"):
        if call == "second":  # a second call with new values of the same shape reuses the graph
            inputs = tuple(torch.randn_like(t) for t in inputs)
        with torch.no_grad():
            expected = ref_model(*inputs)
            actual = opt(*inputs)
        assert same(actual, expected), f"{call} call"
        assert_buffers_equal(model, ref_model)
        if isinstance(backend, CompileCounter):
            assert backend.frame_count == 1
            assert backend.op_count > 0


@pytest.mark.parametrize("model_name", list(MODELS))
def test_model_gradients_match_eager(model_name):
    model, inputs = MODELS[model_name]()
    ref_model = copy.deepcopy(model)
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    x_ref = inputs[0].clone().requires_grad_(True)
    x_opt = inputs[0].clone().requires_grad_(True)

    out_ref = ref_model(x_ref)
    out_opt = opt(x_opt)
    assert same(out_opt, out_ref)
    square_mean_loss(out_ref).backward()
    square_mean_loss(out_opt).backward()

    assert cnt.frame_count == 1
    pg_ref, xg_ref = _grads(ref_model, x_ref)
    pg_opt, xg_opt = _grads(model, x_opt)
    assert xg_opt is not None and same(xg_opt, xg_ref, tol=1e-4)
    for (name, _), g_ref, g_opt in zip(model.named_parameters(), pg_ref, pg_opt):
        assert (g_ref is None) == (g_opt is None), name
        if g_ref is not None:
            assert same(g_opt, g_ref, tol=1e-4), f"grad of {name} differs"
    assert_buffers_equal(model, ref_model)


def test_cnn_train_mode_updates_running_stats_like_eager():
    model, (x,) = _cnn_train()
    ref_model = copy.deepcopy(model)
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    for step in range(3):
        xi = x + step
        assert same(opt(xi), ref_model(xi))
        for name in ("bn1", "bn2"):
            bn, bn_ref = getattr(model, name), getattr(ref_model, name)
            assert same(bn.running_mean, bn_ref.running_mean), f"{name}.running_mean step {step}"
            assert same(bn.running_var, bn_ref.running_var), f"{name}.running_var step {step}"
            assert torch.equal(bn.num_batches_tracked, bn_ref.num_batches_tracked), (
                f"{name}.num_batches_tracked step {step}"
            )
    assert int(model.bn1.num_batches_tracked) == 3
    assert cnt.frame_count == 1


def test_model_tree_returns_nested_dict_like_eager():
    model, (x,) = _tree()
    ref_model = copy.deepcopy(model)
    rec = EagerAndRecordGraphs()
    opt = framejit.compile(model, backend=rec, fullgraph=True)
    out, outs = opt(x)
    ref_out, ref_outs = ref_model(x)
    assert isinstance(outs, dict) and list(outs) == list(ref_outs) == ["a", "b"]
    assert same((out, outs), (ref_out, ref_outs))
    assert len(rec.graphs) == 1
