"""A sweep over every transformers architecture: framejit and torch.compile side by side, in inference.

Run from the repository root: python benchmarks/hf_sweep.py [--models a,b] [--jobs N] [--batch 10] [--out DIR]

Every model type of transformers' CONFIG_MAPPING_NAMES that AutoModel has a class for is built from its config with
generic tiny overrides (hidden 32, 2 layers, 2 heads, intermediate 37, vocab 99, image 32 / patch 8, ...; a key is
only set where the config class has that attribute, and text_config / vision_config / audio_config get the same
treatment), with random weights; nothing is downloaded. Its inputs come from its `main_input_name` and its forward
signature (input_ids + attention_mask, pixel_values, input_values, input_features, decoder_input_ids for
encoder-decoders, pixel_values + input_ids for vision-language); the first candidate set of inputs the model runs
eagerly on is kept. If none does, the model is built again with intermediate 40 (kernels that want sizes in multiples
of 16 bytes), then with the config's own image size, then with tiny state-space sizes and sub-configs given only
their overrides. A model that cannot be built or whose eager call fails every time is "not built" (with the first
reason, and the last) and is not counted.

Each built model then runs in inference (eval, no_grad), from the same seed each time:
  * eagerly (the reference outputs);
  * under framejit.optimize(<counting backend>) (backend eager, not fullgraph): graphs counted by the backend, the
    outputs compared with eager's (every tensor of out.to_tuple(), allclose atol 1e-4 rtol 1e-3), and then
    framejit.explain(model)(**inputs) for the breaks (count, reasons, source lines);
  * under torch.compile(backend=<counting backend>) in the same process, after torch._dynamo.reset(): graphs,
    breaks (torch._dynamo's graph_break counter), outputs compared the same way.

With --train, each of the three calls is a training step instead (still eval mode, so that dropout is off): the
model's gradients are set to None, the mean of every floating output tensor that requires grad is summed into a loss
and `loss.backward()` runs; the backends are aot_eager (framejit's and torch's, each wrapped by the counter), and a
run is ok when the outputs and every parameter's gradient (None where eager's is None) match eager's. With
--gradient-checkpointing (implies --train), a model that supports it gets
`gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})` and runs in train mode (the
layers checkpoint only in training; each step starts from seed 0, so dropout draws alike); the row says whether
checkpointing was on ("checkpointing").

Models run in subprocesses, --batch per subprocess, --jobs workers in parallel. A worker writes one line per model as
it starts, one per phase and one as it ends, so a crash (segfault, abort), a hang (no progress for --timeout
seconds) or a worker past --max-rss-gb of resident memory (killed) is pinned on the model and phase that was running:
it is recorded as a crash and the rest of its batch goes on in a fresh subprocess.

Writes DIR/hf_sweep.{csv,json,txt} (and DIR/hf_sweep.partial.jsonl as it goes; --resume keeps its rows) and prints the
counts and a histogram of framejit's first break reason per model. --report-only rebuilds the report from the
partial rows; --markdown FILE writes the Markdown summary (benchmarks/hf_sweep_results.md) from DIR/hf_sweep.json.
"""
from __future__ import annotations

import argparse
import collections
import csv
import datetime
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COLUMNS = ("model", "status", "reason", "model_class", "inputs", "params", "eager_s",
           "fj_graphs", "fj_breaks", "fj_status", "fj_error", "fj_max_err", "fj_s",
           "fj_first_break", "fj_first_break_at", "fj_first_break_line", "fj_break_reasons",
           "tc_graphs", "tc_breaks", "tc_status", "tc_error", "tc_max_err", "tc_s", "checkpointing")

# --- configs ---------------------------------------------------------------------------------------------------------

