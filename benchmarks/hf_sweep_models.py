"""The tiny transformers models the sweep builds (every AutoModel type, generic tiny config overrides, random
weights, nothing downloaded) and the candidate inputs each is called with."""

from __future__ import annotations

import inspect
from typing import Any

# --- configs ---------------------------------------------------------------------------------------------------------

HIDDEN = 32
HEADS = 2
TINY: dict[str, Any] = {
    # widths
    **dict.fromkeys(
        (
            "hidden_size",
            "d_model",
            "n_embd",
            "dim",
            "embed_dim",
            "embedding_size",
            "word_embed_proj_dim",
            "text_embed_dim",
            "vision_embed_dim",
            "projection_dim",
            "hidden_dim_text",
            "n_embed",
            "d_embed",
            "encoder_hidden_size",
            "decoder_hidden_size",
            "true_hidden_size",
            "intra_bottleneck_size",
        ),
        HIDDEN,
    ),
    # depths
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "n_layer",
            "n_layers",
            "num_layers",
            "encoder_layers",
            "decoder_layers",
            "num_encoder_layers",
            "num_decoder_layers",
            "text_layers",
            "vision_layers",
            "depth",
        ),
        2,
    ),
    # heads
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_head",
            "n_heads",
            "num_heads",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "num_decoder_attention_heads",
            "num_encoder_attention_heads",
        ),
        HEADS,
    ),
    "num_key_value_heads": 1,
    **dict.fromkeys(
        ("head_dim", "d_kv", "kv_channels", "attention_head_dim", "qk_nope_head_dim", "v_head_dim"), HIDDEN // HEADS
    ),
    "qk_rope_head_dim": 8,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    # feed-forward
    **dict.fromkeys(
        (
            "intermediate_size",
            "d_ff",
            "ffn_dim",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "n_inner",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "decoder_ffn_dim",
            "encoder_intermediate_size",
            "decoder_intermediate_size",
        ),
        37,
    ),
    # experts
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    # vocabulary and positions
    "vocab_size": 99,
    "max_position_embeddings": 512,
    "n_positions": 512,
    "n_ctx": 512,
    # vision
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    # speech
    "num_mel_bins": 8,
    "max_source_positions": 16,
    "max_target_positions": 64,
    "conv_dim": [16, 16],
    "conv_stride": [5, 4],
    "conv_kernel": [10, 4],
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
    "layerdrop": 0.0,
    "encoder_layerdrop": 0.0,
    "decoder_layerdrop": 0.0,
    # never download anything
    "use_pretrained_backbone": False,
    "use_timm_backbone": False,
}
# state-space (Mamba) sizes, a last try for hybrid models whose config checks them against the hidden size
SSM: dict[str, Any] = {
    "mamba_n_heads": 2,
    "mamba_d_head": 32,
    "mamba_n_groups": 1,
    "n_groups": 1,
    "mamba_d_state": 16,
    "state_size": 16,
    "ssm_state_size": 16,
    "mamba_expand": 2,
    "expand": 2,
    "mamba_d_conv": 4,
    "conv_kernel": 4,
    "time_step_rank": 4,
    "attn_layer_indices": [1],
    "attn_layer_period": 2,
    "attn_layer_offset": 1,
    "expert_layer_period": 2,
    "expert_layer_offset": 1,
    "hybrid_layer_ids": [1],
}
# list-valued settings (per stage): keep the number of stages, make each stage tiny
LISTS = {
    "hidden_sizes": lambda n: [8 * 2**i for i in range(n)],
    "depths": lambda n: [1] * n,
    "num_heads": lambda n: [HEADS] * n,
    "num_attention_heads": lambda n: [1] * n,
    "embed_dims": lambda n: [8 * 2**i for i in range(n)],
    "num_layers": lambda n: [1] * n,
    "conv_dim": lambda n: [16] * n,
}
SUB_CONFIGS = (
    "text_config",
    "vision_config",
    "audio_config",
    "encoder_config",
    "decoder_config",
    "speech_config",
    "qformer_config",
    "backbone_config",
    "image_config",
)


