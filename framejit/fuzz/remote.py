"""The parent's side of a worker subprocess (worker.py): starting it, sending it a program, and the verdict
that comes back, or crash / hang when it dies or stalls; and the signature that groups verdicts by probable
root cause."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import framejit

FAILURES = ("mismatch", "compiled_raised", "crash", "hang")
OUTCOMES = ("ok",) + FAILURES + ("eager_nondeterministic", "invalid")
_STARTUP_S = 120.0  # how long a worker may take to import torch and framejit


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
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "framejit.fuzz.worker", self.progress],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,
        )
        log.close()
        self.answers = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.answers), daemon=True).start()
        self.done = 0
        try:  # the worker says when it has imported torch and framejit, which is not the first program's time
            self.ready = self.answers.get(timeout=_STARTUP_S) is not None
        except queue.Empty:
            self.ready = False

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
        limit = self.timeout
        if not self.ready:
            phase = "worker start" if self.proc.poll() is None else "worker start (it exited)"
            self.stop()
            return {
                "outcome": "crash",
                "kind": "crash",
                "seconds": 0.0,
                "graphs": 0,
                "eager_raised": 0,
                "detail": f"the worker did not start: {phase}",
            }
        self.proc.stdin.write(json.dumps({"id": job, "path": path, "backend": backend}) + "\n")
        self.proc.stdin.flush()
        start = time.perf_counter()
        try:
            line = self.answers.get(timeout=limit)
        except queue.Empty:
            phase = self._phase()
            self.stop()
            return {
                "outcome": "hang",
                "kind": "hang",
                "seconds": round(time.perf_counter() - start, 3),
                "detail": f"no answer after {limit:.0f} s; last phase: {phase}",
                "graphs": 0,
                "eager_raised": 0,
            }
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
        return {
            "outcome": "crash",
            "kind": "crash",
            "seconds": round(seconds, 3),
            "graphs": 0,
            "eager_raised": 0,
            "detail": f"worker died ({how}) in phase: {phase}; stderr tail: {' | '.join(tail)[-600:]}",
        }

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
        text = blank(verdict["detail"].rpartition("compiled raised ")[2])[:120]
    return f"{verdict['outcome']} {verdict['kind']} {text}".strip()


def blank(text: str) -> str:
    """A message with generated names and numbers blanked, so that messages of one cause compare equal."""
    text = re.sub(
        r"\b(t|u|r|p|v|e|i|j|lst|dd|inner|helper|make|opaque|combine|count|Mod|m_|vals|rest|err)\d+\b", "<name>", text
    )
    return re.sub(r"\d+", "#", text)