HIDDEN = 32
HEADS = 2
TINY: dict[str, Any] = {
    # widths
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size", "word_embed_proj_dim",
                     "text_embed_dim", "vision_embed_dim", "projection_dim", "hidden_dim_text", "n_embed",
                     "d_embed", "encoder_hidden_size", "decoder_hidden_size", "true_hidden_size",
                     "intra_bottleneck_size"), HIDDEN),
    # depths
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
                     "num_encoder_layers", "num_decoder_layers", "text_layers", "vision_layers", "depth"), 2),
    # heads
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_decoder_attention_heads", "num_encoder_attention_heads"), HEADS),
    "num_key_value_heads": 1,
    **dict.fromkeys(("head_dim", "d_kv", "kv_channels", "attention_head_dim", "qk_nope_head_dim", "v_head_dim"),
                    HIDDEN // HEADS),
    "qk_rope_head_dim": 8, "kv_lora_rank": 16, "q_lora_rank": 16,
    # feed-forward
    **dict.fromkeys(("intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner",
                     "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_ffn_dim",
                     "encoder_intermediate_size", "decoder_intermediate_size"), 37),
    # experts
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
    # vocabulary and positions
    "vocab_size": 99, "max_position_embeddings": 512, "n_positions": 512, "n_ctx": 512,
    # vision
    "image_size": 32, "patch_size": 8, "num_channels": 3,
    # speech
    "num_mel_bins": 8, "max_source_positions": 16, "max_target_positions": 64,
    "conv_dim": [16, 16], "conv_stride": [5, 4], "conv_kernel": [10, 4], "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2, "layerdrop": 0.0, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
    # never download anything
    "use_pretrained_backbone": False, "use_timm_backbone": False,
}
# state-space (Mamba) sizes, a last try for hybrid models whose config checks them against the hidden size
SSM: dict[str, Any] = {"mamba_n_heads": 2, "mamba_d_head": 32, "mamba_n_groups": 1, "n_groups": 1, "mamba_d_state": 16,
                       "state_size": 16, "ssm_state_size": 16, "mamba_expand": 2, "expand": 2, "mamba_d_conv": 4,
                       "conv_kernel": 4, "time_step_rank": 4, "attn_layer_indices": [1], "attn_layer_period": 2,
                       "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1,
                       "hybrid_layer_ids": [1]}
# list-valued settings (per stage): keep the number of stages, make each stage tiny
LISTS = {
    "hidden_sizes": lambda n: [8 * 2 ** i for i in range(n)],
    "depths": lambda n: [1] * n,
    "num_heads": lambda n: [HEADS] * n,
    "num_attention_heads": lambda n: [1] * n,
    "embed_dims": lambda n: [8 * 2 ** i for i in range(n)],
    "num_layers": lambda n: [1] * n,
    "conv_dim": lambda n: [16] * n,
}
SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "encoder_config", "decoder_config", "speech_config",
               "qformer_config", "backbone_config", "image_config")


TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 0,
             "sep_token_id": 2, "cls_token_id": 1, "mask_token_id": 3, "unk_token_id": 0}
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
        if isinstance(value, list) != isinstance(current, (list, tuple)) and not (ssm and key in SSM and current is None):
            continue
        if current is None and key in ("head_dim", "num_key_value_heads", "n_inner", "qk_rope_head_dim",
                                       "kv_lora_rank", "q_lora_rank", "moe_intermediate_size"):
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
        if key in own and key not in out and isinstance(current, (list, tuple)) and current and all(isinstance(v, int) for v in current):
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


# --- inputs ----------------------------------------------------------------------------------------------------------

def _int(cfg: Any, *names: str, default: int) -> int:
    for name in names:
        for c in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None),
                  getattr(cfg, "audio_config", None)):
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
        if "decoder_input_ids" in params and (getattr(cfg, "is_encoder_decoder", False) or "decoder_input_ids" in params):
            cand = {**cand, "decoder_input_ids": ids(5)}
        if "attention_mask" in cand and "attention_mask" not in params:
            cand.pop("attention_mask")
        cand = {k: v for k, v in cand.items() if k in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())}
        if cand:
            out.append(cand)
        # the same without decoder_input_ids, for models that make their own
        if "decoder_input_ids" in cand:
            out.append({k: v for k, v in cand.items() if k != "decoder_input_ids"})
    return out


# --- running ---------------------------------------------------------------------------------------------------------

def tensors(obj: Any, depth: int = 0) -> list[Any]:
    """Every tensor in an output (ModelOutput.to_tuple(), nested tuples/lists/dicts, cache objects), in order."""
    import torch
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth > 6 or obj is None or isinstance(obj, (str, bytes, int, float, bool, torch.nn.Module)):
        return []
    if hasattr(obj, "to_tuple"):
        return tensors(obj.to_tuple(), depth + 1)
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v, depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors(v, depth + 1)]
    if hasattr(obj, "__dict__"):
        return [t for v in vars(obj).values() for t in tensors(v, depth + 1)]
    return []


def compare(expected: Any, actual: Any) -> tuple[bool, float]:
    import torch
    a, b = tensors(expected), tensors(actual)
    if len(a) != len(b):
        return False, float("inf")
    worst = 0.0
    ok = True
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, float("inf")
        if x.is_floating_point() or x.is_complex():
            if x.numel():
                diff = (x.double() - y.double()).abs()
                finite = torch.isfinite(diff)
                if finite.any():
                    worst = max(worst, diff[finite].max().item())
            if not torch.allclose(x, y, atol=1e-4, rtol=1e-3, equal_nan=True):
                ok = False
        elif not torch.equal(x, y):
            ok = False
    return ok, worst


