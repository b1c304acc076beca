"""The parent side: writes the programs, feeds them to worker subprocesses in batches (a fresh worker per batch,
and after a crash or hang, which is pinned on the program the worker was in), collects the verdicts, groups
the failures by signature, minimises some of each group and writes repro files."""

from __future__ import annotations

import collections
import json
import os
import tempfile
import threading
import time
from typing import Callable, Sequence

from framejit.fuzz.generate import generate
from framejit.fuzz.minimise import failure_targets, internal_error_targets, minimise_targets
from framejit.fuzz.remote import FAILURES, OUTCOMES, Result, Worker, blank, signature


def run_programs(
    programs: Sequence[str] | dict[int, str],
    first_seed: int,
    workdir: str,
    *,
    batch: int = 100,
    jobs: int = 1,
    timeout: float = 30.0,
    backend: str | None = None,
    report: Callable[[Result], None] = lambda r: None,
) -> list[Result]:
    """Check each program (index i: a position in a list, or a key; its seed is first_seed + i); `jobs`
    workers share them. Results come back in index order."""
    if not isinstance(programs, dict):
        programs = dict(enumerate(programs))
    paths = {}
    for i, src in programs.items():
        paths[i] = os.path.join(workdir, f"program_{first_seed + i}.py")
        with open(paths[i], "w") as f:
            f.write(src)
    results: dict[int, Result] = {}
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

    order = sorted(paths)
    lanes = [order[j :: max(1, jobs)] for j in range(max(1, jobs))]
    threads = [threading.Thread(target=lane, args=(ix,)) for ix in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in order if i in results]


def fuzz(
    n: int,
    seed: int,
    *,
    out: str | None = None,
    batch: int = 100,
    jobs: int = 1,
    timeout: float = 30.0,
    backend: str | None = None,
    minimise: bool = True,
    per_signature: int = 1,
    verbose: bool = True,
    sources: Sequence[str] | None = None,
    only: Sequence[int] | None = None,
    reference: bool = False,
    inductor_share: float = 0.0,
    dynamic: bool = False,
) -> dict:
    """Generate programs 0..n-1 (or only those indices; or take `sources`), about `inductor_share` of them
    compiling with inductor (chosen by each program's seed), all with dynamic=True if `dynamic`, check them ( `backend` overrides every program's
    own), (with `reference`) check the failures again under torch.compile, minimise failures, write repros;
    returns a summary dict."""
    out = out or tempfile.mkdtemp(prefix="framejit-fuzz-")
    os.makedirs(out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="work-", dir=out)
    start = time.perf_counter()
    if sources is not None:
        sources = dict(enumerate(sources))
    else:
        sources = {i: generate(seed + i, inductor_share, dynamic) for i in (only if only is not None else range(n))}
    say = print if verbose else (lambda *a, **k: None)
    done = [0]

    def report(r: Result) -> None:
        done[0] += 1
        if r.outcome in FAILURES:
            say(f"[{r.index} seed={r.seed}] {r.outcome} {r.verdict['kind']}: {r.verdict['detail'][:400]}", flush=True)
        if done[0] % 100 == 0:
            say(f"... {done[0]}/{len(sources)} programs, {time.perf_counter() - start:.0f} s", flush=True)

    results = run_programs(
        sources, seed, workdir, batch=batch, jobs=jobs, timeout=timeout, backend=backend, report=report
    )
    elapsed = time.perf_counter() - start
    failing = [r for r in results if r.outcome in FAILURES]
    if reference and failing:
        say(f"checking the {len(failing)} failures under torch.compile ...", flush=True)
        _check_reference(failing, sources, seed, workdir, batch, jobs, timeout, backend)
    summary = summarise(results, elapsed, say)
    for r in failing:  # keep every failing program as it was generated
        with open(os.path.join(out, f"failing_{seed}_{r.index}.py"), "w") as f:
            f.write(sources[r.index])
    summary["repros"] = []
    if minimise:
        targets = failure_targets(failing, seed, per_signature) + internal_error_targets(results, seed)
        summary["repros"] = minimise_targets(
            targets, sources, seed, out, workdir, timeout=timeout, backend=backend, say=say
        )
    summary["out"] = out
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({k: v for k, v in summary.items()}, f, indent=1, default=str)
    say(f"results in {out}")
    return summary


