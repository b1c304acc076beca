"""The sweep's report: counts, framejit's first break reasons by kind, DIR/hf_sweep.{csv,json,txt}, and the
Markdown summary (benchmarks/hf_sweep_results.md) made from the JSON."""

from __future__ import annotations

import collections
import csv
import datetime
import json
import os
import re
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COLUMNS = (
    "model",
    "status",
    "reason",
    "model_class",
    "inputs",
    "params",
    "eager_s",
    "fj_graphs",
    "fj_breaks",
    "fj_status",
    "fj_error",
    "fj_max_err",
    "fj_s",
    "fj_first_break",
    "fj_first_break_at",
    "fj_first_break_line",
    "fj_break_reasons",
    "tc_graphs",
    "tc_breaks",
    "tc_status",
    "tc_error",
    "tc_max_err",
    "tc_s",
    "checkpointing",
)


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
        "framejit: one graph (breaks outside it allowed), matches eager": sum(
            r.get("fj_status") == "ok" and r.get("fj_graphs") == 1 for r in built
        ),
        "torch.compile: one graph (breaks outside it allowed), matches eager": sum(
            r.get("tc_status") == "ok" and r.get("tc_graphs") == 1 for r in built
        ),
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
    lines.append(
        f"hf_sweep {'(PARTIAL) ' if partial else ''}{stamp}: torch {torch.__version__}, transformers "
        f"{transformers.__version__}, Python {sys.version.split()[0]}, {elapsed / 60:.1f} min"
    )
    counts = count(rows, skipped)
    lines.append("")
    lines += [f"{v:6d}  {k}" for k, v in counts.items()]
    hist: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in built:
        if r.get("fj_first_break"):
            hist[normalise(r["fj_first_break"])].append(r)
    lines.append("")
    lines.append(
        f"framejit's first break reason per model ({sum(map(len, hist.values()))} models with a break, "
        f"{len(hist)} distinct reasons):"
    )
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
        json.dump(
            {
                "summary": text,
                "date": stamp,
                "commit": _commit(),
                "train": os.environ.get("HF_SWEEP_TRAIN") == "1",
                "checkpointing": os.environ.get("HF_SWEEP_CHECKPOINTING") == "1",
                "counts": counts,
                "skipped_no_automodel": skipped,
                "partial": partial,
                "rows": rows,
            },
            f,
            indent=1,
            default=str,
        )
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
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip()
            or "?"
        )
    except OSError:
        return "?"