TOKEN_IDS = {
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 0,
    "sep_token_id": 2,
    "cls_token_id": 1,
    "mask_token_id": 3,
    "unk_token_id": 0,
}
CONV = ("conv_dim", "conv_stride", "conv_kernel")


def settable(cfg: Any) -> set[str]:
    """The config's own settings: its __init__ parameters (dataclass fields), never attribute_map aliases or
    properties derived from other settings; with **kwargs, the attributes in the instance's __dict__ too."""
    params = inspect.signature(type(cfg).__init__).parameters
    names = {n for n, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)} - {"self"}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        names |= set(vars(cfg))
    return names - set(getattr(cfg, "attribute_map", {}) or {})


def tiny_overrides(cfg: Any, intermediate: int = 37, tiny_images: bool = True, ssm: bool = False) -> dict[str, Any]:
    """The overrides of TINY and LISTS that `cfg` (a default config object) has as settings, sub-configs too."""
    out: dict[str, Any] = {}
    own = settable(cfg)
    conv_ok = all(isinstance(getattr(cfg, k, None), (list, tuple)) and k in own for k in CONV)
    for key, value in (dict(TINY, **SSM) if ssm else TINY).items():
        if key not in own or not hasattr(cfg, key) or (ssm and isinstance(getattr(cfg, key), str)):
            continue
        if not tiny_images and key in ("image_size", "patch_size"):
            continue
        if value == 37:
            value = intermediate
        if key in CONV and not (ssm and key in SSM and isinstance(getattr(cfg, key), int)):
            if conv_ok:
                out[key] = TINY[key]
            continue
        current = getattr(cfg, key)
        if isinstance(current, (list, tuple)) and not isinstance(value, list):
            if key in LISTS and current and all(isinstance(v, int) for v in current):
                out[key] = LISTS[key](len(current))
            continue
        if isinstance(value, list) != isinstance(current, (list, tuple)) and not (
            ssm and key in SSM and current is None
        ):
            continue
        if current is None and key in (
            "head_dim",
            "num_key_value_heads",
            "n_inner",
            "qk_rope_head_dim",
            "kv_lora_rank",
            "q_lora_rank",
            "moe_intermediate_size",
        ):
            continue  # derived from the other sizes when None
        if isinstance(current, bool) != isinstance(value, bool):
            continue
        out[key] = value
    # per-layer lists (layer_types, ...) follow the new number of layers
    for layers_key in ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "depth"):
        old, new = getattr(cfg, layers_key, None), out.get(layers_key)
        if isinstance(old, int) and isinstance(new, int) and new < old:
            for key in own:
                current = getattr(cfg, key, None)
                if "layer" in key and key not in out and isinstance(current, (list, tuple)) and len(current) == old:
                    out[key] = list(current[:new])
            break
    if not tiny_images and "num_key_value_heads" in out:
        out["num_key_value_heads"] = HEADS
    if "window_size" in own and isinstance(getattr(cfg, "window_size", None), int) and "image_size" in out:
        out["window_size"] = 4
    vocab = out.get("vocab_size", getattr(cfg, "vocab_size", None))
    if isinstance(vocab, int):
        for key, value in TOKEN_IDS.items():
            current = getattr(cfg, key, None)
            if key in own and isinstance(current, int) and not isinstance(current, bool) and current >= vocab:
                out[key] = value
    for key, fn in LISTS.items():
        current = getattr(cfg, key, None)
        if (
            key in own
            and key not in out
            and isinstance(current, (list, tuple))
            and current
            and all(isinstance(v, int) for v in current)
        ):
            out[key] = fn(len(current))
    for key in SUB_CONFIGS:
        sub = getattr(cfg, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            if ssm:  # the last try: only the overrides, so that sizes derived from others are derived again
                sub_dict = {"model_type": sub.model_type} if getattr(sub, "model_type", "") else {}
            else:  # the sub-config's own settings, the overrides over them
                sub_dict = sub.to_dict()
            sub_dict.update(tiny_overrides(sub, intermediate, tiny_images, ssm))
            out[key] = sub_dict
    return out


def build_model(model_type: str, intermediate: int = 37, tiny_images: bool = True, ssm: bool = False) -> Any:
    import torch
    from transformers import AutoConfig, AutoModel

    default = AutoConfig.for_model(model_type)
    overrides = tiny_overrides(default, intermediate, tiny_images, ssm)
    config = AutoConfig.for_model(model_type, **overrides)
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    return model.eval()


def all_model_types() -> tuple[list[str], list[str]]:
    """(the model types AutoModel has a class for, the config-only types skipped)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    buildable = [name for name in CONFIG_MAPPING_NAMES if name in MODEL_MAPPING_NAMES]
    return buildable, [name for name in CONFIG_MAPPING_NAMES if name not in MODEL_MAPPING_NAMES]


# --- inputs ----------------------------------------------------------------------------------------------------------


def _int(cfg: Any, *names: str, default: int) -> int:
    for name in names:
        for c in (
            cfg,
            getattr(cfg, "text_config", None),
            getattr(cfg, "vision_config", None),
            getattr(cfg, "audio_config", None),
        ):
            value = getattr(c, name, None) if c is not None else None
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return default


def candidate_inputs(model: Any) -> list[dict[str, Any]]:
    """Candidate input dicts, most likely first, from main_input_name and the forward signature."""
    import torch

    cfg = model.config
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    main = main[0] if isinstance(main, (list, tuple)) else main  # some models name several (oneformer)
    vocab = min(_int(cfg, "vocab_size", default=99), 99)
    channels = _int(cfg, "num_channels", default=3)
    image = _int(cfg, "image_size", default=32)
    mel = _int(cfg, "num_mel_bins", "input_feat_per_channel", "feature_size", default=80)

    def gen() -> torch.Generator:
        return torch.Generator().manual_seed(0)

    def ids(length: int = 8) -> torch.Tensor:
        return torch.randint(3, max(vocab, 4), (2, length), generator=gen())

    text = {"input_ids": ids(), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    if "attention_mask" not in params:
        text.pop("attention_mask")
    pixels = {"pixel_values": torch.randn(2, channels, image, image, generator=gen())}
    candidates: list[dict[str, Any]] = []
    if main == "input_ids" or main not in ("pixel_values", "input_values", "input_features"):
        candidates.append(dict(text))
        if "pixel_values" in params:
            candidates.insert(0, {**text, **pixels})
    if main == "pixel_values" or (main != "input_ids" and "pixel_values" in params):
        candidates.append(dict(pixels))
        if "input_ids" in params:
            candidates.append({**text, **pixels})
        candidates.append({"pixel_values": torch.randn(2, channels, 224, 224, generator=gen())})
    if main == "input_values" or "input_values" in params:
        candidates.append({"input_values": torch.randn(2, 1600, generator=gen())})
        candidates.append({"input_values": torch.randn(2, 16000, generator=gen())})
    if main == "input_features" or "input_features" in params:
        for shape in ((2, mel, 32), (2, 32, mel), (2, mel, 3000)):
            candidates.append({"input_features": torch.randn(*shape, generator=gen())})
    if main not in ("input_ids", "pixel_values", "input_values", "input_features") and main in params:
        candidates.append({main: ids()})
        candidates.append({main: torch.randn(2, 8, generator=gen())})
        candidates.append({main: torch.randn(2, channels, image, image, generator=gen())})
    if not candidates:
        candidates.append(dict(text))
    out = []
    for cand in candidates:
        if "decoder_input_ids" in params and (
            getattr(cfg, "is_encoder_decoder", False) or "decoder_input_ids" in params
        ):
            cand = {**cand, "decoder_input_ids": ids(5)}
        if "attention_mask" in cand and "attention_mask" not in params:
            cand.pop("attention_mask")
        cand = {
            k: v
            for k, v in cand.items()
            if k in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        }
        if cand:
            out.append(cand)
        # the same without decoder_input_ids, for models that make their own
        if "decoder_input_ids" in cand:
            out.append({k: v for k, v in cand.items() if k != "decoder_input_ids"})
    return out
