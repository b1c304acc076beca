"""nn.TransformerEncoder traced whole (its fast-path checks included), module listings and
is_compiling() at trace time."""

import copy

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import square_mean_loss


# ---------------------------------------------------------------------------------------------
# nn.TransformerEncoder: its fast-path checks (torch.backends.mha, autocast, hooks over self.modules(),
# __torch_function__) are traced, so inference and training are each one graph


def _encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), torch.randn(2, 5, 16)


def test_transformer_encoder_inference_is_one_graph_without_breaks():
    model, x = _encoder()
    model.eval()
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    with torch.no_grad():
        assert same(opt(x), model(x), tol=1e-5)
    assert cnt.frame_count == 1


def test_transformer_encoder_training_is_one_graph_with_eager_gradients():
    model, x = _encoder()
    ref_model = copy.deepcopy(model)
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    square_mean_loss(opt(x)).backward()
    square_mean_loss(ref_model(x)).backward()
    assert cnt.frame_count == 1
    for (name, p), p_ref in zip(model.named_parameters(), ref_model.parameters()):
        assert same(p.grad, p_ref.grad, tol=1e-4), name


def test_mha_fastpath_switch_is_a_guarded_global():
    model, x = _encoder()
    model.eval()
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt)
    with torch.no_grad():
        opt(x)
        try:
            torch.backends.mha.set_fastpath_enabled(False)
            assert same(opt(x), model(x), tol=1e-5)
            assert cnt.frame_count == 2, "switching the fast path off must recompile"
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        opt(x)
    assert cnt.frame_count == 2


class CountsItsLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4)))
        self.shared = self.body[0]  # reachable twice: listed once, as by nn.Module.modules()

    def forward(self, x):
        n_linear = sum(isinstance(m, nn.Linear) for m in self.modules())
        names = [name for name, _ in self.named_modules()]
        return self.body(x) * n_linear + len(names)


def test_modules_and_named_modules_are_listed_at_trace_time_and_guarded():
    model = CountsItsLayers()
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    x = torch.randn(2, 4)
    assert same(opt(x), model(x))
    assert cnt.frame_count == 1
    model.body.append(nn.Linear(4, 4))  # one more module: the listing changes
    assert same(opt(x), model(x))
    assert cnt.frame_count == 2


def _branches_on_is_compiling(x):
    if torch.compiler.is_compiling() and torch._utils.is_compiling():
        return x + 1
    return x - 1


def test_is_compiling_is_true_while_captured_as_under_torch_compile():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_branches_on_is_compiling)
    x = torch.randn(3)
    assert same(f(x), x + 1)
    assert same(_branches_on_is_compiling(x), x - 1)  # never set outside the trace
    assert cnt.frame_count == 1