def _check_reference(
    failing: list[Result],
    sources: dict[int, str],
    seed: int,
    workdir: str,
    batch: int,
    jobs: int,
    timeout: float,
    backend: str | None,
) -> None:
    """Tag each failure with what torch.compile does on the same program with the same backend (`backend`, the
    run's override, else each program's own): failures it shares come from torch's own stack (AOTAutograd,
    functionalization, inductor, dynamo's semantics) rather than framejit."""
    programs = {r.index: sources[r.index] for r in failing if r.outcome in ("mismatch", "compiled_raised")}
    ref_dir = os.path.join(workdir, "reference")
    os.makedirs(ref_dir, exist_ok=True)
    verdicts = {
        r.index: r.verdict
        for r in run_programs(
            programs, seed, ref_dir, batch=batch, jobs=jobs, timeout=timeout, backend=_torch_compile_with(backend)
        )
    }
    for r in failing:
        v = verdicts.get(r.index)
        r.verdict["reference"] = "not checked" if v is None else f"{v['outcome']} {v['kind']}".strip()


def _torch_compile_with(backend: str | None) -> str:
    """The reference for a run whose programs compile with `backend`: torch.compile with that backend."""
    if backend is None or backend.startswith("torch.compile"):
        return backend or "torch.compile"
    return f"torch.compile:{backend}"


def summarise(results: list[Result], elapsed: float, say: Callable[..., None]) -> dict:
    counts = collections.Counter(r.outcome for r in results)
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for r in results:
        if r.outcome in FAILURES:
            groups[signature(r.verdict)].append(r.index)
    complete = sum(1 for r in results if r.outcome == "ok" and r.verdict.get("eager_raised") == 0)
    internal = [r.index for r in results if r.verdict.get("internal_errors")]
    fallbacks: dict[str, list[int]] = collections.defaultdict(list)
    for r in results:
        for message in dict.fromkeys(
            blank(m.partition("running it as Python: ")[2]) for m in r.verdict.get("internal_errors", [])
        ):
            fallbacks[message].append(r.index)
    torch_ops: dict[str, list[int]] = collections.defaultdict(list)  # backend fallbacks: why graphs ran as torch ops
    for r in results:
        for reason in r.verdict.get("torch_ops", []):
            torch_ops[blank(reason)].append(r.index)
    n = max(1, len(results))
    say("")
    for name in OUTCOMES:
        say(f"{name:24s} {counts.get(name, 0)}")
    rate = len(results) / max(elapsed, 1e-9)
    say(f"{'total':24s} {len(results)} programs in {elapsed:.1f} s ({rate:.1f} programs/s)")
    backends = collections.Counter(r.verdict.get("backend", "-") for r in results)
    failing_on = collections.Counter(r.verdict.get("backend", "-") for r in results if r.outcome in FAILURES)
    say("by backend: " + ", ".join(f"{b} {k} ({failing_on[b]} failing)" for b, k in sorted(backends.items())))
    say(
        f"ok with every call returning: {complete} ({100 * complete / n:.0f}%); programs with an internal-error "
        f"fallback: {len(internal)}; graphs compiled: {sum(r.verdict.get('graphs', 0) for r in results)}"
    )
    if groups:
        say("\nfailures by signature:")
        by_index = {r.index: r.verdict for r in results}
        for sig, idx in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            say(f"  {len(idx):4d}  {sig}   programs {idx[:12]}{' ...' if len(idx) > 12 else ''}")
            refs = [by_index[i]["reference"] for i in idx if "reference" in by_index[i]]
            if refs:
                shared = sum(1 for ref in refs if not ref.startswith(("ok", "not checked")))
                say(
                    f"        torch.compile fails too on {shared} of {len(refs)}: "
                    + ", ".join(f"{k} x{v}" for k, v in collections.Counter(refs).most_common(3))
                )
    if torch_ops:
        say(
            f"\ngraphs the backend did not compile, run as their torch ops (in {len({i for v in torch_ops.values() for i in v})} "
            "programs; by reason):"
        )
        for reason, idx in sorted(torch_ops.items(), key=lambda kv: -len(kv[1])):
            say(f"  {len(idx):4d}  {reason[:160]}   programs {idx[:8]}{' ...' if len(idx) > 8 else ''}")
    if fallbacks:
        say("\ninternal-error fallbacks (framejit gave up on a frame and ran it as Python):")
        for message, idx in sorted(fallbacks.items(), key=lambda kv: -len(kv[1])):
            say(f"  {len(idx):4d}  {message[:160]}   programs {idx[:8]}{' ...' if len(idx) > 8 else ''}")
    return {
        "counts": dict(counts),
        "seconds": round(elapsed, 1),
        "groups": dict(groups),
        "backends": dict(backends),
        "internal_errors": {m: idx for m, idx in fallbacks.items()},
        "torch_ops": dict(torch_ops),
        "failures": {r.index: r.verdict for r in results if r.outcome in FAILURES},
    }
