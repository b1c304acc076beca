"""`framejit bench --suite hf`: Hugging Face transformers models from configs with random weights (no download).

Needs the `hf` extra (`pip install 'framejit[hf]'`). Each model takes its usual first input positionally
(token ids or pixels); its training loss is the mean square of its first output.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.bench.models import Case


def first_output_loss(out: Any, target: torch.Tensor) -> torch.Tensor:
    return out[0].float().pow(2).mean() + 0 * target.sum()


def output_tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of a model output (a cache object in it is compared through the tensors computed from it)."""
    return [t for t in out.to_tuple() if isinstance(t, torch.Tensor)]


def _text(model_type: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        overrides = tiny if quick else full
        batch, length = (2, 8) if quick else (8, 128)
        ids = torch.randint(0, overrides.get("vocab_size", 99), (batch, length))
        return Case(_model(model_type, overrides), ids, torch.zeros(()), first_output_loss, output_tensors)

    return build


def _vision(model_type: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        overrides = tiny if quick else full
        batch, size = (2, 32) if quick else (8, 64)
        pixels = torch.randn(batch, 3, size, size)
        return Case(
            _model(model_type, dict(overrides, image_size=size) if "image_size" in overrides else overrides),
            pixels,
            torch.zeros(()),
            first_output_loss,
            output_tensors,
        )

    return build


class SourceAndTarget(torch.nn.Module):
    """An encoder-decoder called as users call it in a training step: the source tokens, and the first
    quarter of them as the decoder's input (teacher forcing)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> Any:
        return self.model(input_ids=ids, decoder_input_ids=ids[:, : max(1, ids.shape[1] // 4)])


def _encoder_decoder(model_type: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        case = _text(model_type, full, tiny)(quick)
        return Case(SourceAndTarget(case.model), case.x, case.target, case.loss_fn, output_tensors)

    return build


def _model(model_type: str, overrides: dict[str, Any]) -> torch.nn.Module:
    try:
        import transformers
    except ImportError as e:
        raise RuntimeError("framejit bench --suite hf needs transformers: pip install 'framejit[hf]'") from e
    transformers.logging.set_verbosity_error()
    config = transformers.AutoConfig.for_model(model_type, **overrides)
    return transformers.AutoModel.from_config(config)


_TEXT = dict(
    vocab_size=1000,
    hidden_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=512,
    max_position_embeddings=256,
)
_TEXT_TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=37,
    max_position_embeddings=64,
)
_GPT2 = dict(vocab_size=1000, n_embd=128, n_layer=4, n_head=4, n_positions=256)
_GPT2_TINY = dict(vocab_size=99, n_embd=32, n_layer=1, n_head=2, n_positions=64)
_T5 = dict(vocab_size=1000, d_model=128, d_kv=32, d_ff=512, num_layers=2, num_heads=4, decoder_start_token_id=0)
_T5_TINY = dict(vocab_size=99, d_model=32, d_kv=16, d_ff=37, num_layers=1, num_heads=2, decoder_start_token_id=0)
_BART = dict(
    vocab_size=1000,
    d_model=128,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=512,
    decoder_ffn_dim=512,
    max_position_embeddings=256,
)
_BART_TINY = dict(
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
_VIT = dict(
    hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512, image_size=64, patch_size=8
)
_VIT_TINY = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, image_size=32, patch_size=8
)
_STAGES = dict(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1])
_STAGES_TINY = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])

HF_SUITE: dict[str, Callable[[bool], Case]] = {
    "bert": _text("bert", _TEXT, _TEXT_TINY),
    "roberta": _text("roberta", _TEXT, _TEXT_TINY),
    "albert": _text("albert", dict(_TEXT, embedding_size=64), dict(_TEXT_TINY, embedding_size=16)),
    "distilbert": _text(
        "distilbert",
        dict(vocab_size=1000, dim=128, n_layers=4, n_heads=4, hidden_dim=512, max_position_embeddings=256),
        dict(vocab_size=99, dim=32, n_layers=1, n_heads=2, hidden_dim=37, max_position_embeddings=64),
    ),
    "electra": _text("electra", dict(_TEXT, embedding_size=64), dict(_TEXT_TINY, embedding_size=16)),
    "gpt2": _text("gpt2", _GPT2, _GPT2_TINY),
    "llama": _text("llama", dict(_TEXT, num_key_value_heads=2), dict(_TEXT_TINY, num_key_value_heads=1)),
    "t5": _encoder_decoder("t5", _T5, _T5_TINY),
    "bart": _encoder_decoder("bart", _BART, _BART_TINY),
    "vit": _vision("vit", _VIT, _VIT_TINY),
    "deit": _vision("deit", _VIT, _VIT_TINY),
    "convnext": _vision("convnext", _STAGES, _STAGES_TINY),
    "resnet": _vision("resnet", dict(_STAGES, embedding_size=32), dict(_STAGES_TINY, embedding_size=8)),
    "swin": _vision(
        "swin",
        dict(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4),
        dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
    ),
}
