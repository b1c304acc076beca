"""Generated code under CPython's quickening: every model of `framejit bench`'s suite, called 100 times.

The bench and the model zoo called each compiled model twice, so they never reached CPython's quickening (a
code object is specialised after about eight runs): a graph of 255+ inputs crashed the interpreter at its ~7th
call and nothing noticed. Here each model of framejit/bench/models.py (built as the bench builds it, at its
--quick sizes), plus a DenseNet of more than 300 parameter tensors, is compiled with framejit and called 100
times, backends eager and aot_eager, in inference and in training (forward + loss + backward + SGD step, as the
bench times it). Every call gets fresh inputs, except some that pass the previous call's input objects again,
as they are or after writing new values into them in place; every call's results are compared with eager's.
tests/models/test_hf_zoo_many_calls.py does the same for the Hugging Face zoo.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from framejit.bench import models
from framejit.bench.jits import make_jit
from tests.helpers import fast_share
from tests.reliability.many_calls import CALLS, TOL, assert_all_close, inputs_for, one_thread  # noqa: F401

ONE_BYTE = 255  # the most arguments a CALL's oparg holds without an EXTENDED_ARG

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------------------------------
# a model whose graph takes more values than fit in one byte: 300+ parameter tensors (and its BatchNorm buffers)


class DenseLayer(nn.Module):
    """DenseNet's bottleneck layer: BN-ReLU-conv1x1, BN-ReLU-conv3x3, its output concatenated to its input."""

    def __init__(self, c_in: int, growth: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in)
        self.conv1 = nn.Conv2d(c_in, 2 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * growth)
        self.conv2 = nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], 1)


class DenseNet(nn.Module):
    def __init__(self, growth: int, layers_per_block: int, classes: int) -> None:
        super().__init__()
        c = 2 * growth
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        stages: list[nn.Module] = []
        for block in range(3):
            for _ in range(layers_per_block):
                stages.append(DenseLayer(c, growth))
                c += growth
            if block < 2:  # transition: halve the channels and the resolution
                stages += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
                c //= 2
        self.features = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm(self.features(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _densenet(quick: bool) -> models.Case:
    # 3 blocks of 17 layers: 317 parameter tensors, 105 BatchNorms
    return models.Case(
        DenseNet(growth=4, layers_per_block=17, classes=10),
        torch.randn(2, 3, 8, 8),
        torch.randint(0, 10, (2,)),
        models.cross_entropy_loss,
    )


SUITE: dict[str, Callable[[bool], models.Case]] = {**models.SUITE, "densenet": _densenet}


def test_the_densenet_has_more_parameters_than_one_call_takes():
    model = _densenet(True).model
    assert len(list(model.parameters())) >= 300 > ONE_BYTE


# ---------------------------------------------------------------------------------------------
# fresh inputs


def fresh_like(t: torch.Tensor) -> torch.Tensor:
    """New values of t's shape and dtype; integers (token ids, class labels) stay below t's largest value + 1."""
    if t.dtype.is_floating_point:
        return torch.randn_like(t)
    return torch.randint_like(t, int(t.max()) + 1)


# ---------------------------------------------------------------------------------------------
# the runs


def build(name: str) -> models.Case:
    torch.manual_seed(0)  # as the bench's runner: every build of a model is identical
    return SUITE[name](True)


def run_inference(case: models.Case, jit: Any) -> None:
    model = case.model.eval()
    eager, compiled = copy.deepcopy(model), jit.wrap(copy.deepcopy(model))
    inputs = None
    with torch.no_grad():
        for call in range(CALLS):
            inputs = inputs_for(call, inputs, lambda: (fresh_like(case.x),))
            want = eager(*inputs)
            got = compiled(*inputs)
            torch.testing.assert_close(
                case.compared(got), case.compared(want), **TOL, msg=lambda m: f"call {call}: {m}"
            )
            if call == 0:
                after_first = jit.counter.frame_count
    assert jit.counter.frame_count == after_first >= 1  # 99 calls from the cache: no recompile


def run_training(case: models.Case, jit: Any) -> None:
    """Steps in lockstep from the same weights: each step's loss, gradients, and the parameters and buffers after
    the SGD step are compared; then the compiled side's state is set to eager's (in place: the same tensors), so
    a tiny difference never grows over 100 steps and each step starts where eager's starts."""
    model = case.model.train()
    eager = models.WithLoss(copy.deepcopy(model), case.loss_fn)
    module = models.WithLoss(copy.deepcopy(model), case.loss_fn)
    compiled = jit.wrap(module)
    opt_eager = torch.optim.SGD(eager.parameters(), lr=0.01)
    opt_compiled = torch.optim.SGD(module.parameters(), lr=0.01)

    def step(
        fn: Callable[..., torch.Tensor],
        owner: nn.Module,
        opt: torch.optim.Optimizer,
        call: int,
        inputs: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
        torch.manual_seed(call)  # dropout, where a model has it, draws the same masks on both sides
        opt.zero_grad(set_to_none=True)
        loss = fn(*inputs)
        loss.backward()
        grads = {n: None if p.grad is None else p.grad.clone() for n, p in owner.named_parameters()}
        opt.step()
        return loss.detach(), grads

    inputs = None
    for call in range(CALLS):
        inputs = inputs_for(call, inputs, lambda: (fresh_like(case.x), fresh_like(case.target)))
        want_loss, want_grads = step(eager, eager, opt_eager, call, inputs)
        got_loss, got_grads = step(compiled, module, opt_compiled, call, inputs)
        torch.testing.assert_close(got_loss, want_loss, **TOL, msg=lambda m: f"call {call}, loss: {m}")
        for name in [n for n, g in want_grads.items() if g is None]:
            # a parameter the loss does not use: AOTAutograd may give zeros where eager gives None
            got = got_grads.pop(name)
            del want_grads[name]
            assert got is None or not got.any(), (call, name)
        assert_all_close(got_grads, want_grads, f"call {call}, gradient")
        want_state = eager.state_dict()
        # the parameters after the SGD step, and BatchNorm's running statistics
        assert_all_close(module.state_dict(), want_state, f"call {call}, after the step")
        module.load_state_dict(want_state)
        if call == 0:
            after_first = jit.counter.frame_count
    assert jit.counter.frame_count == after_first >= 1


@pytest.mark.parametrize("backend", fast_share(["eager", "aot_eager"], {"aot_eager"}))
@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("name", fast_share(list(SUITE), {"gpt"}))
def test_a_bench_model_called_100_times_matches_eager_on_every_call(name, mode, backend):
    case = build(name)
    jit = make_jit("framejit", backend)  # as `framejit bench` compiles (with its graph and break counters)
    (run_inference if mode == "infer" else run_training)(case, jit)
    assert jit.fates and not [str(f) for f in jit.fates if f.fell_back]  # the backend compiled every graph
    if name == "densenet":  # the call of the compiled graph takes more values than one CALL can
        inputs = [n for n in jit.counter.graphs[0].graph.nodes if n.op == "placeholder"]
        assert len(inputs) > ONE_BYTE
