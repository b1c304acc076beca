"""`framejit.compile(opt.step)`: torch's optimizers are traced like user code, one graph per step as under
torch.compile (the step count kept a tensor, the state made for real on the first step), with every parameter
and state tensor equal to eager's after many steps."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter

# (optimizer, its options, graphs torch.compile makes of the step over these steps)
OPTIMIZERS = [
    ("SGD", {}, 1),
    ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, 2),  # the first step makes the buffers
    ("Adam", {}, 1),
    ("Adam", {"amsgrad": True}, 1),
    ("AdamW", {}, 1),
    ("AdamW", {"foreach": True}, 1),
    ("RMSprop", {"momentum": 0.5}, 1),
    ("Adagrad", {}, 1),
    ("Adamax", {}, 1),
    ("NAdam", {}, 1),
    ("RAdam", {}, 1),
    ("Adadelta", {}, 1),
    ("ASGD", {}, 1),
    ("Rprop", {}, 1),
]
STEPS = 12
# the traced step computes its step size in float32 tensors (the capturable path), eager in Python floats: the
# same tolerance torch.compile's compiled step needs (they agree with each other to 1e-7; RAdam drifts most)
CLOSE = {"rtol": 1e-4, "atol": 5e-5}
LOOSER = {"RAdam": {"rtol": 1e-3, "atol": 2e-4}}  # its rectification term amplifies that difference


def _model_and_optimizer(name, options):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    return model, getattr(torch.optim, name)(model.parameters(), lr=0.01, **options)


def _train(model, opt, step, steps=STEPS):
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        model(x + i).pow(2).mean().backward()
        step()


def _state_tensors(opt):
    return [v for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize(("name", "options", "graphs"), OPTIMIZERS, ids=lambda v: str(v) if v else "")
def test_compiled_step_equals_eager_in_one_graph(name, options, graphs):
    eager_model, eager_opt = _model_and_optimizer(name, options)
    model, opt = _model_and_optimizer(name, options)
    counter = CompileCounter()
    _train(eager_model, eager_opt, eager_opt.step)
    _train(model, opt, framejit.compile(opt.step, backend=counter))
    assert counter.frame_count == graphs  # no recompile over the steps
    close = LOOSER.get(name, CLOSE)
    for got, expected in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(got, expected, **close)
    assert len(opt.state) == len(eager_opt.state)
    for got, expected in zip(_state_tensors(opt), _state_tensors(eager_opt)):
        torch.testing.assert_close(got, expected, **close)
    # the trace read the groups as capturable; the real groups keep their own setting
    assert all(g.get("capturable", False) is False for g in opt.param_groups)


def test_the_first_step_makes_the_state_as_eager_would():
    _, eager_opt = _model_and_optimizer("Adam", {})
    model, opt = _model_and_optimizer("Adam", {})
    eager_model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    eager_model.load_state_dict(model.state_dict())
    eager_opt = torch.optim.Adam(eager_model.parameters(), lr=0.01)
    _train(eager_model, eager_opt, eager_opt.step, steps=1)
    _train(model, opt, framejit.compile(opt.step, backend="eager"), steps=1)
    assert [sorted(s) for s in opt.state.values()] == [sorted(s) for s in eager_opt.state.values()]
    assert all(s["step"].item() == 1.0 for s in opt.state.values())


def test_a_parameter_without_a_grad_is_skipped_and_a_grad_appearing_recompiles():
    model, opt = _model_and_optimizer("Adam", {})
    counter = CompileCounter()
    step = framejit.compile(opt.step, backend=counter)
    frozen = model[2].bias
    x = torch.randn(5, 8)
    model(x).sum().backward()
    frozen.grad = None  # no grad: Adam skips it, as eager does
    before = frozen.detach().clone()
    step()
    assert torch.equal(frozen, before) and frozen not in opt.state
    model(x).sum().backward()
    step()  # now it has one: the guard on its .grad (None) fails, and the new graph updates it
    assert not torch.equal(frozen, before) and frozen in opt.state
    assert counter.frame_count == 2


def test_a_training_step_with_a_compiled_optimizer_inside_equals_eager():
    """The step function is compiled whole: the forward is a graph, backward breaks, and the optimizer step that
    runs after it is captured as a frame of its own."""
    eager_model, eager_opt = _model_and_optimizer("AdamW", {})
    model, opt = _model_and_optimizer("AdamW", {})

    def train_step(model, opt, x):
        opt.zero_grad(set_to_none=True)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    counter = CompileCounter()
    compiled = framejit.compile(train_step, backend=counter)
    x = torch.randn(5, 8)
    for i in range(6):
        torch.testing.assert_close(compiled(model, opt, x + i), train_step(eager_model, eager_opt, x + i))
    for got, expected in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(got, expected, **CLOSE)
    assert counter.frame_count <= 3  # forward, the optimizer step, and the code after backward


def test_a_compiled_step_under_aot_eager_equals_eager():
    eager_model, eager_opt = _model_and_optimizer("AdamW", {})
    model, opt = _model_and_optimizer("AdamW", {})
    _train(eager_model, eager_opt, eager_opt.step)
    _train(model, opt, framejit.compile(opt.step, backend="aot_eager"))
    for got, expected in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(got, expected, **CLOSE)


def test_two_parameter_groups_are_one_graph_from_the_first_step():
    """The first step makes every group's state before the trace reads it: no recompile at the second step."""

    def make():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
        decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
        rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
        return model, torch.optim.AdamW(groups, lr=0.01)

    eager_model, eager_opt = make()
    model, opt = make()
    counter = CompileCounter()
    _train(eager_model, eager_opt, eager_opt.step)
    _train(model, opt, framejit.compile(opt.step, backend=counter))
    assert counter.frame_count == 1
    for got, expected in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(got, expected, **CLOSE)
