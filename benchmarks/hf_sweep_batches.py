"""The parent of a sweep: models run in worker subprocesses, --batch per subprocess, --jobs at a time; a crash,
a hang or a worker past its memory limit is pinned on the model and phase that was running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER_SCRIPT = os.path.join(ROOT, "benchmarks", "hf_sweep.py")  # run with --worker: models in this process


class Batch:
    """One worker subprocess running `names`, watched for its exit, its progress and its memory."""

    def __init__(self, names: list[str], tmpdir: str, index: int, timeout: float, max_rss_gb: float) -> None:
        self.names, self.timeout, self.max_rss_gb = list(names), timeout, max_rss_gb
        self.progress = os.path.join(tmpdir, f"batch{index}.jsonl")
        self.log = open(os.path.join(tmpdir, f"batch{index}.log"), "w")
        self.proc = subprocess.Popen(
            [sys.executable, WORKER_SCRIPT, "--worker", ",".join(names), "--progress", self.progress],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.size = 0
        self.last_progress = time.monotonic()

    def rss_gb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 2**20
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


def run_all(
    names: list[str], jobs: int, batch: int, timeout: float, out_dir: str, max_rss_gb: float, resume: bool
) -> list[dict[str, Any]]:
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
    queue = [todo[i : i + batch] for i in range(0, len(todo), batch)]
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
                    got.append(
                        {
                            "model": crashed,
                            "status": "crash",
                            "reason": f"{state} in {b.phase or '?'}",
                            "log_tail": tail,
                            "fj_status": "crash",
                        }
                    )
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
    text = (
        f"{r['model']}: fj {r.get('fj_graphs')} graphs {r.get('fj_breaks')} breaks {r.get('fj_status')}; "
        f"tc {r.get('tc_graphs')} graphs {r.get('tc_status')}"
    )
    if r.get("fj_error"):
        text += f" | fj error {r['fj_error'][:120]}"
    if r.get("fj_first_break"):
        text += f" | first break: {r['fj_first_break'][:100]}"
    return text
