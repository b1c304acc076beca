"""x-transformers and einops: `x_transformers.TransformerWrapper` around a 2-layer `Decoder` (width 32, 2 heads), in
user code that also calls einops' `rearrange`, `repeat` and `reduce`, compiled whole; inference and a training
step (gradients equal to eager's), and sequences of changing length.

torch.compile runs einops' functions as single graph ops (einops registers them with torch._dynamo's
allow_in_graph when torch._dynamo is imported); framejit traces einops' Python."""

from __future__ import annotations

import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.reallibs.compare import (
    assert_not_more_graphs,
    import_or_skip,
    run_framejit,
    run_torch_compile,
)
from tests.reliability.many_calls import CALLS, inputs_for, one_thread  # noqa: F401 (a fixture)

einops = import_or_skip("einops")
x_transformers = import_or_skip("x_transformers")

TOL = {"rtol": 1e-4, "atol": 1e-5}
VOCAB, CONTEXT, WIDTH = 64, 32, 32
LENGTHS = (16, 12, 8)
# graphs after each of the LENGTHS, as measured
LENGTH_GRAPHS = {"framejit": [1, 2, 2], "torch.compile": [1, 2, 2]}


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def decoder() -> torch.nn.Module:
    torch.manual_seed(0)
    return x_transformers.TransformerWrapper(
        num_tokens=VOCAB,
        max_seq_len=CONTEXT,
        attn_layers=x_transformers.Decoder(dim=WIDTH, depth=2, heads=2),
    )


class Tagger(torch.nn.Module):
    """User code around the decoder: einops to pool the logits per head of vocabulary and add a learned prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.decoder = decoder()
        self.prefix = torch.nn.Parameter(torch.randn(3, WIDTH, generator=torch.Generator().manual_seed(3)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.decoder(tokens)  # (batch, steps, vocab)
        by_step = einops.rearrange(logits, "b n (g v) -> b g v n", g=2)
        pooled = einops.reduce(by_step, "b g v n -> b (g v)", "mean")[:, :WIDTH]
        prefix = einops.repeat(self.prefix.mean(0), "d -> b d", b=tokens.shape[0])
        return pooled + prefix


def tokens(length: int = 16, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))


def test_inference_is_one_graph_equal_to_eager():
    model = Tagger().eval()
    counter = CompileCounter()
    with torch.no_grad():
        want = model(tokens())
        got = framejit.optimize(counter, nopython=True)(model)(tokens())
    torch.testing.assert_close(got, want, **TOL)
    assert counter.frame_count == 1


def training_step(model, call):
    model.zero_grad(set_to_none=True)
    loss = call(tokens()).pow(2).mean()
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def test_training_step_is_one_graph_with_eager_gradients():
    model = Tagger().train()
    want_loss, want_grads = training_step(model, model)
    counter = CompileCounter()
    got_loss, got_grads = training_step(model, framejit.optimize(counter, nopython=True)(model))
    torch.testing.assert_close(got_loss, want_loss, **TOL)
    torch.testing.assert_close(got_grads, want_grads, **TOL)
    assert counter.frame_count == 1


def length_steps() -> list:
    def make_step(length):
        def step(fn):
            with torch.no_grad():
                return fn(tokens(length))

        return step

    return [make_step(length) for length in LENGTHS]


@pytest.mark.slow
def test_fixed_length_graphs_against_torch_compile():
    model = Tagger().eval()
    fixed = length_steps()[:1] * 2
    theirs = run_torch_compile(model, fixed)
    ours = run_framejit(model, fixed)
    torch.testing.assert_close(ours.results, theirs.results, **TOL)
    assert theirs.counts == ours.counts == [1, 1]


@pytest.mark.slow
def test_changing_length_matches_eager():
    model = Tagger().eval()
    want = [step(model) for step in length_steps()]
    ours = run_framejit(model, length_steps())
    torch.testing.assert_close(ours.results, want, **TOL)
    assert ours.counts == LENGTH_GRAPHS["framejit"]


@pytest.mark.slow
def test_changing_length_graphs_against_torch_compile():
    # at the second length the sizes are symbolic: einops' lru_cache'd recipe functions, called with the symbolic
    # shape, are traced through (their __wrapped__), so nothing breaks and no resumed frame takes views
    model = Tagger().eval()
    theirs = run_torch_compile(model, length_steps())
    ours = run_framejit(model, length_steps())
    torch.testing.assert_close(ours.results, theirs.results, **TOL)
    assert theirs.counts == LENGTH_GRAPHS["torch.compile"]
    assert breaks_at_second_length(model) == []
    assert_not_more_graphs(ours.counts, theirs.counts)


def breaks_at_second_length(model) -> list[str]:
    """framejit.explain's break reasons for a call at the second length after one at the first."""
    framejit.reset()
    with torch.no_grad():
        framejit.optimize(CompileCounter())(model)(tokens(LENGTHS[0]))
        return [b.reason for b in framejit.explain(model)(tokens(LENGTHS[1])).break_reasons]


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_called_100_times():
    model = Tagger().eval()
    counter = CompileCounter()
    compiled = framejit.optimize(counter, nopython=True)(model)
    inputs = None
    with torch.no_grad():
        for call in range(CALLS):
            inputs = inputs_for(call, inputs, lambda: tokens(16, seed=call))
            torch.testing.assert_close(compiled(inputs), model(inputs), **TOL, msg=lambda m: f"call {call}: {m}")
    assert counter.frame_count == 1
