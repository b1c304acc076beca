"""Modules that change their own state in forward (an int counter, a cached tensor, a list of steps, a buffer
updated in place) show the same state after every call as in eager; lazy modules initialise on the first call."""

import copy

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same


class SelfMutating(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.counter = 0
        self.cache = None
        self.steps = []
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x):
        self.counter += 1
        y = self.lin(x) + self.buf
        self.cache = y.detach()
        self.steps.append(x.shape[0])
        self.buf.add_(1)
        return y * self.counter


def test_self_mutations_in_forward_match_eager_on_every_call():
    eager = SelfMutating()
    compiled_mod = copy.deepcopy(eager)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(compiled_mod)
    for _ in range(4):
        x = torch.randn(2, 4)
        assert same(compiled(x), eager(x))
        assert compiled_mod.counter == eager.counter
        assert compiled_mod.steps == eager.steps
        assert same(compiled_mod.cache, eager.cache)
        assert same(compiled_mod.buf, eager.buf)
        assert not compiled_mod.cache.requires_grad


def test_self_mutations_in_one_graph_under_fullgraph():
    eager = SelfMutating()
    compiled_mod = copy.deepcopy(eager)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(compiled_mod)
    x = torch.randn(2, 4)
    assert same(compiled(x), eager(x))
    assert cnt.frame_count == 1
    assert (compiled_mod.counter, compiled_mod.steps) == (eager.counter, eager.steps)


class CounterInPlaceOnly(nn.Module):
    """A forward whose only tensor work is an in-place buffer update next to a Python counter."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.seen = 0

    def forward(self, x):
        self.calls.add_(1)
        self.seen += x.shape[0]
        return x


def test_in_place_buffer_update_and_counter_without_other_ops():
    eager = CounterInPlaceOnly()
    compiled_mod = copy.deepcopy(eager)
    compiled = framejit.optimize(CompileCounter())(compiled_mod)
    for n in (1, 2, 3):
        x = torch.randn(n, 2)
        assert same(compiled(x), eager(x))
    assert compiled_mod.seen == eager.seen and same(compiled_mod.calls, eager.calls)


def _lazy_models():
    torch.manual_seed(0)
    return {
        "linear": (nn.Sequential(nn.LazyLinear(5), nn.ReLU()), torch.randn(3, 7)),
        "conv": (nn.Sequential(nn.LazyConv2d(4, 3), nn.ReLU()), torch.randn(2, 3, 8, 8)),
    }


def test_lazy_modules_initialise_on_the_first_compiled_call():
    """The first call runs the lazy initialisation (it need not be one graph); the result and the parameters
    then equal eager's, and later calls are one graph each."""
    for name, (model, x) in _lazy_models().items():
        eager = copy.deepcopy(model)
        torch.manual_seed(1)
        want = eager(x)
        cnt = CompileCounter()
        compiled = framejit.optimize(cnt)(model)
        torch.manual_seed(1)
        got = compiled(x)
        assert same(got, want), name
        for (pn, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
            assert not isinstance(p, nn.parameter.UninitializedParameter), (name, pn)
            assert same(p, q), (name, pn)
        cnt.clear()
        for _ in range(2):
            assert same(compiled(x), eager(x)), name
        assert cnt.frame_count <= 1, name
        fresh = CompileCounter()
        assert same(framejit.optimize(fresh, nopython=True)(model)(x), eager(x))
        assert fresh.frame_count == 1


class MutatingAcrossABreak(nn.Module):
    """Self-mutations before and after a print (a graph break), and a cached tensor read on the next call."""

    def __init__(self):
        super().__init__()
        self.counter = 0
        self.cache = None
        self.steps = []
        self.register_buffer("buf", torch.zeros(2))

    def forward(self, x):
        self.counter += 1
        prev = self.cache if self.cache is not None else torch.zeros_like(x)
        self.cache = x.detach() * 2
        print("step", self.counter)
        self.steps.append(self.counter)
        self.buf.add_(1)
        return x + prev + self.counter + self.buf


def test_self_mutations_across_a_graph_break_match_eager(capsys):
    eager = MutatingAcrossABreak()
    compiled_mod = copy.deepcopy(eager)
    compiled = framejit.optimize(CompileCounter())(compiled_mod)
    for _ in range(4):
        x = torch.randn(2)
        assert same(compiled(x), eager(x))
        assert (compiled_mod.counter, compiled_mod.steps) == (eager.counter, eager.steps)
        assert same(compiled_mod.cache, eager.cache) and same(compiled_mod.buf, eager.buf)
    assert capsys.readouterr().out == "".join(f"step {i}\nstep {i}\n" for i in range(1, 5))


class WindowSetter(nn.Module):
    """Sets its window to the input's length where that is smaller, on every call (as Swin's blocks do)."""

    def __init__(self, window=7):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.window = window
        self.mode = "fixed"

    def forward(self, x):
        if x.shape[0] <= self.window:
            self.window = x.shape[0]
        self.mode = "fixed"
        return self.lin(x) * self.window


def test_writing_the_value_an_attribute_holds_is_guarded_not_replayed():
    model = WindowSetter()
    x = torch.randn(3, 4)
    model(x)  # window is 3 from now on
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = framejit.optimize(backend, nopython=True)(model)
    reference = copy.deepcopy(model)
    assert same(compiled(x), reference(x)) and model.window == reference.window == 3
    model.window = reference.window = 9  # the guard on the value it held: the write is made again
    assert same(compiled(x), reference(x)) and model.window == reference.window == 3
    assert model.mode == "fixed" and len(graphs) == 2


def test_a_write_that_changes_the_value_is_replayed():
    model, reference = WindowSetter(), WindowSetter()
    reference.load_state_dict(model.state_dict())
    compiled = framejit.optimize("eager")(model)
    x = torch.randn(3, 4)
    assert same(compiled(x), reference(x)) and model.window == reference.window == 3
