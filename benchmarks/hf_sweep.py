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
partial rows; --markdown FILE writes the Markdown summary (benchmarks/hf_sweep_results.md) from DIR/hf_sweep.json, and the
per-model rows beside it (FILE_per_model.md, FILE_not_built.md).

This file is the command line and a worker's run of one model; beside it, hf_sweep_models.py builds the tiny models
and their inputs, hf_sweep_batches.py runs the workers, hf_sweep_report.py writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # framejit and the sweep's other modules, for the parent and for its workers

from benchmarks.hf_sweep_batches import run_all  # noqa: E402
from benchmarks.hf_sweep_models import all_model_types, build_model, candidate_inputs  # noqa: E402
from benchmarks.hf_sweep_report import markdown, report  # noqa: E402

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
        row.update(
            status="not built",
            reason=failures[0] if failures else "no inputs",
            last_reason=failures[-1] if failures else "",
        )
        return row
    row["variant"] = (
        f"intermediate {intermediate}"
        + ("" if tiny_images else ", default image size")
        + (", tiny state-space sizes, sub-configs from overrides only" if ssm else "")
    )
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
            reasons.append(
                {
                    "reason": br.reason[:500],
                    "at": f"{short_path(frame.filename)}:{frame.lineno}" if frame else "",
                    "line": (frame.line or "").strip()[:200] if frame else "",
                }
            )
        row["fj_break_reasons"] = reasons
        if reasons:
            row.update(
                fj_first_break=reasons[0]["reason"],
                fj_first_break_at=reasons[0]["at"],
                fj_first_break_line=reasons[0]["line"],
            )
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated model types (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=10, help="models per subprocess")
    parser.add_argument("--timeout", type=float, default=300, help="seconds without progress before a kill")
    parser.add_argument("--max-rss-gb", type=float, default=6, help="kill a worker whose resident memory passes this")
    parser.add_argument("--resume", action="store_true", help="keep the models of OUT/hf_sweep.partial.jsonl")
    parser.add_argument("--out", default="hf_sweep_out")
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        help="write FILE (e.g. benchmarks/hf_sweep_results.md) from OUT/hf_sweep.json and stop",
    )
    parser.add_argument(
        "--command",
        default="python benchmarks/hf_sweep.py --jobs 1",
        help="the command the markdown says made the results",
    )
    parser.add_argument(
        "--train",
        action="store_true",
        help="a training step (aot_eager backends) instead of inference; outputs and gradients compared",
    )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="--train with HF's gradient "
        "checkpointing (use_reentrant=False) on, in train mode, where the model supports it",
    )
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
        for path, text in markdown(data, args.command, args.markdown.removesuffix(".md")).items():
            with open(path, "w") as f:
                f.write(text)
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
