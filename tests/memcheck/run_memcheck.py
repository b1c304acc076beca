#!/usr/bin/env python
"""Runs the tests that drive framejit's C extensions (framejit/_C/hook.c, tensor_guard.cpp, guard_program.cpp,
tensor_state.cpp) under a memory checker, and says what each checker found.

    python tests/memcheck/run_memcheck.py [debug|asan|valgrind|all ...] [--timeout S] [-- pytest paths/args]

Variants (the default is `debug`; tests/memcheck/test_memcheck.py runs it in CI):

debug     PYTHONMALLOC=debug python -X dev -m pytest DEBUG_SUBSET. CPython's debug allocator hooks: guard bytes
          around every PyMem/PyObject block (checked on free and realloc), freed memory filled with 0xDD
          (a use after free reads garbage and crashes), calls without the GIL and mismatched allocator
          families are fatal errors. About a minute.
asan      The extensions rebuilt with -fsanitize=address into a temporary directory (setup.py's own build,
          the in-place .so files untouched) and loaded in their place by tests/memcheck/asan_plugin.py; python
          runs with LD_PRELOAD=libasan (and libstdc++), PYTHONMALLOC=malloc (Python objects in malloc'd blocks,
          so ASan sees a use after free of an object in our code) and ASAN_OPTIONS=detect_leaks=0 (CPython and
          torch keep memory until exit by design). Any AddressSanitizer report fails. A minute to build, about
          three to run DEBUG_SUBSET.
valgrind  valgrind --tool=memcheck on VALGRIND_SUBSET (smaller: torch under valgrind is ~25x slower, the import
          alone takes minutes), PYTHONMALLOC=malloc (CPython 3.11 needs it under valgrind; CPython's
          Misc/valgrind-python.supp only covers pymalloc, which this bypasses: pass it with --suppressions if
          wanted). CPython 3.11 and glibc report errors of their own here (int.from_bytes reads an
          uninitialised digit and what that small int becomes, ld.so's and glibc's vectorised string reads), so
          an error fails the run only when one of its innermost frames, or of the frames where its block was
          allocated or freed, is framejit's code; the rest are counted. About 10 minutes (20 with
          --track-origins).

Exit status 0 when every variant ran clean: the tests passed and the checker found nothing of framejit's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the frame hook (callbacks, cache entries, threads, lifetimes), guards (the C++ tensor check, freeing, threads),
# generated calls of 255+ arguments, a graph of 500+ inputs called 100 times, and continuations (tail calls)
MANY_CALLS = "tests/reliability/test_many_calls.py::test_a_bench_model_called_100_times_matches_eager_on_every_call"
DEBUG_SUBSET = [
    "tests/hook",
    "tests/guards",
    "tests/reliability/test_many_arguments.py",
    f"{MANY_CALLS}[densenet-infer-eager]",
    f"{MANY_CALLS}[densenet-train-eager]",
    "tests/graph_breaks/test_continuation_frames.py",
    "tests/graph_breaks/test_cells_across_breaks.py",
    "tests/graph_breaks/test_try_blocks_across_breaks.py",
    "tests/graph_breaks/test_stack_and_calls.py",
    "tests/graph_breaks/test_loops.py",
    "tests/as_eager/test_rerun_on_graph_error.py",  # snapshots of what a graph writes (tensor_state.cpp)
]
ASAN_SUBSET = DEBUG_SUBSET
VALGRIND_SUBSET = ["tests/hook", "tests/reliability/test_many_arguments.py"]

# what the debug allocator, the interpreter and ASan print when they find something
DEBUG_ERRORS = re.compile(
    r"Fatal Python error|Debug memory block at address|bad (leading|trailing) pad byte|"
    r"==\d+==ERROR: AddressSanitizer|AddressSanitizer:DEADLYSIGNAL|"
    r"AddressSanitizer: CHECK failed"
)
FRAMEJIT_FRAME = re.compile(
    r"framejit/_C/|\bhook\.c:|\b(tensor_guard|tensor_state|guard_program)\.cpp:|_hook\.cpython|"
    r"_tensor_(guard|state)\.cpython"
)


@dataclass
class Outcome:
    variant: str
    command: str
    seconds: float
    returncode: int | None  # None: timed out
    tests: str  # pytest's summary line
    findings: list[str] = field(default_factory=list)  # memory errors of framejit's (each with its stack)
    notes: list[str] = field(default_factory=list)  # what else the checker reported

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and not self.findings

    def report(self) -> str:
        status = "clean" if self.clean else "FAILED"
        rc = "timed out" if self.returncode is None else f"exit {self.returncode}"
        lines = [f"== {self.variant}: {status} ({rc}, {self.seconds:.0f} s): {self.tests}", f"   {self.command}"]
        lines += [f"   note: {n}" for n in self.notes]
        for finding in self.findings:
            lines += ["   memory error:"] + [f"     {line}" for line in finding.splitlines()]
        return "\n".join(lines)


def pytest_summary(output: str) -> str:
    found = re.findall(r"^=*\s*(\d+ (?:passed|failed|error).*?) in [\d.]+s", output, re.M)
    if found:
        return found[-1]
    quiet = re.findall(r"^(\d+ (?:passed|failed).*?) in [\d.]+s", output, re.M)
    return quiet[-1] if quiet else "no pytest summary (crashed?)"


def run(variant: str, cmd: list[str], env: dict[str, str], timeout: float, shown: str) -> tuple[Outcome, str]:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=timeout,
        )
        output, returncode = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        returncode = None
    seconds = time.monotonic() - start
    return Outcome(variant, shown, seconds, returncode, pytest_summary(output)), output


def crash_reports(output: str, returncode: int | None, limit: int = 60) -> list[str]:
    """Each report of the debug allocator, a fatal error or ASan, with the lines that follow it; a death by a
    signal that printed none of them is one too."""
    lines = output.splitlines()
    found: list[str] = [] if returncode is None or returncode >= 0 else [f"killed by signal {-returncode}"]
    i = 0
    while i < len(lines):
        if DEBUG_ERRORS.search(lines[i]):
            found.append("\n".join(lines[i : i + limit]))
            i += limit
        else:
            i += 1
    return found


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONMALLOC", None)
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def pytest_cmd(subset: list[str], *extra: str) -> list[str]:
    # --capture=sys: pytest captures Python's sys.stdout/stderr only, so what C code writes to fd 2 (the debug
    # allocator's and ASan's reports, fatal errors) reaches the output even when the process dies in a test
    return ["-m", "pytest", "-p", "no:cacheprovider", "--capture=sys", "-rfE", *extra, *subset]  # -q: pyproject


def run_debug(subset: list[str], timeout: float) -> Outcome:
    env = dict(base_env(), PYTHONMALLOC="debug")
    cmd = [sys.executable, "-X", "dev", *pytest_cmd(subset)]
    outcome, output = run("debug", cmd, env, timeout, "PYTHONMALLOC=debug python -X dev -m pytest " + " ".join(subset))
    outcome.findings = crash_reports(output, outcome.returncode)
    if outcome.returncode not in (0, None) and not outcome.findings:
        outcome.notes.append("tests failed (no memory error reported):\n" + tail(output))
    return outcome


def build_asan(tmp: Path, timeout: float) -> Path:
    """setup.py's two extensions, compiled and linked with -fsanitize=address, into tmp/lib (never in place)."""
    env = base_env()
    env["CFLAGS"] = (env.get("CFLAGS", "") + " -fsanitize=address -fno-omit-frame-pointer -g").strip()
    env["LDFLAGS"] = (env.get("LDFLAGS", "") + " -fsanitize=address").strip()
    cmd = [
        sys.executable,
        "setup.py",
        "-q",
        "build_ext",
        "--build-lib",
        str(tmp / "lib"),
        "--build-temp",
        str(tmp / "build"),
    ]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the ASan build failed:\n{proc.stdout[-4000:]}")
    return tmp / "lib"


