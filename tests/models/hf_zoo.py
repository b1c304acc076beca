"""Hugging Face transformers models built from small configs with random weights (nothing is downloaded).

Each entry: the model type AutoConfig knows, the config overrides that make it small, and its inputs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

TEXT = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=37,
    max_position_embeddings=64,
)
VISION = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, image_size=32, patch_size=8
)
STAGES = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])


def token_ids(batch: int = 2, length: int = 8) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(0, 99, (batch, length)),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
    }


def input_ids() -> dict[str, torch.Tensor]:
    return {"input_ids": token_ids()["input_ids"]}


def encoder_decoder_ids() -> dict[str, torch.Tensor]:
    return {**token_ids(), "decoder_input_ids": torch.randint(0, 99, (2, 5))}


def pixels() -> dict[str, torch.Tensor]:
    return {"pixel_values": torch.randn(2, 3, 32, 32)}


def waveform() -> dict[str, torch.Tensor]:
    return {"input_values": torch.randn(2, 1600)}


def text_and_pixels() -> dict[str, torch.Tensor]:
    return {**token_ids(), **pixels()}


def image_tokens_and_pixels() -> dict[str, torch.Tensor]:
    """Text with one image token (98) for each of the 16 patch features of each image (CLS dropped)."""
    ids = torch.randint(0, 90, (2, 24))
    ids[:, 2:18] = 98
    return {"input_ids": ids, "attention_mask": torch.ones(2, 24, dtype=torch.long), **pixels()}


def mel_and_decoder_ids() -> dict[str, torch.Tensor]:
    return {"input_features": torch.randn(2, 8, 32), "decoder_input_ids": torch.randint(0, 99, (2, 4))}


AUDIO = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=37,
    conv_dim=[16, 16],
    conv_stride=[5, 4],
    conv_kernel=[10, 4],
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    layerdrop=0.0,
)  # no layer skipped at random: the gradients of every layer are compared
TOWERS = dict(text_config=TEXT, vision_config=VISION)
T5 = dict(vocab_size=99, d_model=32, d_kv=16, d_ff=37, num_layers=2, num_heads=2, decoder_start_token_id=0)
BART = dict(
    vocab_size=99,
    d_model=32,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=37,
    decoder_ffn_dim=37,
    max_position_embeddings=64,
)


# model type -> (config overrides, inputs); all of these are one graph under fullgraph=True
ONE_GRAPH: dict[str, tuple[dict[str, Any], Callable[[], dict[str, torch.Tensor]]]] = {
    # encoders
    "bert": (TEXT, token_ids),
    "distilbert": (
        dict(vocab_size=99, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=64),
        token_ids,
    ),
    "albert": (dict(TEXT, embedding_size=16), token_ids),
    "roberta": (TEXT, token_ids),
    "xlm-roberta": (TEXT, token_ids),
    "camembert": (TEXT, token_ids),
    "electra": (dict(TEXT, embedding_size=16), token_ids),
    "deberta": (TEXT, token_ids),
    "deberta-v2": (TEXT, token_ids),
    "mpnet": (TEXT, token_ids),
    "ernie": (TEXT, token_ids),
    "roformer": (dict(TEXT, embedding_size=32), token_ids),
    "megatron-bert": (TEXT, token_ids),
    "nystromformer": (TEXT, token_ids),
    "mobilebert": (
        dict(TEXT, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1),
        token_ids,
    ),
    "data2vec-text": (TEXT, token_ids),
    "luke": (TEXT, token_ids),
    "esm": (dict(TEXT, pad_token_id=1), token_ids),
    # vision
    "vit": (VISION, pixels),
    "deit": (VISION, pixels),
    "beit": (VISION, pixels),
    "dinov2": (VISION, pixels),
    "vit_msn": (VISION, pixels),
    "data2vec-vision": (VISION, pixels),
    "convnext": (dict(STAGES, num_channels=3), pixels),
    "resnet": (dict(STAGES, embedding_size=8), pixels),
    "regnet": (dict(STAGES, embedding_size=8, groups_width=8), pixels),
    "mobilenet_v2": (dict(image_size=32), pixels),
    "swin": (dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4), pixels),
    "poolformer": (dict(STAGES, num_encoder_blocks=4), pixels),
    "segformer": (dict(STAGES, num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=32), pixels),
    # speech
    "wav2vec2": (AUDIO, waveform),
    "hubert": (AUDIO, waveform),
    "data2vec-audio": (AUDIO, waveform),
    "wavlm": (AUDIO, waveform),
    # decoders (each makes its key/value cache, as by default)
    "gpt2": (dict(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64), token_ids),
    "llama": (dict(TEXT, num_key_value_heads=1), token_ids),
    "qwen2": (dict(TEXT, num_key_value_heads=1), token_ids),
    "ctrl": (dict(vocab_size=99, n_embd=32, n_layer=2, n_head=2, dff=37, n_positions=64), token_ids),
    "mistral": (dict(TEXT, num_key_value_heads=1), token_ids),
    "gemma": (dict(TEXT, num_key_value_heads=1, head_dim=16), token_ids),
    "gemma2": (dict(TEXT, num_key_value_heads=1, head_dim=16, sliding_window=4), token_ids),
    "phi": (TEXT, token_ids),
    "phi3": (dict(TEXT, num_key_value_heads=1, pad_token_id=0), token_ids),
    "stablelm": (dict(TEXT, num_key_value_heads=1), token_ids),
    "olmo": (dict(TEXT, num_key_value_heads=1), token_ids),
    "starcoder2": (dict(TEXT, num_key_value_heads=1), token_ids),
    "gpt_neox": (TEXT, token_ids),
    "gptj": (dict(vocab_size=99, n_embd=32, n_layer=2, n_head=2, n_positions=64, rotary_dim=8), token_ids),
    "opt": (dict(TEXT, ffn_dim=37, word_embed_proj_dim=32), token_ids),
    "falcon": (TEXT, token_ids),
    "xglm": (
        dict(vocab_size=99, d_model=32, num_layers=2, attention_heads=2, ffn_dim=37, max_position_embeddings=64),
        token_ids,
    ),
    "nemotron": (dict(TEXT, num_key_value_heads=1), token_ids),
    "bloom": (dict(vocab_size=99, hidden_size=32, n_layer=2, n_head=2), token_ids),  # its GELU: an autograd.Function
    # mixture of experts (grouped_mm needs 16-byte aligned strides: an intermediate size of 32)
    "mixtral": (
        dict(TEXT, num_key_value_heads=1, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2),
        token_ids,
    ),
    "qwen2_moe": (
        dict(
            TEXT,
            num_key_value_heads=1,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
        ),
        token_ids,
    ),
    # state space: Mamba with its sequential scan, Falcon-Mamba with associative_scan (taken when compiling: one
    # node calling the real function with the model's combine_fn)
    "mamba": (
        dict(
            vocab_size=99,
            hidden_size=32,
            num_hidden_layers=2,
            state_size=4,
            expand=2,
            conv_kernel=4,
            use_associative_scan=False,
        ),
        input_ids,
    ),
    "falcon_mamba": (
        dict(
            vocab_size=99,
            hidden_size=32,
            num_hidden_layers=2,
            state_size=4,
            expand=2,
            conv_kernel=4,
            use_associative_scan=True,
        ),
        input_ids,
    ),
    # encoder-decoders (each makes its cache: the decoder's config is a deep copy of the model's, adjusted)
    "t5": (T5, encoder_decoder_ids),
    "mt5": (T5, encoder_decoder_ids),
    "longt5": (T5, encoder_decoder_ids),
    "bart": (BART, encoder_decoder_ids),
    "mbart": (BART, encoder_decoder_ids),
    "pegasus": (BART, encoder_decoder_ids),
    "marian": (dict(BART, pad_token_id=0, decoder_start_token_id=0), encoder_decoder_ids),
    "blenderbot-small": (BART, encoder_decoder_ids),
    "m2m_100": (BART, encoder_decoder_ids),
    "pegasus_x": (dict(BART, block_size=4, num_global_tokens=2), encoder_decoder_ids),
    "whisper": (
        dict(
            BART,
            num_mel_bins=8,
            max_source_positions=16,
            max_target_positions=32,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        ),
        mel_and_decoder_ids,
    ),
    # vision-language
    "clip": (dict(TOWERS, projection_dim=16), text_and_pixels),
    "siglip": (TOWERS, text_and_pixels),
    # a llama reading CLIP patch features (taken by output-capturing forward hooks)
    "llava": (
        dict(
            text_config=dict(TEXT, model_type="llama", num_key_value_heads=1),
            vision_config=dict(VISION, model_type="clip_vision_model"),
            image_token_id=98,
        ),
        image_tokens_and_pixels,
    ),
}

# In a training step these break the graph, with this reason, and still match eager: SpecAugment draws its time
# masks with numpy's random generator, which runs as Python (a real reason: a graph would not advance numpy's state).
TRAIN_BREAKS = {name: "numpy's random state" for name in ("wav2vec2", "hubert", "data2vec-audio", "wavlm")}
# M2M100's LayerDrop draws a random number per layer in training and skips the layer on its value
TRAIN_BREAKS["m2m_100"] = "branching on the value of a tensor"

# Models that still run in several graphs, each with the reason of its first break. They must match eager.
WITH_BREAKS: dict[str, tuple[dict[str, Any], Callable[[], dict[str, torch.Tensor]], str]] = {
    # asserts on a length read from a tensor (`lengths.max().item() <= slen`): a value only real data has
    "flaubert": (
        dict(vocab_size=99, emb_dim=32, n_layers=2, n_heads=2, max_position_embeddings=64),
        token_ids,
        "Tensor.item()",
    ),
}


def build(model_type: str, overrides: dict[str, Any], train: bool) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.for_model(model_type, **overrides))
    return model.train(train)


def text_labels() -> dict[str, torch.Tensor]:
    return {**token_ids(), "labels": torch.randint(0, 99, (2, 8))}


def seq2seq_labels() -> dict[str, torch.Tensor]:
    return {**token_ids(), "labels": torch.randint(0, 99, (2, 5))}


# Task heads trained as users train them: the labels go in, the model computes its loss (a loss module made in
# forward, or the model's loss function) -> (auto class, model type, config overrides, inputs with labels)
WITH_LABELS: dict[str, tuple[str, str, dict[str, Any], Callable[[], dict[str, torch.Tensor]]]] = {
    "bert-classification": (
        "AutoModelForSequenceClassification",
        "bert",
        TEXT,
        lambda: {**token_ids(), "labels": torch.tensor([0, 1])},
    ),
    "roberta-masked-lm": ("AutoModelForMaskedLM", "roberta", TEXT, text_labels),
    "gpt2-causal-lm": ("AutoModelForCausalLM", "gpt2", ONE_GRAPH["gpt2"][0], text_labels),
    "llama-causal-lm": ("AutoModelForCausalLM", "llama", ONE_GRAPH["llama"][0], text_labels),
    "t5-seq2seq": ("AutoModelForSeq2SeqLM", "t5", T5, seq2seq_labels),
    "bart-seq2seq": ("AutoModelForSeq2SeqLM", "bart", BART, seq2seq_labels),
    "vit-classification": (
        "AutoModelForImageClassification",
        "vit",
        VISION,
        lambda: {**pixels(), "labels": torch.tensor([0, 1])},
    ),
    "whisper-speech-seq2seq": (
        "AutoModelForSpeechSeq2Seq",
        "whisper",
        ONE_GRAPH["whisper"][0],
        lambda: {"input_features": torch.randn(2, 8, 32), "labels": torch.randint(0, 99, (2, 4))},
    ),
}


def build_head(auto_class: str, model_type: str, overrides: dict[str, Any]) -> torch.nn.Module:
    import transformers

    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(model_type, **overrides)
    return getattr(transformers, auto_class).from_config(config).train()
