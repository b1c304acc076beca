"""The parent side: writes the programs, feeds them to worker subprocesses in batches (a fresh worker per batch,
and after a crash or hang, which is pinned on the program the worker was in), collects the verdicts, groups
the failures by signature, minimises some of each group and writes repro files."""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Sequence

import framejit
from framejit.fuzz.generate import generate

FAILURES = ("mismatch", "compiled_raised", "crash", "hang")
OUTCOMES = ("ok",) + FAILURES + ("eager_nondeterministic", "invalid")
_STARTUP_S = 60.0  # extra time the first program of a worker gets: importing torch and framejit


def _framejit_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(framejit.__file__)))


class Worker:
    """One worker subprocess, restarted when it dies, hangs or has done `batch` programs."""

    def __init__(self, workdir: str, batch: int, timeout: float) -> None:
        self.workdir = workdir
        self.batch = batch
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.answers: queue.Queue = queue.Queue()
        self.done = 0
        self.starts = 0

    def _start(self) -> None:
        self.starts += 1
        tag = f"{os.getpid()}_{id(self)}_{self.starts}"
        self.progress = os.path.join(self.workdir, f"progress_{tag}.txt")
        self.log_path = os.path.join(self.workdir, f"worker_{tag}.log")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_framejit_root(), os.getcwd()] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONHASHSEED"] = "0"
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "framejit.fuzz.worker", self.progress], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True)
        log.close()
        self.answers = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.answers), daemon=True).start()
        self.done = 0

    @staticmethod
    def _read(proc: subprocess.Popen, answers: queue.Queue) -> None:
        for line in proc.stdout:
            answers.put(line)
        answers.put(None)  # the worker exited

    def check(self, job: str, path: str, backend: str | None) -> dict:
        """The verdict on one program file: from the worker, or crash/hang when the worker died or stalled."""
        if self.proc is None or self.done >= self.batch:
            self.stop()
            self._start()
        limit = self.timeout + (_STARTUP_S if self.done == 0 else 0.0)
        self.proc.stdin.write(json.dumps({"id": job, "path": path, "backend": backend}) + "\n")
        self.proc.stdin.flush()
        start = time.perf_counter()
        try:
            line = self.answers.get(timeout=limit)
        except queue.Empty:
            phase = self._phase()
            self.stop()
            return {"outcome": "hang", "kind": "hang", "seconds": round(time.perf_counter() - start, 3),
                    "detail": f"no answer after {limit:.0f} s; last phase: {phase}", "graphs": 0, "eager_raised": 0}
        if line is None:
            return self._crashed(time.perf_counter() - start)
        self.done += 1
        return json.loads(line)

    def _phase(self) -> str:
        try:
            with open(self.progress) as f:
                return f.read().strip().partition("\t")[2] or "?"
        except OSError:
            return "before the first phase"

    def _crashed(self, seconds: float) -> dict:
        phase = self._phase()
        code = self.proc.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        with open(self.log_path, errors="replace") as f:
            tail = [line.rstrip() for line in f.readlines()[-6:] if line.strip()]
        self.proc = None
        return {"outcome": "crash", "kind": "crash", "seconds": round(seconds, 3), "graphs": 0, "eager_raised": 0,
                "detail": f"worker died ({how}) in phase: {phase}; stderr tail: {' | '.join(tail)[-600:]}"}

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: nothing else is in it
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None


@dataclasses.dataclass
class Result:
    index: int
    seed: int
    path: str
    verdict: dict

    @property
    def outcome(self) -> str:
        return self.verdict["outcome"]


def signature(verdict: dict) -> str:
    """What groups failures by probable root cause: outcome, kind, and for exceptions the message with numbers
    and names of generated variables blanked."""
    text = ""
    if verdict["outcome"] == "compiled_raised":
        text = verdict["detail"].rpartition("compiled raised ")[2]
        text = re.sub(r"\b(t|u|r|p|v|e|i|j|lst|dd|inner|helper|make|opaque|combine|count|Mod|m_|vals|rest|err)\d+\b",
                      "<name>", text)
        text = re.sub(r"\d+", "#", text)[:120]
    return f"{verdict['outcome']} {verdict['kind']} {text}".strip()