def run_asan(subset: list[str], timeout: float, keep: bool) -> Outcome:
    # libasan first; and libstdc++ with it: python does not link it, and ASan's interceptor of __cxa_throw finds
    # no real one to call when a library loaded later throws (torch's errors): "CHECK failed ... real___cxa_throw"
    preload = [
        subprocess.run([compiler, f"-print-file-name={lib}"], stdout=subprocess.PIPE, text=True).stdout.strip()
        for compiler, lib in (("gcc", "libasan.so"), ("g++", "libstdc++.so.6"))
    ]
    if not all(os.path.isabs(p) for p in preload):
        return Outcome("asan", "", 0.0, 1, "not run", findings=[], notes=[f"gcc/g++ do not know {preload}"])
    libasan = " ".join(preload)
    tmp = Path(tempfile.mkdtemp(prefix="framejit-asan-"))
    try:
        start = time.monotonic()
        lib = build_asan(tmp, timeout)
        built = time.monotonic() - start
        env = dict(
            base_env(),
            PYTHONMALLOC="malloc",
            LD_PRELOAD=libasan,
            FRAMEJIT_ASAN_LIB=str(lib),
            ASAN_OPTIONS="detect_leaks=0",
        )
        cmd = [sys.executable, *pytest_cmd(subset, "-p", "tests.memcheck.asan_plugin")]
        shown = (
            f"LD_PRELOAD='{libasan}' ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc python -m pytest "
            f"-p tests.memcheck.asan_plugin " + " ".join(subset)
        )
        outcome, output = run("asan", cmd, env, max(1.0, timeout - built), shown)
        outcome.notes.append(f"built the ASan extensions in {built:.0f} s into {tmp}" + ("" if keep else " (removed)"))
        outcome.findings = crash_reports(output, outcome.returncode)
        if outcome.returncode not in (0, None) and not outcome.findings:
            outcome.notes.append("tests failed (no ASan report):\n" + tail(output))
        return outcome
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def valgrind_errors(log: str) -> list[list[str]]:
    """The error records of a valgrind log: blocks of `==PID== ` lines between blank ones, each starting with
    what happened (`Invalid read of size 8`, `Use of uninitialised value ...`)."""
    blocks, current = [], []
    for line in log.splitlines():
        m = re.match(r"==\d+== ?(.*)", line)
        if not m:
            continue
        body = m.group(1)
        if not body.strip():
            if current:
                blocks.append(current)
            current = []
        else:
            current.append(body)
    if current:
        blocks.append(current)
    return [b for b in blocks if len(b) > 1 and b[1].lstrip().startswith("at ")]


