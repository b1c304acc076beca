"""Real models: Hugging Face transformers architectures, compiled as users compile them.

Inference: eval mode, no_grad, fullgraph=True, outputs equal to eager, one graph, and a second call that hits
the cache. Training: train mode (dropout on, seeded alike), backend aot_eager, the loss and every parameter's
gradient equal to eager. Models that cannot be one graph yet are listed with the reason, and still match eager.
"""

import warnings

import numpy
import pytest
import torch
import transformers  # the test extras install it

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend
from tests.helpers import fast_share
from tests.models.hf_zoo import ONE_GRAPH, TRAIN_BREAKS, WITH_BREAKS, WITH_LABELS, build, build_head


# the fast loop runs one model of each family (decoder, encoder, encoder-decoder, vision, speech, mixture, state
# space); CI runs them all
FAMILIES = {"gpt2", "llama", "bert", "t5", "vit", "resnet", "whisper", "mixtral", "mamba"}


@pytest.fixture(autouse=True)
def quiet_transformers():
    transformers.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    framejit.reset()


def tensors_of(output):
    return [t for t in output.to_tuple() if isinstance(t, torch.Tensor)]


def assert_outputs_equal(got, want):
    assert type(got) is type(want) and list(got.keys()) == list(want.keys())
    for a, b in zip(tensors_of(got), tensors_of(want)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("model_type", fast_share(sorted(ONE_GRAPH), FAMILIES))
def test_inference_is_one_graph_equal_to_eager(model_type):
    overrides, make_inputs = ONE_GRAPH[model_type]
    model, inputs = build(model_type, overrides, train=False), make_inputs()
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(model)
    with torch.no_grad():
        want = model(**inputs)
        assert_outputs_equal(compiled(**inputs), want)
        assert_outputs_equal(compiled(**inputs), want)  # from the cache
    assert cnt.frame_count == 1 and cnt.op_count > 0


def training_step(model, call, inputs):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # dropout draws the same masks in both runs
    numpy.random.seed(1)  # and so do speech models' time masks (SpecAugment), drawn with numpy
    loss = call(**inputs)[0].float().pow(2).mean()
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("model_type", fast_share(sorted(ONE_GRAPH), {"gpt2", "bert", "vit"}))
def test_training_step_matches_eager(model_type):
    overrides, make_inputs = ONE_GRAPH[model_type]
    model, inputs = build(model_type, overrides, train=True), make_inputs()
    want_loss, want_grads = training_step(model, model, inputs)
    cnt = CompileCounterWithBackend("aot_eager")
    fullgraph = model_type not in TRAIN_BREAKS
    got_loss, got_grads = training_step(model, framejit.optimize(cnt, nopython=fullgraph)(model), inputs)
    if fullgraph:
        assert cnt.frame_count == 1
    else:
        reasons = [r.reason for r in framejit.explain(model)(**inputs).break_reasons]
        assert any(TRAIN_BREAKS[model_type] in r for r in reasons), reasons
    torch.testing.assert_close(got_loss, want_loss)
    for name, want in want_grads.items():
        got = got_grads[name]
        if want is None:  # a parameter the loss does not use: AOTAutograd gives zeros where eager gives None
            assert got is None or not got.any(), name
        else:
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("name", fast_share(sorted(WITH_LABELS), {"gpt2-causal-lm", "bert-classification"}))
def test_training_with_labels_is_one_graph_equal_to_eager(name):
    """The model computes its own loss from the labels (a loss module made in its forward, or its loss function)."""
    auto_class, model_type, overrides, make_inputs = WITH_LABELS[name]
    model, inputs = build_head(auto_class, model_type, overrides), make_inputs()
    want_loss, want_grads = training_step(model, model, inputs)
    cnt = CompileCounterWithBackend("aot_eager")
    got_loss, got_grads = training_step(model, framejit.optimize(cnt, nopython=True)(model), inputs)
    assert cnt.frame_count == 1
    torch.testing.assert_close(got_loss, want_loss)
    for param, want in want_grads.items():
        if want is not None:
            torch.testing.assert_close(got_grads[param], want, atol=1e-5, rtol=1e-4, msg=param)


@pytest.mark.parametrize("model_type", fast_share(["gpt2", "llama", "bert", "mixtral"], {"gpt2"}))
def test_training_with_gradient_checkpointing_is_one_graph_equal_to_eager(model_type):
    """`gradient_checkpointing_enable(use_reentrant=False)`: each layer's forward is checkpointed through a
    partial of torch's checkpoint, and the input embeddings get a hook that makes them require grad. Mixtral's
    layer writes into tensors it made (its experts' `index_add_`) and sets attributes on the output records it
    makes: neither is a side effect that eager's recomputation would repeat."""
    overrides, make_inputs = ONE_GRAPH[model_type]
    model, inputs = build(model_type, overrides, train=True), make_inputs()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    want_loss, want_grads = training_step(model, model, inputs)
    cnt = CompileCounterWithBackend("aot_eager")
    got_loss, got_grads = training_step(model, framejit.optimize(cnt, nopython=True)(model), inputs)
    assert cnt.frame_count == 1
    torch.testing.assert_close(got_loss, want_loss)
    for name, want in want_grads.items():
        if want is not None:
            torch.testing.assert_close(got_grads[name], want, atol=1e-5, rtol=1e-4, msg=name)


def greedy_decode(model, ids, steps=3):
    """The generation loop users write: prefill, then one token at a time with the cache passed back in."""
    out = model(input_ids=ids, use_cache=True)
    tokens = []
    for _ in range(steps):
        tokens.append(out.logits[:, -1:].argmax(-1))
        out = model(input_ids=tokens[-1], past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(tokens, 1), out.logits


@pytest.mark.parametrize("model_type", ["gpt2", "llama", "qwen2"])
def test_greedy_decoding_with_the_cache_passed_back_matches_eager(model_type):
    overrides = ONE_GRAPH[model_type][0]
    model = build_head("AutoModelForCausalLM", model_type, overrides).eval()
    ids = torch.randint(0, 99, (2, 5))
    cnt = CompileCounter()
    with torch.no_grad():
        want_tokens, want_logits = greedy_decode(model, ids)
        got_tokens, got_logits = greedy_decode(framejit.optimize(cnt, nopython=True)(model), ids)
    assert torch.equal(got_tokens, want_tokens)
    torch.testing.assert_close(got_logits, want_logits)
    assert cnt.frame_count <= 4  # prefill, the first step, the step that makes the cache length symbolic


@pytest.mark.parametrize("model_type", sorted(WITH_BREAKS))
def test_models_with_graph_breaks_still_match_eager(model_type):
    overrides, make_inputs, reason = WITH_BREAKS[model_type]
    model, inputs = build(model_type, overrides, train=False), make_inputs()
    with torch.no_grad():
        want = model(**inputs)
        explained = framejit.explain(model)(**inputs)
        got = framejit.optimize("eager")(model)(**inputs)
    assert_outputs_equal(got, want)
    assert explained.graph_break_count > 0 and any(reason in r.reason for r in explained.break_reasons)


def test_a_changed_config_value_recompiles():
    overrides, make_inputs = ONE_GRAPH["bert"]
    model, inputs = build("bert", overrides, train=False), make_inputs()
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(model)
    with torch.no_grad():
        assert_outputs_equal(compiled(**inputs), model(**inputs))
        model.config.output_hidden_states = True  # read through the config's own __getattribute__
        got = compiled(**inputs)
        want = model(**inputs)
    assert cnt.frame_count >= 2 and len(got.hidden_states) == len(want.hidden_states) == 3
    assert_outputs_equal(got, want)


def test_return_dict_false_gives_the_tuple():
    overrides, make_inputs = ONE_GRAPH["bert"]
    model, inputs = build("bert", overrides, train=False), make_inputs()
    with torch.no_grad():
        got = framejit.optimize(CompileCounter(), nopython=True)(model)(**inputs, return_dict=False)
        want = model(**inputs, return_dict=False)
    assert type(got) is tuple and len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("model_type", ["bert", "gpt2", "llama", "t5", "whisper"])
def test_new_sequence_lengths_compile_once_more_then_never(model_type):
    # automatic dynamic shapes: the second length makes the sequence dim symbolic, as torch.compile does
    overrides, make_inputs = ONE_GRAPH[model_type]
    model = build(model_type, overrides, train=False)
    cnt = CompileCounter()
    compiled = framejit.compile(model, backend=cnt)
    for length in (8, 11, 13, 17):
        torch.manual_seed(length)
        inputs = {
            name: torch.randint(0, 50, (value.shape[0], length))
            if value.dim() == 2 and not value.dtype.is_floating_point
            else value
            for name, value in make_inputs().items()
        }
        with torch.no_grad():
            assert_outputs_equal(compiled(**inputs), model(**inputs))
    assert cnt.frame_count == 2