def run_programs(sources: Sequence[str], first_seed: int, workdir: str, *, batch: int = 50, jobs: int = 1,
                 timeout: float = 30.0, backend: str | None = None,
                 report: Callable[[Result], None] = lambda r: None) -> list[Result]:
    """Check each source (program i has seed first_seed + i); `jobs` workers share the list."""
    paths = []
    for i, src in enumerate(sources):
        path = os.path.join(workdir, f"program_{first_seed + i}.py")
        with open(path, "w") as f:
            f.write(src)
        paths.append(path)
    results: list[Result | None] = [None] * len(paths)
    lock = threading.Lock()

    def lane(indices: list[int]) -> None:
        worker = Worker(workdir, batch, timeout)
        try:
            for i in indices:
                verdict = worker.check(str(i), paths[i], backend)
                result = Result(i, first_seed + i, paths[i], verdict)
                with lock:
                    results[i] = result
                    report(result)
        finally:
            worker.stop()
    lanes = [list(range(j, len(paths), jobs)) for j in range(max(1, jobs))]
    threads = [threading.Thread(target=lane, args=(ix,)) for ix in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def fuzz(n: int, seed: int, *, out: str | None = None, batch: int = 50, jobs: int = 1, timeout: float = 30.0,
         backend: str | None = None, minimise: bool = True, per_signature: int = 1, verbose: bool = True,
         sources: Sequence[str] | None = None) -> dict:
    """Generate (or take) programs, check them, minimise failures, write repros; returns a summary dict."""
    out = out or tempfile.mkdtemp(prefix="framejit-fuzz-")
    os.makedirs(out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="work-", dir=out)
    start = time.perf_counter()
    if sources is None:
        sources = [generate(seed + i) for i in range(n)]
    say = print if verbose else (lambda *a, **k: None)
    done = [0]

    def report(r: Result) -> None:
        done[0] += 1
        if r.outcome in FAILURES:
            say(f"[{r.index} seed={r.seed}] {r.outcome} {r.verdict['kind']}: {r.verdict['detail'][:400]}", flush=True)
        if done[0] % 100 == 0:
            say(f"... {done[0]}/{len(sources)} programs, {time.perf_counter() - start:.0f} s", flush=True)
    results = run_programs(sources, seed, workdir, batch=batch, jobs=jobs, timeout=timeout, backend=backend,
                           report=report)
    elapsed = time.perf_counter() - start
    summary = summarise(results, elapsed, say)
    failing = [r for r in results if r.outcome in FAILURES]
    for r in failing:  # keep every failing program as it was generated
        with open(os.path.join(out, f"failing_{seed}_{r.index}.py"), "w") as f:
            f.write(sources[r.index])
    summary["repros"] = []
    if minimise and failing:
        from framejit.fuzz.minimise import minimise_failures
        summary["repros"] = minimise_failures(failing, sources, seed, out, workdir, per_signature=per_signature,
                                              timeout=timeout, backend=backend, say=say)
    summary["out"] = out
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({k: v for k, v in summary.items()}, f, indent=1, default=str)
    say(f"results in {out}")
    return summary


def summarise(results: list[Result], elapsed: float, say: Callable[..., None]) -> dict:
    counts = collections.Counter(r.outcome for r in results)
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for r in results:
        if r.outcome in FAILURES:
            groups[signature(r.verdict)].append(r.index)
    complete = sum(1 for r in results if r.outcome == "ok" and r.verdict.get("eager_raised") == 0)
    internal = [r.index for r in results if r.verdict.get("internal_errors")]
    n = max(1, len(results))
    say("")
    for name in OUTCOMES:
        say(f"{name:24s} {counts.get(name, 0)}")
    say(f"{'total':24s} {len(results)} programs in {elapsed:.1f} s ({len(results) / max(elapsed, 1e-9):.1f} programs/s)")
    say(f"ok with every call returning: {complete} ({100 * complete / n:.0f}%); programs with an internal-error "
        f"fallback: {len(internal)}; graphs compiled: {sum(r.verdict.get('graphs', 0) for r in results)}")
    if groups:
        say("\nfailures by signature:")
        for sig, idx in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            say(f"  {len(idx):4d}  {sig}   programs {idx[:12]}{' ...' if len(idx) > 12 else ''}")
    return {"counts": dict(counts), "seconds": round(elapsed, 1), "groups": dict(groups), "internal_errors": internal,
            "failures": {r.index: r.verdict for r in results if r.outcome in FAILURES}}
