"""What a model's loss path does: build a torch.nn loss in forward (`loss_fct = CrossEntropyLoss()`), and warn once
through an lru_cache'd logger method. Both are one graph; a module with parameters made in forward breaks."""

import functools
import logging

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounterWithBackend, same


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x, labels):
        logits = self.proj(x)
        loss_fct = nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)
        return loss_fct(nn.GELU()(logits), labels), loss_fct


def test_a_loss_module_made_in_forward_is_one_training_graph_and_a_fresh_object_each_call():
    head, x, labels = Head(), torch.randn(5, 4), torch.tensor([0, 2, 1, -100, 2])
    want, _ = head(x, labels)
    want.backward()
    want_grad = head.proj.weight.grad.clone()
    head.zero_grad()
    cnt = CompileCounterWithBackend("aot_eager")
    compiled = framejit.optimize(cnt, nopython=True)(head)
    got, first = compiled(x, labels)
    got.backward()
    assert cnt.frame_count == 1 and same(got, want) and same(head.proj.weight.grad, want_grad)
    _, second = compiled(x, labels)
    assert type(first) is nn.CrossEntropyLoss and first.label_smoothing == 0.1 and first is not second


def test_a_module_with_parameters_made_in_forward_breaks_and_draws_its_weights_once():
    def fn(x):
        return nn.Linear(4, 2)(x)

    x = torch.randn(3, 4)
    explained = framejit.explain(fn)(x)
    assert any("Linear() made in the trace has parameters" in r.reason for r in explained.break_reasons)
    torch.manual_seed(0)
    want = fn(x)
    torch.manual_seed(0)
    got = framejit.optimize("eager")(fn)(x)  # the trace's attempt drew no random numbers
    assert same(got, want)


class Reporter:
    def __init__(self):
        self.logger = logging.getLogger("framejit.tests.reporter")
        self.calls = 0

    @functools.lru_cache(None)
    def warn_once(self, message):
        self.calls += 1
        self.logger.debug(message)


REPORTER = Reporter()


def test_an_lru_cached_method_answers_from_its_cache_in_the_graph():
    def fn(x):
        REPORTER.warn_once("unrecognised loss type")
        return x * 2

    x = torch.randn(3)
    fn(x)  # eager: the message is reported once
    cnt = CompileCounterWithBackend("eager")
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    assert same(compiled(x), x * 2) and same(compiled(x), x * 2)
    assert cnt.frame_count == 1 and REPORTER.calls == 1