def ours(error: list[str], innermost: int = 3, innermost_of_block: int = 6) -> bool:
    """Whether one of the innermost frames of the error's stack, or of a stack of the block involved (where it
    was allocated or freed, where the uninitialised value was created: deeper, as allocators wrap each other),
    is framejit's code."""
    stacks: list[list[str]] = []
    for line in error[1:]:
        if line.lstrip().startswith("at "):
            stacks.append([line])
        elif line.lstrip().startswith("by ") and stacks:
            stacks[-1].append(line)
    return any(
        FRAMEJIT_FRAME.search(frame)
        for i, stack in enumerate(stacks)
        for frame in stack[: innermost if i == 0 else innermost_of_block]
    )


def run_valgrind(
    subset: list[str], timeout: float, track_origins: bool, suppressions: list[str], keep: bool = False
) -> Outcome:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return Outcome("valgrind", "", 0.0, 1, "not run", notes=["valgrind is not installed"])
    tmp = Path(tempfile.mkdtemp(prefix="framejit-valgrind-"))
    try:
        options = ["--tool=memcheck", "--leak-check=no", "--num-callers=40", "--error-limit=no"]
        options += ["--track-origins=yes"] if track_origins else []
        options += [f"--suppressions={s}" for s in suppressions]
        python = os.path.realpath(sys.executable)  # the ELF itself: valgrind does not follow a pyenv shim's exec
        cmd = [valgrind, *options, f"--log-file={tmp}/valgrind.%p.log", python, *pytest_cmd(subset)]
        env = dict(base_env(), PYTHONMALLOC="malloc")
        shown = "PYTHONMALLOC=malloc valgrind " + " ".join(options) + " python -m pytest " + " ".join(subset)
        outcome, output = run("valgrind", cmd, env, timeout, shown)
        errors = [e for log in sorted(tmp.glob("valgrind.*.log")) for e in valgrind_errors(log.read_text())]
        mine = [e for e in errors if ours(e)]
        outcome.findings = ["\n".join(e[:40]) for e in mine]
        others = Counter(f"{e[0]} {re.sub(r'0x[0-9A-F]+: ', '', e[1].strip())}" for e in errors if not ours(e))
        under = sum(any(FRAMEJIT_FRAME.search(line) for line in e) for e in errors if not ours(e))
        outcome.notes.append(
            f"{len(errors)} error contexts: {len(mine)} in framejit's code, {under} more with "
            f"framejit's code further down the stack (CPython or torch code that it called)"
        )
        outcome.notes += [f"{n} x {what}" for what, n in others.most_common(8)]
        if outcome.returncode not in (0, None):
            outcome.notes.append("tests failed:\n" + tail(output))
        if keep:
            outcome.notes.append(f"valgrind's logs are in {tmp}")
        return outcome
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def tail(output: str, lines: int = 40) -> str:
    return "\n".join(output.splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tests: list[str] = []
    if "--" in argv:
        tests = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", choices=["debug", "asan", "valgrind", "all"], default=["debug"])
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per variant (default: 1200 for debug and asan, 3600 for valgrind)",
    )
    parser.add_argument("--track-origins", action="store_true", help="valgrind: where uninitialised values come from")
    parser.add_argument("--suppressions", action="append", default=[], help="valgrind: a suppressions file")
    parser.add_argument("--keep", action="store_true", help="asan: keep the temporary build; valgrind: its logs")
    args = parser.parse_args(argv)
    variants = ["debug", "asan", "valgrind"] if "all" in args.variants else list(dict.fromkeys(args.variants))
    outcomes = []
    for variant in variants:
        if variant == "debug":
            outcome = run_debug(tests or DEBUG_SUBSET, args.timeout or 1200)
        elif variant == "asan":
            outcome = run_asan(tests or ASAN_SUBSET, args.timeout or 1200, args.keep)
        else:
            outcome = run_valgrind(
                tests or VALGRIND_SUBSET, args.timeout or 3600, args.track_origins, args.suppressions, args.keep
            )
        print(outcome.report(), flush=True)
        outcomes.append(outcome)
    return 0 if all(o.clean for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