def error_text(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"[:300]


TRAIN = os.environ.get("HF_SWEEP_TRAIN") == "1"  # --train, passed on to the workers
CHECKPOINTING = os.environ.get("HF_SWEEP_CHECKPOINTING") == "1"  # --gradient-checkpointing


class GraphCounter:
    """A backend that counts graphs and runs them as they are (with --train, compiles them with `inner`)."""

    def __init__(self, inner: Any = None) -> None:
        self.graphs = 0
        self.inner = inner

    def __call__(self, gm: Any, example_inputs: list) -> Any:
        self.graphs += 1
        return gm.forward if self.inner is None else self.inner(gm, example_inputs)


def step(model: Any, call: Any, inputs: dict[str, Any]) -> Any:
    """One call of `call` (the model, eager or compiled) from seed 0: under no_grad, or with --train a training step
    whose gradients are returned after the outputs."""
    import torch
    torch.manual_seed(0)
    if not TRAIN:
        with torch.no_grad():
            return call(**inputs)
    model.zero_grad(set_to_none=True)
    out = call(**inputs)
    losses = [t.float().mean() for t in tensors(out) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if losses:
        sum(losses).backward()
    return out, [p.grad for p in model.parameters()]


def short_path(filename: str) -> str:
    for marker in ("site-packages/", "/work/wt-sweep/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


_PROGRESS: Any = None


def phase(name: str) -> None:
    """Note in the progress file what the worker is doing now, so that a crash or hang names it."""
    if _PROGRESS is not None:
        _PROGRESS.write(json.dumps({"phase": name}) + "\n")
        _PROGRESS.flush()


def run_model(name: str) -> dict[str, Any]:
    import torch
    import framejit
    row: dict[str, Any] = {"model": name}
    model = expected = inputs = None
    failures = []
    # intermediate 37 first; then 40, for kernels that want sizes in multiples of 16 bytes (grouped_mm of experts);
    # then the config's own image and patch sizes (windowed vision models whose stages need bigger images);
    # then tiny state-space sizes too (hybrid Mamba models), with sub-configs given only their overrides
    for intermediate, tiny_images, ssm in ((37, True, False), (40, True, False), (37, False, False), (40, True, True)):
        phase(f"build and eager, intermediate {intermediate}, tiny images {tiny_images}, ssm sizes {ssm}")
        try:
            model = build_model(name, intermediate, tiny_images, ssm)
        except BaseException as exc:  # noqa: BLE001 - every failure is a row
            failures.append("build: " + error_text(exc))
            continue
        for cand in candidate_inputs(model):
            try:
                torch.manual_seed(0)
                start = time.perf_counter()
                with torch.no_grad():
                    expected = model(**cand)
                row["eager_s"] = round(time.perf_counter() - start, 3)
                inputs = cand
                break
            except BaseException as exc:  # noqa: BLE001
                failures.append("eager: " + error_text(exc))
        if inputs is not None:
            break
    if inputs is None:
        row.update(status="not built", reason=failures[0] if failures else "no inputs",
                   last_reason=failures[-1] if failures else "")
        return row
    row["variant"] = (f"intermediate {intermediate}" + ("" if tiny_images else ", default image size") +
                      (", tiny state-space sizes, sub-configs from overrides only" if ssm else ""))
    row["model_class"] = type(model).__name__
    row["params"] = sum(p.numel() for p in model.parameters())
    row["status"] = "built"
    row["inputs"] = ",".join(f"{k}{list(v.shape)}" for k, v in inputs.items())

    if CHECKPOINTING:
        row["checkpointing"] = bool(getattr(model, "supports_gradient_checkpointing", False))
        if row["checkpointing"]:
            try:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                model.train()
            except BaseException as exc:  # noqa: BLE001
                row.update(checkpointing=False, checkpointing_error=error_text(exc))
    if TRAIN:
        phase("eager training step")
        try:
            expected = step(model, model, inputs)
        except BaseException as exc:  # noqa: BLE001
            row.update(status="not built", reason="eager training step: " + error_text(exc))
            return row

    # framejit
    phase("framejit.optimize")
    framejit.reset()
    counter = GraphCounter(framejit.backends.lookup_backend("aot_eager") if TRAIN else None)
    start = time.perf_counter()
    try:
        actual = step(model, framejit.optimize(counter)(model), inputs)
        ok, worst = compare(expected, actual)
        row.update(fj_status="ok" if ok else "mismatch", fj_max_err=worst)
    except BaseException as exc:  # noqa: BLE001
        row.update(fj_status="error", fj_error=error_text(exc), fj_error_tb=traceback.format_exc()[-3000:])
    row["fj_s"] = round(time.perf_counter() - start, 3)
    row["fj_graphs"] = counter.graphs
    framejit.reset()
    phase("framejit.explain")
    try:
        torch.manual_seed(0)
        with torch.set_grad_enabled(TRAIN):
            explained = framejit.explain(model)(**inputs)
        row["fj_breaks"] = explained.graph_break_count
        reasons = []
        for br in explained.break_reasons:
            frame = br.user_stack[-1] if br.user_stack else None
            reasons.append({"reason": br.reason[:500],
                            "at": f"{short_path(frame.filename)}:{frame.lineno}" if frame else "",
                            "line": (frame.line or "").strip()[:200] if frame else ""})
        row["fj_break_reasons"] = reasons
        if reasons:
            row.update(fj_first_break=reasons[0]["reason"], fj_first_break_at=reasons[0]["at"],
                       fj_first_break_line=reasons[0]["line"])
    except BaseException as exc:  # noqa: BLE001
        row["fj_explain_error"] = error_text(exc)
        if row.get("fj_status") == "ok":
            row.update(fj_status="error", fj_error="explain: " + error_text(exc))
    framejit.reset()

    # torch.compile
    phase("torch.compile")
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    from torch._dynamo.backends.registry import lookup_backend
    counter = GraphCounter(lookup_backend("aot_eager") if TRAIN else None)
    start = time.perf_counter()
    try:
        with _ModuleInitKept():
            actual = step(model, torch.compile(model, backend=counter), inputs)
        ok, worst = compare(expected, actual)
        row.update(tc_status="ok" if ok else "mismatch", tc_max_err=worst)
    except BaseException as exc:  # noqa: BLE001
        row.update(tc_status="error", tc_error=error_text(exc))
    row["tc_s"] = round(time.perf_counter() - start, 3)
    row["tc_graphs"] = counter.graphs
    row["tc_breaks"] = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return row


class _ModuleInitKept:
    """torch.compile wraps nn.Module.__init__/__setstate__ for good, the first time it runs in a process (to tag
    modules made in forward): this puts them back after torch.compile's phase, so that the next model's framejit
    run sees the process as it is without torch.compile (which patches them again when it next runs)."""

    def __enter__(self) -> None:
        import torch
        self.kept = torch.nn.Module.__init__, torch.nn.Module.__setstate__
        self.flagged = "___needs_generation_tag_patch" in vars(torch.nn.Module)

    def __exit__(self, *exc: Any) -> None:
        import torch
        torch.nn.Module.__init__, torch.nn.Module.__setstate__ = self.kept
        if not self.flagged and "___needs_generation_tag_patch" in vars(torch.nn.Module):
            delattr(torch.nn.Module, "___needs_generation_tag_patch")


def worker(names: list[str], progress: str) -> None:
    """Run `names` in this process, appending a start line and a result line per model to `progress`."""
    sys.path.insert(0, ROOT)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    warnings.simplefilter("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    import torch
    torch.set_num_threads(1)
    import framejit  # noqa: F401
    global _PROGRESS
    with open(progress, "a") as f:
        _PROGRESS = f
        for name in names:
            f.write(json.dumps({"start": name}) + "\n")
            f.flush()
            try:
                row = run_model(name)
            except BaseException as exc:  # noqa: BLE001
                row = {"model": name, "status": "built", "reason": "sweep: " + error_text(exc)}
            f.write(json.dumps({"row": row}, default=str) + "\n")
            f.flush()


# --- the parent --------------------------------------------------------------------------------------------------------

def all_model_types() -> tuple[list[str], list[str]]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    buildable = [name for name in CONFIG_MAPPING_NAMES if name in MODEL_MAPPING_NAMES]
    return buildable, [name for name in CONFIG_MAPPING_NAMES if name not in MODEL_MAPPING_NAMES]


class Batch:
    def __init__(self, names: list[str], tmpdir: str, index: int, timeout: float, max_rss_gb: float) -> None:
        self.names, self.timeout, self.max_rss_gb = list(names), timeout, max_rss_gb
        self.progress = os.path.join(tmpdir, f"batch{index}.jsonl")
        self.log = open(os.path.join(tmpdir, f"batch{index}.log"), "w")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", ",".join(names),
                                      "--progress", self.progress], cwd=ROOT, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.size = 0
        self.last_progress = time.monotonic()

    def rss_gb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 2 ** 20
        except OSError:
            pass
        return 0.0

    def read(self) -> tuple[list[dict[str, Any]], str | None]:
        rows, started, self.phase = [], None, ""
        if os.path.exists(self.progress):
            with open(self.progress) as f:
                for line in f:
                    if not line.endswith("\n"):
                        break
                    item = json.loads(line)
                    if "start" in item:
                        started, self.phase = item["start"], ""
                    elif "phase" in item:
                        self.phase = item["phase"]
                    else:
                        rows.append(item["row"])
                        started = None
        return rows, started

    def poll(self) -> str | None:
        """None while running; "done", "crash" or "hang" once finished."""
        size = os.path.getsize(self.progress) if os.path.exists(self.progress) else 0
        if size != self.size:
            self.size, self.last_progress = size, time.monotonic()
        code = self.proc.poll()
        if code is not None:
            self.log.close()
            return "done" if code == 0 else f"crash (exit {code})"
        rss = self.rss_gb()
        if rss > self.max_rss_gb:
            self.proc.kill()
            self.proc.wait()
            self.log.close()
            return f"out of memory (resident {rss:.1f} GB > {self.max_rss_gb:.0f} GB, killed)"
        if time.monotonic() - self.last_progress > self.timeout:
            self.proc.kill()
            self.proc.wait()
            self.log.close()
            return f"hang (no progress for {self.timeout:.0f} s)"
        return None


def run_all(names: list[str], jobs: int, batch: int, timeout: float, out_dir: str, max_rss_gb: float,
            resume: bool) -> list[dict[str, Any]]:
    tmpdir = tempfile.mkdtemp(prefix="hf_sweep_", dir=out_dir)
    rows: list[dict[str, Any]] = []
    partial = os.path.join(out_dir, "hf_sweep.partial.jsonl")
    if resume and os.path.exists(partial):  # keep the rows of an interrupted sweep, run the rest
        with open(partial) as f:
            rows = [r for r in (json.loads(line) for line in f if line.endswith("\n")) if r["model"] in names]
    elif os.path.exists(partial):
        os.remove(partial)
    done_names: set[str] = {r["model"] for r in rows}
    todo = [n for n in names if n not in done_names]
    queue = [todo[i:i + batch] for i in range(0, len(todo), batch)]
    running: list[Batch] = []
    index = 0
    t0 = time.monotonic()
    while queue or running:
        while queue and len(running) < jobs:
            running.append(Batch(queue.pop(0), tmpdir, index, timeout, max_rss_gb))
            index += 1
        time.sleep(0.5)
        for b in list(running):
            state = b.poll()
            if state is None:
                continue
            running.remove(b)
            got, started = b.read()
            if state != "done":
                crashed = started or next((n for n in b.names if n not in {r["model"] for r in got}), None)
                if crashed is not None:
                    with open(b.log.name) as f:
                        tail = f.read()[-2000:]
                    got.append({"model": crashed, "status": "crash", "reason": f"{state} in {b.phase or '?'}",
                                "log_tail": tail,
                                "fj_status": "crash"})
            for r in got:
                rows.append(r)
                done_names.add(r["model"])
                with open(partial, "a") as f:
                    f.write(json.dumps(r, default=str) + "\n")
                print(f"[{len(done_names)}/{len(names)} {time.monotonic() - t0:6.0f}s] {summary_line(r)}", flush=True)
            rest = [n for n in b.names if n not in done_names]
            if rest:
                queue.insert(0, rest)
    order = {n: i for i, n in enumerate(names)}
    return sorted(rows, key=lambda r: order.get(r["model"], 0))


def summary_line(r: dict[str, Any]) -> str:
    if r.get("status") != "built":
        return f"{r['model']}: {r.get('status')} - {str(r.get('reason', ''))[:120]}"
    text = (f"{r['model']}: fj {r.get('fj_graphs')} graphs {r.get('fj_breaks')} breaks {r.get('fj_status')}; "
            f"tc {r.get('tc_graphs')} graphs {r.get('tc_status')}")
    if r.get("fj_error"):
        text += f" | fj error {r['fj_error'][:120]}"
    if r.get("fj_first_break"):
        text += f" | first break: {r['fj_first_break'][:100]}"
    return text


def normalise(reason: str) -> str:
    reason = re.sub(r"0x[0-9a-fA-F]+", "<addr>", reason)
    reason = re.sub(r"\bat [^ ,>]+\.py:\d+", "at <file>", reason)
    reason = re.sub(r"\d+", "N", reason)
    return reason.strip()[:200]


def count(rows: list[dict[str, Any]], skipped: list[str]) -> dict[str, int]:
    built = [r for r in rows if r.get("status") == "built"]
    crashes = [r for r in rows if r.get("status") == "crash"]
    not_built = [r for r in rows if r.get("status") == "not built"]
    eager_crashes = [r for r in crashes if "build and eager" in str(r.get("reason"))]
    fj_one = [r for r in built if r.get("fj_status") == "ok" and r.get("fj_graphs") == 1 and not r.get("fj_breaks")]
    tc_one = [r for r in built if r.get("tc_status") == "ok" and r.get("tc_graphs") == 1 and not r.get("tc_breaks")]
    counts = {
        "model types with an AutoModel class (swept)": len(rows),
        "config-only types skipped (no AutoModel class)": len(skipped),
        "not built": len(not_built),
        "built": len(built),
        "framejit: one graph, no break, matches eager": len(fj_one),
        "torch.compile: one graph, no break, matches eager": len(tc_one),
        "framejit: one graph (breaks outside it allowed), matches eager":
            sum(r.get("fj_status") == "ok" and r.get("fj_graphs") == 1 for r in built),
        "torch.compile: one graph (breaks outside it allowed), matches eager":
            sum(r.get("tc_status") == "ok" and r.get("tc_graphs") == 1 for r in built),
        "framejit: ok (matches eager)": sum(r.get("fj_status") == "ok" for r in built),
        "torch.compile: ok (matches eager)": sum(r.get("tc_status") == "ok" for r in built),
        "framejit mismatches": sum(r.get("fj_status") == "mismatch" for r in built),
        "torch.compile mismatches": sum(r.get("tc_status") == "mismatch" for r in built),
        "framejit errors": sum(r.get("fj_status") == "error" for r in built),
        "torch.compile errors": sum(r.get("tc_status") == "error" for r in built),
        "crashes/hangs/out of memory while building or running eagerly (not built)": len(eager_crashes),
        "crashes/hangs/out of memory in a JIT (or phase unknown)": len(crashes) - len(eager_crashes),
        "framejit graphs (sum)": sum(r.get("fj_graphs") or 0 for r in built),
        "torch.compile graphs (sum)": sum(r.get("tc_graphs") or 0 for r in built),
        "framejit breaks (sum)": sum(r.get("fj_breaks") or 0 for r in built),
        "torch.compile breaks (sum)": sum(r.get("tc_breaks") or 0 for r in built),
    }
    return counts


def report(rows: list[dict[str, Any]], skipped: list[str], out_dir: str, elapsed: float, partial: bool) -> str:
    import torch
    import transformers
    built = [r for r in rows if r.get("status") == "built"]
    crashes = [r for r in rows if r.get("status") == "crash" or r.get("fj_status") == "crash"]
    lines = []
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines.append(f"hf_sweep {'(PARTIAL) ' if partial else ''}{stamp}: torch {torch.__version__}, transformers "
                 f"{transformers.__version__}, Python {sys.version.split()[0]}, {elapsed / 60:.1f} min")
    counts = count(rows, skipped)
    lines.append("")
    lines += [f"{v:6d}  {k}" for k, v in counts.items()]
    hist: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in built:
        if r.get("fj_first_break"):
            hist[normalise(r["fj_first_break"])].append(r)
    lines.append("")
    lines.append(f"framejit's first break reason per model ({sum(map(len, hist.values()))} models with a break, "
                 f"{len(hist)} distinct reasons):")
    for reason, rs in sorted(hist.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = rs[0]
        lines.append(f"{len(rs):5d}  {reason}")
        lines.append(f"       e.g. {ex['model']} at {ex.get('fj_first_break_at')}: {ex.get('fj_first_break_line')}")
    for status in ("mismatch", "error"):
        bad = [r for r in built if r.get("fj_status") == status]
        lines.append("")
        lines.append(f"framejit {status}es ({len(bad)}):" if status == "mismatch" else f"framejit errors ({len(bad)}):")
        for r in bad:
            extra = f"max err {r.get('fj_max_err')}" if status == "mismatch" else r.get("fj_error")
            lines.append(f"  {r['model']}: {extra} (tc {r.get('tc_status')})")
    lines.append("")
    lines.append(f"crashes/hangs ({len(crashes)}):")
    for r in crashes:
        lines.append(f"  {r['model']}: {r.get('reason')}")
    text = "\n".join(lines)
    with open(os.path.join(out_dir, "hf_sweep.json"), "w") as f:
        json.dump({"summary": text, "date": stamp, "commit": _commit(),
                   "train": os.environ.get("HF_SWEEP_TRAIN") == "1",
                   "checkpointing": os.environ.get("HF_SWEEP_CHECKPOINTING") == "1", "counts": counts,
                   "skipped_no_automodel": skipped, "partial": partial, "rows": rows}, f, indent=1, default=str)
    with open(os.path.join(out_dir, "hf_sweep.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in r.items()})
    with open(os.path.join(out_dir, "hf_sweep.txt"), "w") as f:
        f.write(text + "\n")
    return text


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def markdown(data: dict[str, Any], command: str) -> str:
    """benchmarks/hf_sweep_results.md from the JSON this script writes."""
    import torch
    import transformers
    rows = data["rows"]
    counts = count(rows, data.get("skipped_no_automodel", []))
    date = data.get("date") or re.sub(r"^hf_sweep (\(PARTIAL\) )?", "", data["summary"].split(":")[0] + ":" +
                                      data["summary"].split(":")[1])

    def cell(text: Any, limit: int = 160) -> str:
        text = " ".join(str(text if text is not None else "").split())
        text = text[:limit] + ("..." if len(text) > limit else "")
        return text.replace("|", "\\|").replace("`", "'")

    built = [r for r in rows if r.get("status") == "built"]
    commit = data.get("commit") or "(commit not recorded)"
    if data.get("train"):
        how = ("Each built model runs a training step (eval mode, so that dropout is off; gradients set to None, the "
               "mean of every floating output that requires grad summed into a loss, `loss.backward()`): eager; "
               "`framejit.optimize(counting aot_eager backend)` (not fullgraph) then `framejit.explain` for the "
               "breaks; `torch.compile(model, backend=counting aot_eager backend)` after `torch._dynamo.reset()`. "
               "Status *ok* means the outputs and every parameter's gradient (None where eager's is None) are "
               "allclose to eager's (atol 1e-4, rtol 1e-3).")
        if data.get("checkpointing"):
            how += (" With gradient checkpointing: a model that supports it gets `gradient_checkpointing_enable("
                    "gradient_checkpointing_kwargs={\"use_reentrant\": False})` and runs in train mode (dropout on, "
                    "each step from seed 0); the checkpointing column says whether it was on.")
    else:
        how = ("Each built model runs in inference (eval, no_grad): eager; `framejit.optimize(counting backend)` "
               "(backend eager, not fullgraph) then `framejit.explain(model)(**inputs)` for the breaks; "
               "`torch.compile(model, backend=counting backend)` after `torch._dynamo.reset()` (breaks from dynamo's "
               "graph_break counter). Status *ok* means every tensor of `out.to_tuple()` (caches included) is "
               "allclose to eager's (atol 1e-4, rtol 1e-3).")
    out = [f"# framejit and torch.compile on every transformers architecture{' (PARTIAL)' if data['partial'] else ''}"
           f"{', training' if data.get('train') else ''}",
           "",
           f"Measured {date} on framejit {commit}, torch {torch.__version__} (CPU), "
           f"transformers {transformers.__version__}, Python {sys.version.split()[0]}, a shared 2-core machine, "
           f"with `{command}` (one worker, 10 models per subprocess).",
           "",
           "How: every model type of `CONFIG_MAPPING_NAMES` that `AutoModel` has a class for is built from its config "
           "with generic tiny overrides (hidden 32, 2 layers, 2 heads, 1 key/value head, intermediate 37, vocab 99, "
           "image 32 / patch 8, ...; set only where the config class has that setting; text/vision/audio sub-configs "
           "alike; if that fails, intermediate 40, then the config's own image size) and random weights, and called "
           "eagerly on inputs chosen from `main_input_name` and the forward signature. Types that fail to build or "
           f"run eagerly are *not built* and not counted further. {how} A crash or hang of the subprocess is pinned on "
           "the model that was running. Raw rows: `python benchmarks/hf_sweep.py` writes "
           "`hf_sweep_out/hf_sweep.{csv,json}`.",
           "", "## Counts", "", "| count | what |", "|---:|---|"]
    out += [f"| {v} | {k} |" for k, v in counts.items()]
    hist: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in built:
        if r.get("fj_first_break"):
            hist[normalise(r["fj_first_break"])].append(r)
    out += ["", "## framejit's first graph break per model, by reason", "",
            f"{sum(map(len, hist.values()))} built models break at least once; {len(hist)} distinct first reasons "
            "(addresses and numbers normalised).", "",
            "| models | first break reason | example | source line |", "|---:|---|---|---|"]
    for reason, rs in sorted(hist.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = rs[0]
        out.append(f"| {len(rs)} | {cell(reason, 200)} | {ex['model']} ({cell(ex.get('fj_first_break_at'))}) | "
                   f"`{cell(ex.get('fj_first_break_line'), 120)}` |")
    for title, pick in (("framejit mismatches (wrong results)", lambda r: r.get("fj_status") == "mismatch"),
                        ("framejit errors", lambda r: r.get("fj_status") == "error"),
                        ("crashes and hangs", lambda r: r.get("status") == "crash"),
                        ("torch.compile mismatches and errors", lambda r: r.get("tc_status") in ("mismatch", "error"))):
        bad = [r for r in rows if pick(r)]
        out += ["", f"## {title} ({len(bad)})", ""]
        for r in bad:
            if r.get("status") == "crash":
                out.append(f"- {r['model']}: {cell(r.get('reason'), 300)}")
                continue
            if "torch.compile" in title:
                detail = r.get("tc_error") or f"max abs err {r.get('tc_max_err')}"
            else:
                detail = r.get("fj_error") or f"max abs err {r.get('fj_max_err')}"
            out.append(f"- {r['model']}: {cell(detail, 300)} (fj {r.get('fj_status')}, tc {r.get('tc_status')})")
    out += ["", "## Per model (built)", "",
            "| model | fj graphs | fj breaks | fj status | tc graphs | tc status | first break reason |",
            "|---|---:|---:|---|---:|---|---|"]
    for r in built:
        first = r.get("fj_first_break")
        first = f"{cell(first, 140)} ({cell(r.get('fj_first_break_at'))})" if first else ""
        out.append(f"| {r['model']} | {r.get('fj_graphs', '')} | {r.get('fj_breaks', '')} | {r.get('fj_status', '')} | "
                   f"{r.get('tc_graphs', '')} | {r.get('tc_status', '')} | {first} |")
    not_built = [r for r in rows if r.get("status") == "not built"]
    out += ["", f"## Not built ({len(not_built)})", "", "| model | reason |", "|---|---|"]
    out += [f"| {r['model']} | {cell(r.get('reason'), 200)} |" for r in not_built]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated model types (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=10, help="models per subprocess")
    parser.add_argument("--timeout", type=float, default=300, help="seconds without progress before a kill")
    parser.add_argument("--max-rss-gb", type=float, default=6, help="kill a worker whose resident memory passes this")
    parser.add_argument("--resume", action="store_true", help="keep the models of OUT/hf_sweep.partial.jsonl")
    parser.add_argument("--out", default="hf_sweep_out")
    parser.add_argument("--markdown", metavar="FILE", help="write FILE (e.g. benchmarks/hf_sweep_results.md) from "
                        "OUT/hf_sweep.json and stop")
    parser.add_argument("--command", default="python benchmarks/hf_sweep.py --jobs 1",
                        help="the command the markdown says made the results")
    parser.add_argument("--train", action="store_true", help="a training step (aot_eager backends) instead of "
                        "inference; outputs and gradients compared")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="--train with HF's gradient "
                        "checkpointing (use_reentrant=False) on, in train mode, where the model supports it")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--progress", help=argparse.SUPPRESS)
    parser.add_argument("--report-only", action="store_true", help="rebuild the report from OUT/hf_sweep.partial.jsonl")
    args = parser.parse_args(argv)
    if args.train or args.gradient_checkpointing:  # the workers read it at import
        os.environ["HF_SWEEP_TRAIN"] = "1"
    if args.gradient_checkpointing:
        os.environ["HF_SWEEP_CHECKPOINTING"] = "1"
    if args.worker:
        worker(args.worker.split(","), args.progress)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.makedirs(args.out, exist_ok=True)
    buildable, skipped = all_model_types()
    names = [n.strip() for n in args.models.split(",") if n.strip()] or buildable
    start = time.monotonic()
    if args.markdown:
        with open(os.path.join(args.out, "hf_sweep.json")) as f:
            data = json.load(f)
        with open(args.markdown, "w") as f:
            f.write(markdown(data, args.command))
        return
    if args.report_only:
        with open(os.path.join(args.out, "hf_sweep.partial.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.endswith("\n")]
        print(report(rows, skipped, args.out, 0.0, partial=len(rows) < len(names)))
        return
    rows = run_all(names, args.jobs, args.batch, args.timeout, args.out, args.max_rss_gb, args.resume)
    print()
    print(report(rows, skipped if not args.models else [], args.out, time.monotonic() - start, partial=False))


if __name__ == "__main__":
    main()
