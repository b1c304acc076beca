"""Whole models captured as one graph each (fullgraph=True), differential against eager:
outputs, gradients of parameters and inputs, and module state (BatchNorm running stats)."""
import copy
import math
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend, EagerAndRecordGraphs, same


# ---------------------------------------------------------------------------------------------
# models


class MLP(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)
        self.drop = nn.Dropout(0.5)
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.drop(self.act(self.fc1(x)))
        x = self.drop(self.act(self.fc2(x)))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self, n_classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = self.gap(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


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
    return MLP().eval(), (torch.randn(4, 16),)


def _cnn_eval():
    m = SmallCNN()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 3, 16, 16),)


def _cnn_train():
    m = SmallCNN()
    _randomize_bn(m)
    return m.train(), (torch.randn(4, 3, 16, 16),)


def _encoder():
    return EncoderBlock().eval(), (torch.randn(2, 7, 32),)


def _tree():
    return ModuleTree(), (torch.randn(5, 12),)


def _randomize_bn(m):
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)


MODELS = {"mlp": _mlp, "cnn_eval": _cnn_eval, "cnn_train": _cnn_train, "encoder": _encoder, "tree": _tree}

BACKENDS = ["counter", "counter_eager", "eager"]


def _make_backend(kind):
    if kind == "counter":
        return CompileCounter()
    if kind == "counter_eager":
        return CompileCounterWithBackend("eager")
    return "eager"


def _buffers_equal(a: nn.Module, b: nn.Module):
    ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
    assert ba.keys() == bb.keys()
    for name in ba:
        assert same(ba[name], bb[name]), f"buffer {name} differs after the call"


def _grads(model, x):
    return [p.grad for p in model.parameters()], x.grad


def _loss(out):
    flat = torch.utils._pytree.tree_leaves(out)
    return sum((t.float() ** 2).mean() for t in flat if isinstance(t, torch.Tensor))


# ---------------------------------------------------------------------------------------------
# one graph, eager's results, eager's gradients


@pytest.mark.parametrize("backend_kind", BACKENDS)
@pytest.mark.parametrize("model_name", list(MODELS))
def test_model_one_graph_matches_eager(model_name, backend_kind):
    model, inputs = MODELS[model_name]()
    ref_model = copy.deepcopy(model)
    backend = _make_backend(backend_kind)
    opt = framejit.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        expected = ref_model(*inputs)
        actual = opt(*inputs)
    assert same(actual, expected)
    _buffers_equal(model, ref_model)
    if isinstance(backend, CompileCounter):
        assert backend.frame_count == 1
        assert backend.op_count > 0
    # a second call with new values of the same shape reuses the graph
    inputs2 = tuple(torch.randn_like(t) for t in inputs)
    with torch.no_grad():
        expected = ref_model(*inputs2)
        actual = opt(*inputs2)
    assert same(actual, expected)
    _buffers_equal(model, ref_model)
    if isinstance(backend, CompileCounter):
        assert backend.frame_count == 1


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
    _loss(out_ref).backward()
    _loss(out_opt).backward()

    assert cnt.frame_count == 1
    pg_ref, xg_ref = _grads(ref_model, x_ref)
    pg_opt, xg_opt = _grads(model, x_opt)
    assert xg_opt is not None and same(xg_opt, xg_ref, tol=1e-4)
    for (name, _), g_ref, g_opt in zip(model.named_parameters(), pg_ref, pg_opt):
        assert (g_ref is None) == (g_opt is None), name
        if g_ref is not None:
            assert same(g_opt, g_ref, tol=1e-4), f"grad of {name} differs"
    _buffers_equal(model, ref_model)


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
            assert torch.equal(bn.num_batches_tracked, bn_ref.num_batches_tracked), \
                f"{name}.num_batches_tracked step {step}"
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


# ---------------------------------------------------------------------------------------------
# the seeds' examples


def _call_targets(gm):
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def _op_names(gm):
    """A readable op name per node: call_module nodes become their module's class name."""
    names = []
    for n in gm.graph.nodes:
        if n.op == "call_module":
            names.append(type(gm.get_submodule(n.target)).__name__.lower())
        elif n.op in ("call_function", "call_method"):
            names.append(getattr(n.target, "__name__", str(n.target)).lower())
    return names


def test_seed_cos_sin_add_graph():
    cnt = CompileCounter()

    @framejit.optimize(cnt)
    def fn(x, y):
        a = torch.cos(x)
        b = torch.sin(y)
        return a + b

    x, y = torch.randn(10), torch.randn(10)
    assert same(fn(x, y), torch.cos(x) + torch.sin(y))
    assert cnt.frame_count == 1
    (gm,) = cnt.graphs
    assert _call_targets(gm) == [torch.cos, torch.sin, operator.add]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2


class MockModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(torch.cos(x))