def markdown(data: dict[str, Any], command: str, stem: str) -> dict[str, str]:
    """Markdown files by name, from the JSON this script writes: the summary (`stem`.md, e.g.
    benchmarks/hf_sweep_results.md), and beside it the rows of the models built and of those not built (data, one
    row per model, kept apart from the summary)."""
    import torch
    import transformers

    rows = data["rows"]
    counts = count(rows, data.get("skipped_no_automodel", []))
    date = data.get("date") or re.sub(
        r"^hf_sweep (\(PARTIAL\) )?", "", data["summary"].split(":")[0] + ":" + data["summary"].split(":")[1]
    )

    def cell(text: Any, limit: int = 160) -> str:
        text = " ".join(str(text if text is not None else "").split())
        text = text[:limit] + ("..." if len(text) > limit else "")
        return text.replace("|", "\\|").replace("`", "'")

    built = [r for r in rows if r.get("status") == "built"]
    commit = data.get("commit") or "(commit not recorded)"
    if data.get("train"):
        how = (
            "Each built model runs a training step (eval mode, so that dropout is off; gradients set to None, the "
            "mean of every floating output that requires grad summed into a loss, `loss.backward()`): eager; "
            "`framejit.optimize(counting aot_eager backend)` (not fullgraph) then `framejit.explain` for the "
            "breaks; `torch.compile(model, backend=counting aot_eager backend)` after `torch._dynamo.reset()`. "
            "Status *ok* means the outputs and every parameter's gradient (None where eager's is None) are "
            "allclose to eager's (atol 1e-4, rtol 1e-3)."
        )
        if data.get("checkpointing"):
            how += (
                " With gradient checkpointing: a model that supports it gets `gradient_checkpointing_enable("
                'gradient_checkpointing_kwargs={"use_reentrant": False})` and runs in train mode (dropout on, '
                "each step from seed 0); the checkpointing column says whether it was on."
            )
    else:
        how = (
            "Each built model runs in inference (eval, no_grad): eager; `framejit.optimize(counting backend)` "
            "(backend eager, not fullgraph) then `framejit.explain(model)(**inputs)` for the breaks; "
            "`torch.compile(model, backend=counting backend)` after `torch._dynamo.reset()` (breaks from dynamo's "
            "graph_break counter). Status *ok* means every tensor of `out.to_tuple()` (caches included) is "
            "allclose to eager's (atol 1e-4, rtol 1e-3)."
        )
    out = [
        f"# framejit and torch.compile on every transformers architecture{' (PARTIAL)' if data['partial'] else ''}"
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
        "",
        "## Counts",
        "",
        "| count | what |",
        "|---:|---|",
    ]
    out += [f"| {v} | {k} |" for k, v in counts.items()]
    hist: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in built:
        if r.get("fj_first_break"):
            hist[normalise(r["fj_first_break"])].append(r)
    out += [
        "",
        "## framejit's first graph break per model, by reason",
        "",
        f"{sum(map(len, hist.values()))} built models break at least once; {len(hist)} distinct first reasons "
        "(addresses and numbers normalised).",
        "",
        "| models | first break reason | example | source line |",
        "|---:|---|---|---|",
    ]
    for reason, rs in sorted(hist.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = rs[0]
        out.append(
            f"| {len(rs)} | {cell(reason, 200)} | {ex['model']} ({cell(ex.get('fj_first_break_at'))}) | "
            f"`{cell(ex.get('fj_first_break_line'), 120)}` |"
        )
    for title, pick in (
        ("framejit mismatches (wrong results)", lambda r: r.get("fj_status") == "mismatch"),
        ("framejit errors", lambda r: r.get("fj_status") == "error"),
        ("crashes and hangs", lambda r: r.get("status") == "crash"),
        ("torch.compile mismatches and errors", lambda r: r.get("tc_status") in ("mismatch", "error")),
    ):
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
    names = {part: f"{os.path.basename(stem)}_{part}.md" for part in ("per_model", "not_built")}
    out += ["", "Per-model rows: " + ", ".join(f"[{n}]({n})" for n in names.values()) + "."]
    files, title = {f"{stem}.md": "\n".join(out) + "\n"}, out[0].removeprefix("# ")

    def header(what: str) -> list[str]:
        return [f"# {what}: {title}", "", f"Measured {date} on framejit {commit}, with `{command}`.", ""]

    out = header("Per model (built)") + [
        "| model | fj graphs | fj breaks | fj status | tc graphs | tc status | first break reason |",
        "|---|---:|---:|---|---:|---|---|",
    ]
    for r in built:
        first = r.get("fj_first_break")
        first = f"{cell(first, 140)} ({cell(r.get('fj_first_break_at'))})" if first else ""
        out.append(
            f"| {r['model']} | {r.get('fj_graphs', '')} | {r.get('fj_breaks', '')} | {r.get('fj_status', '')} | "
            f"{r.get('tc_graphs', '')} | {r.get('tc_status', '')} | {first} |"
        )
    files[os.path.join(os.path.dirname(stem), names["per_model"])] = "\n".join(out) + "\n"
    not_built = [r for r in rows if r.get("status") == "not built"]
    out = header(f"Not built ({len(not_built)})") + ["| model | reason |", "|---|---|"]
    out += [f"| {r['model']} | {cell(r.get('reason'), 200)} |" for r in not_built]
    files[os.path.join(os.path.dirname(stem), names["not_built"])] = "\n".join(out) + "\n"
    return files
