"""`framejit bench` output: the result rows, the printed table, geomean summary, CSV/JSON/Markdown files."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
from typing import Any, Iterable, TextIO

from tabulate import tabulate

# the CSV/JSON columns, in table order
COLUMNS = (
    "model",
    "mode",
    "backend",
    "jit",
    "graphs",
    "breaks",
    "compiled",
    "first_call_s",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "max_error",
    "busy",
    "status",
    "error",
)
HEADERS = (
    "model",
    "mode",
    "backend",
    "jit",
    "graphs",
    "breaks",
    "compiled",
    "first call s",
    "eager ms",
    "compiled ms",
    "speedup",
    "max error",
    "busy",
    "status",
)


@dataclasses.dataclass
class Result:
    """One (model, mode, backend, jit) measurement; a failure is a row too (status "error")."""

    model: str
    mode: str  # "infer" or "train"
    backend: str
    jit: str  # "framejit" or "torch.compile"
    graphs: int | None = None
    breaks: int | None = None
    compiled: str | None = None  # graphs the backend compiled whole / graphs handed to it ("3/3"; framejit only)
    first_call_s: float | None = None
    eager_ms: float | None = None
    compiled_ms: float | None = None
    speedup: float | None = None  # eager_ms / compiled_ms
    max_error: float | None = None  # compiled vs eager: outputs (infer); losses and parameters (train)
    busy: float | None = None  # share of the CPUs other processes used while this row was timed
    status: str = "ok"  # ok | mismatch (beyond tolerance) | error
    error: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)  # graph-break / fallback reasons, choices

    def record(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in COLUMNS}


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if digits >= 0 else f"{value:.1e}"
    return str(value)


def table_rows(results: Iterable[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        status = r.status if r.status == "ok" else f"{r.status}: {r.error}"[:90]
        rows.append(
            [
                r.model,
                r.mode,
                r.backend,
                r.jit,
                _fmt(r.graphs, 0),
                _fmt(r.breaks, 0),
                _fmt(r.compiled, 0),
                _fmt(r.first_call_s, 2),
                _fmt(r.eager_ms, 3),
                _fmt(r.compiled_ms, 3),
                _fmt(r.speedup, 2) + ("x" if r.speedup is not None else ""),
                _fmt(r.max_error, -1),
                "-" if r.busy is None else f"{r.busy:.0%}",
                status,
            ]
        )
    return rows


def geomeans(results: Iterable[Result]) -> list[tuple[str, str, str, float, int]]:
    """(jit, backend, mode, geomean speedup, rows) over the rows that ran and matched eager."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        if r.status == "ok" and r.speedup:
            groups.setdefault((r.jit, r.backend, r.mode), []).append(r.speedup)
    return [
        (jit, backend, mode, math.exp(sum(map(math.log, s)) / len(s)), len(s))
        for (jit, backend, mode), s in sorted(groups.items())
    ]


def first_call_totals(results: Iterable[Result]) -> list[tuple[str, str, str, float, int]]:
    """(jit, backend, mode, sum of first-call seconds, rows) over the rows that ran and matched eager: one
    compile time is noisy on a shared machine (10-20%), the suite's total much less so."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        if r.status == "ok" and r.first_call_s is not None:
            groups.setdefault((r.jit, r.backend, r.mode), []).append(r.first_call_s)
    return [(jit, backend, mode, sum(s), len(s)) for (jit, backend, mode), s in sorted(groups.items())]


def format_table(results: list[Result], fmt: str = "simple") -> str:
    text = tabulate(table_rows(results), headers=HEADERS, tablefmt=fmt, disable_numparse=True)
    bullet = "- " if fmt == "github" else ""  # a Markdown list, not one run-on paragraph
    summary = [
        f"{bullet}geomean speedup {jit} {backend} {mode}: {g:.2f}x over {n} models"
        for jit, backend, mode, g, n in geomeans(results)
    ]
    summary += [
        f"{bullet}first calls {jit} {backend} {mode}: {t:.2f} s in all over {n} models"
        for jit, backend, mode, t, n in first_call_totals(results)
    ]
    return text + ("\n\n" + "\n".join(summary) if summary else "")


def format_notes(results: list[Result]) -> str:
    """Why graphs broke or frames ran as Python, per row: what a JIT developer wants to see."""
    lines = []
    for r in results:
        for note in r.notes:
            lines.append(f"  {r.model}/{r.mode}/{r.backend}/{r.jit}: {note}")
    return "capture notes:\n" + "\n".join(lines) if lines else ""


def print_report(results: list[Result], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    print(format_table(results), file=stream)
    notes = format_notes(results)
    if notes:
        print("\n" + notes, file=stream)


def write_files(results: list[Result], out_dir: str, meta: dict[str, Any]) -> list[str]:
    """bench.csv (the columns), bench.json (rows with notes, and run metadata), bench.md (the table)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"bench.{ext}") for ext in ("csv", "json", "md")]
    with open(paths[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(r.record() for r in results)
    with open(paths[1], "w") as f:
        json.dump(
            {
                "meta": meta,
                "columns": list(COLUMNS),
                "rows": [dict(r.record(), notes=r.notes) for r in results],
                "geomean_speedup": [
                    dict(jit=j, backend=b, mode=m, speedup=g, models=n) for j, b, m, g, n in geomeans(results)
                ],
            },
            f,
            indent=2,
        )
    with open(paths[2], "w") as f:
        f.write(format_table(results, fmt="github") + "\n")
        notes = format_notes(results)
        if notes:
            f.write("\n```\n" + notes + "\n```\n")
    return paths


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, one line per step otherwise)."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True, width: int = 24) -> None:
        self.total, self.done, self.width, self.enabled = total, 0, width, enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def note(self, text: str) -> None:
        """Show what happens before the first step (priming), without advancing the bar."""
        if self.enabled:
            self.stream.write(("\r" + text.ljust(100)) if self.tty else text + "\n")
            self.stream.flush()

    def step(self, label: str) -> None:
        """Show that the job `label` starts now."""
        if not self.enabled:
            return
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total} {label}"
        self.stream.write(("\r" + line.ljust(100)) if self.tty else line + "\n")
        self.stream.flush()
        self.done += 1

    def close(self) -> None:
        if self.enabled:
            bar = "#" * self.width
            self.stream.write(
                ("\r" if self.tty else "")
                + f"[{bar}] {self.total}/{self.total} done".ljust(100 if self.tty else 0)
                + "\n"
            )
            self.stream.flush()