@pytest.mark.parametrize("form", ["optimize", "compile"])
def test_seed_mock_module_cos_then_relu(form):
    cnt = CompileCounter()
    mod = MockModule()
    opt = framejit.optimize(cnt)(mod) if form == "optimize" else framejit.compile(mod, backend=cnt)
    x = torch.randn(10)
    assert same(opt(x), mod(x))
    assert cnt.frame_count == 1
    names = _op_names(cnt.graphs[0])
    assert len(names) == 2, names
    assert names[0] == "cos"
    assert "relu" in names[1]


class LinearRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 2)

    def forward(self, x):
        return torch.nn.functional.relu(self.lin(x))


@pytest.mark.parametrize("backend_kind", BACKENDS)
def test_seed_linear_relu_fullgraph(backend_kind):
    mod = LinearRelu()
    backend = _make_backend(backend_kind)
    opt = framejit.compile(mod, fullgraph=True, backend=backend)
    inp = torch.randn(8, 10)
    out = opt(inp)
    assert same(out, mod(inp))
    assert out.requires_grad  # autograd flows through the compiled graph
    if isinstance(backend, CompileCounter):
        assert backend.frame_count == 1
        assert backend.op_count >= 2


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
        _buffers_equal(model, ref_model)

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
    _loss(opt(x)).backward()
    _loss(ref_model(x)).backward()
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


# ---------------------------------------------------------------------------------------------
# nn.LSTM / nn.GRU keep their flat weights through weakrefs: calling one is a guarded read


class RecurrentHead(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.rnn = kind(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h, _ = self.rnn(self.pre(x).relu())
        return self.head(h[:, -1])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
def test_recurrent_module_is_one_graph_with_eager_gradients(kind):
    torch.manual_seed(0)
    model = RecurrentHead(kind)
    ref_model = copy.deepcopy(model)
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt, fullgraph=True)
    x = torch.randn(2, 5, 8)
    out, want = opt(x), ref_model(x)
    assert same(out, want, tol=1e-5)
    out.sum().backward()
    want.sum().backward()
    assert cnt.frame_count == 1
    for (name, p), p_ref in zip(model.named_parameters(), ref_model.parameters()):
        assert same(p.grad, p_ref.grad, tol=1e-4), name


def test_replacing_a_recurrent_weight_recompiles_and_uses_it():
    torch.manual_seed(0)
    model = RecurrentHead(nn.GRU)
    graph_calls = []

    def counting_backend(gm, example_inputs):
        def run(*args):
            graph_calls.append(1)
            return gm.forward(*args)
        return run

    opt = framejit.compile(model.rnn, backend=counting_backend)
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        opt(x)
        # the stale weakrefs no longer match: retraced, the rebuilt _flat_weight_refs replayed
        model.rnn.load_state_dict({k: torch.randn_like(v) for k, v in model.rnn.state_dict().items()}, assign=True)
        for _ in range(3):
            assert same(opt(x), model.rnn(x), tol=1e-5)
        model.rnn.weight_ih_l0 = nn.Parameter(torch.randn_like(model.rnn.weight_ih_l0))
        assert same(opt(x), model.rnn(x), tol=1e-5)
    assert len(graph_calls) == 5  # every call ran a graph


class UsesItsParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        dtype = next(self.parameters()).dtype  # what transformers' PreTrainedModel.dtype does
        n = sum(p.numel() for p in self.parameters())
        return self.lin(x.to(dtype)) + n + len(list(self.children()))


def test_parameters_and_children_are_iterators():
    model = UsesItsParameters()
    cnt = CompileCounter()
    x = torch.randn(2, 4)
    assert same(framejit.compile(model, backend=cnt, fullgraph=True)(x), model(x))
    assert cnt.frame_count == 1


class LossMadeInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, y):
        loss_fct = nn.CrossEntropyLoss()  # a fresh module every call (a graph break: constructing it)
        return loss_fct(self.lin(x), y)


def test_a_stateless_module_made_in_every_call_does_not_recompile():
    model = LossMadeInForward()
    cnt = CompileCounter()
    opt = framejit.compile(model, backend=cnt)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    for _ in range(3):
        assert same(opt(x, y), model(x, y))
    assert cnt.frame_count == 1  # guarded by type and attributes, not identity


class CheckpointedInner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False).sum()

    def inner(self, x):
        return torch.relu(self.lin(x))


def test_non_reentrant_checkpoint_counts_no_tensors_of_the_trace():
    import torch.utils.checkpoint  # noqa: F401
    torch.manual_seed(0)
    model = CheckpointedInner()
    ref = copy.deepcopy(model)
    opt = framejit.compile(model, backend=CompileCounter())
    x = torch.randn(2, 4)
    opt(x).backward()  # the first call compiles inside checkpoint's saved-tensor hooks
    ref(x).backward()
    assert same(model.lin.weight.grad, ref.lin.weight.grad)


class TiedWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied: nn.Module.parameters() lists it once

    def forward(self, idx):
        return self.head(self.embed(idx)) * sum(p.numel() for p in self.parameters())


def test_tied_weights_are_listed_once_as_by_parameters():
    model = TiedWeights()
    idx = torch.tensor([[1, 2, 3]])
    assert same(framejit.compile(model, backend=CompileCounter(), fullgraph=True)(idx), model(idx))
