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


def _text(model_type: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        overrides = tiny if quick else full
        batch, length = (2, 8) if quick else (8, 128)
        ids = torch.randint(0, overrides.get("vocab_size", 99), (batch, length))
        return Case(_model(model_type, overrides), ids, torch.zeros(()), first_output_loss)
    return build


def _vision(model_type: str, full: dict[str, Any], tiny: dict[str, Any]) -> Callable[[bool], Case]:
    def build(quick: bool) -> Case:
        overrides = tiny if quick else full
        batch, size = (2, 32) if quick else (8, 64)
        pixels = torch.randn(batch, 3, size, size)
        return Case(_model(model_type, dict(overrides, image_size=size) if "image_size" in overrides else overrides),
                    pixels, torch.zeros(()), first_output_loss)
    return build


def _model(model_type: str, overrides: dict[str, Any]) -> torch.nn.Module:
    try:
        import transformers
    except ImportError as e:
        raise RuntimeError("framejit bench --suite hf needs transformers: pip install 'framejit[hf]'") from e
    transformers.logging.set_verbosity_error()
    config = transformers.AutoConfig.for_model(model_type, **overrides)
    return transformers.AutoModel.from_config(config)


_TEXT = dict(vocab_size=1000, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
             max_position_embeddings=256)
_TEXT_TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                  max_position_embeddings=64)
_VIT = dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512, image_size=64,
            patch_size=8)
_VIT_TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, image_size=32,
                 patch_size=8)
_STAGES = dict(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1])
_STAGES_TINY = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])

HF_SUITE: dict[str, Callable[[bool], Case]] = {
    "bert": _text("bert", _TEXT, _TEXT_TINY),
    "roberta": _text("roberta", _TEXT, _TEXT_TINY),
    "albert": _text("albert", dict(_TEXT, embedding_size=64), dict(_TEXT_TINY, embedding_size=16)),
    "distilbert": _text("distilbert", dict(vocab_size=1000, dim=128, n_layers=4, n_heads=4, hidden_dim=512,
                                           max_position_embeddings=256),
                        dict(vocab_size=99, dim=32, n_layers=1, n_heads=2, hidden_dim=37, max_position_embeddings=64)),
    "electra": _text("electra", dict(_TEXT, embedding_size=64), dict(_TEXT_TINY, embedding_size=16)),
    "vit": _vision("vit", _VIT, _VIT_TINY),
    "deit": _vision("deit", _VIT, _VIT_TINY),
    "convnext": _vision("convnext", _STAGES, _STAGES_TINY),
    "resnet": _vision("resnet", dict(_STAGES, embedding_size=32), dict(_STAGES_TINY, embedding_size=8)),
    "swin": _vision("swin", dict(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                 window_size=4),
                    dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)),
}
