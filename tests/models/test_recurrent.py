"""nn.LSTM / nn.GRU, whose flat weights are kept through weakrefs, and other model-code idioms:
parameters() and children() as iterators, stateless modules made per call, non-reentrant
checkpoint, tied weights."""

import copy

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same


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
