"""Runs the suite: for each (model, mode, backend, jit) an isolated eager-vs-compiled measurement."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import statistics
import time
import traceback
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from framejit.bench import models
from framejit.bench.contention import Meter
from framejit.bench.jits import FallbackWatch, make_jit, reset_all
from framejit.bench.report import Progress, Result


@dataclasses.dataclass
class BenchOptions:
    models: list[str]
    modes: list[str] = dataclasses.field(default_factory=lambda: ["infer", "train"])
    backends: list[str] = dataclasses.field(default_factory=lambda: ["inductor"])
    compare_torch: bool = False
    iters: int = 20
    warmup: int = 3
    quick: bool = False
    tol: float = 1e-3  # inference: allclose(rtol=atol=tol) against eager
    train_tol: float = 1e-2  # training: the loss and parameters after the first step
    progress: bool = True
    busy_limit: float = 0.15  # re-time when other processes took more than this share of the CPUs ...
    retries: int = 2  # ... up to this many times, after a pause
    cold: bool = True  # each row compiles with empty inductor caches (as on a fresh machine)
    prime: bool = True  # pay one-time costs (imports, compiler setup) before each model's first row


# backends that never reach inductor: no need for its (slow to import) fresh-cache context
NO_INDUCTOR = {"eager", "aot_eager", "debug"}


def jobs(opts: BenchOptions) -> list[tuple[str, str, str, str]]:
    """The rows in the order they run. With --compare-torch the two JITs take turns going first (framejit on
    even groups): the first compile of a model in a process still pays a little more than the second (a few
    tenths of a second on the CNN, after `_compile_caches` empties every cache we know of), and that must not
    always fall on the same JIT. Reports sort rows back into suite order."""
    jits = ["framejit", "torch.compile"] if opts.compare_torch else ["framejit"]
    groups = [(m, mode, b) for m in opts.models for mode in opts.modes for b in opts.backends]
    return [(*g, j) for i, g in enumerate(groups) for j in (jits if i % 2 == 0 else jits[::-1])]


def run_suite(opts: BenchOptions, suite: dict[str, Callable[[bool], models.Case]] | None = None) -> list[Result]:
    suite = models.SUITE if suite is None else suite
    todo = jobs(opts)
    progress = Progress(len(todo), enabled=opts.progress)
    primed: set[tuple[str, str, str]] = set()
    results = {}
    for row in todo:
        model, mode, backend, jit = row
        if opts.prime and (model, mode, backend) not in primed:
            primed.add((model, mode, backend))
            _prime(model, suite[model], mode, backend, opts, progress)
        progress.step(f"{model} {mode} {backend} {jit}")
        results[row] = run_one(model, suite[model], mode, backend, jit, opts)
    progress.close()
    per_group = 2 if opts.compare_torch else 1  # report order: each group's framejit row, then torch.compile's
    return [results[row] for row in sorted(todo, key=lambda r: (todo.index(r) // per_group, r[3] != "framejit"))]


def _prime(
    model: str, build: Callable[[bool], models.Case], mode: str, backend: str, opts: BenchOptions, progress: Progress
) -> None:
    """Compile the tiny (--quick) version of this model once per JIT and throw the rows away.

    The first compile of a kind of model in a process pays one-time costs that are no part of compiling that
    model: imports, inductor's pattern registration for the op families it meets (convolutions, attention,
    ...), probing the C++ compiler. Without priming they land on whichever JIT's row of that model runs first.
    The tiny model has other shapes and compiles under its own empty cache (see `_compile_caches`), so it
    leaves nothing the timed rows could reuse."""
    tiny = dataclasses.replace(opts, quick=True, iters=1, warmup=0, prime=False, progress=False)
    for jit in ["framejit", "torch.compile"] if opts.compare_torch else ["framejit"]:
        progress.note(f"priming {model} {mode} {backend} {jit}")
        run_one(model, build, mode, backend, jit, tiny)


def _compile_caches(backend: str, cold: bool) -> contextlib.AbstractContextManager:
    """Empty inductor caches (a temporary cache dir, in-memory caches cleared) for this row: both JITs then
    compile from scratch, instead of the second one loading the kernels the first one just built.

    Process-wide memos that `fresh_cache` leaves alone are emptied too: sympy's and the lru_caches in
    `torch._inductor.sizevars` (simplified index expressions over this model's sizes) and the fake-tensor
    dispatch cache (this model's op signatures). With them the second JIT to compile a model did so up to a
    second faster than the first."""
    if not cold or backend in NO_INDUCTOR:
        return contextlib.nullcontext()
    import sympy.core.cache
    from torch._inductor import sizevars
    from torch._inductor.utils import fresh_cache
    from torch._subclasses.fake_tensor import FakeTensorMode

    sympy.core.cache.clear_cache()
    FakeTensorMode.cache_clear()
    for fn in list(vars(sizevars).values()):
        if callable(getattr(fn, "cache_clear", None)) and getattr(fn, "__module__", None) == sizevars.__name__:
            fn.cache_clear()
    return fresh_cache()


def _autotune_notes(before: int) -> list[str]:
    from framejit.backends import autotune

    notes = []
    for d in autotune.history[before:]:
        if d.reused:
            notes.append(f"autotune: {d.backend} (stored choice reused, nothing timed)")
        else:
            times = ", ".join(f"{n} {t:.3f} ms" for n, t in d.times_ms.items())
            rejected = "".join(f"; rejected {n}: {why}" for n, why in d.rejected.items())
            notes.append(f"autotune: {d.backend} ({times}{rejected})")
    return notes


def run_one(
    name: str, build: Callable[[bool], models.Case], mode: str, backend: str, jit_kind: str, opts: BenchOptions
) -> Result:
    """One row; whatever goes wrong (building, compiling, running) becomes an error row."""
    result = Result(model=name, mode=mode, backend=backend, jit=jit_kind)
    reset_all()
    gc.collect()  # the previous row's garbage is not collected during this row's timed first call
    jit = None
    tuned = _history_len() if backend == "autotune" else 0
    watch = FallbackWatch()
    try:
        with watch, _compile_caches(backend, opts.cold):
            torch.manual_seed(0)
            case = build(opts.quick)
            jit = make_jit(jit_kind, backend)
            (_bench_infer if mode == "infer" else _bench_train)(case, jit, opts, result)
    except Exception as e:  # noqa: BLE001  (isolation: one failure is a row, not the end of the run)
        result.status = "error"
        result.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            result.notes.append(f"error raised at {tb[-1].filename}:{tb[-1].lineno} in {tb[-1].name}")
    finally:
        if jit is not None:
            result.graphs, result.breaks, notes = _safe_counts(jit)
            result.compiled = jit.compiled()
            result.notes = notes + result.notes
        result.notes.extend(watch.messages)
        if backend == "autotune":
            result.notes.extend(_autotune_notes(tuned))
        reset_all()
    return result


def _history_len() -> int:
    from framejit.backends import autotune

    return len(autotune.history)


def _safe_counts(jit: Any) -> tuple[int | None, int | None, list[str]]:
    try:
        return jit.counts()
    except Exception:  # noqa: BLE001
        return None, None, []


def _bench_infer(case: models.Case, jit: Any, opts: BenchOptions, result: Result) -> None:
    model = case.model.eval()
    eager, compiled = copy.deepcopy(model), jit.wrap(copy.deepcopy(model))
    x = case.x
    with torch.no_grad():
        want = eager(x)
        start = time.perf_counter()
        got = compiled(x)
        result.first_call_s = time.perf_counter() - start
        for _ in range(opts.warmup):
            eager(x)
            got = compiled(x)
        eager_ms, compiled_ms = _timed([lambda: eager(x), lambda: compiled(x)], opts, result)
    got, want = case.compared(got), case.compared(want)
    _finish(result, eager_ms, compiled_ms, max_error(got, want), close(got, want, opts.tol), opts.tol)


def _bench_train(case: models.Case, jit: Any, opts: BenchOptions, result: Result) -> None:
    model = case.model.train()
    eager = models.WithLoss(copy.deepcopy(model), case.loss_fn)
    module = models.WithLoss(copy.deepcopy(model), case.loss_fn)
    compiled = jit.wrap(module)
    opt_eager = torch.optim.SGD(eager.parameters(), lr=0.01, momentum=0.9)
    opt_compiled = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    losses: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])

    def step(fn: Callable[..., torch.Tensor], opt: torch.optim.Optimizer, out: list[torch.Tensor]) -> None:
        torch.manual_seed(len(out))  # the n-th step of each side draws the same dropout masks (where it can)
        opt.zero_grad(set_to_none=True)
        loss = fn(case.x, case.target)
        loss.backward()
        opt.step()
        out.append(loss.detach())

    step(eager, opt_eager, losses[0])
    start = time.perf_counter()
    step(compiled, opt_compiled, losses[1])
    result.first_call_s = time.perf_counter() - start
    # compared after this first step: over many steps the rounding of fused kernels grows (a batch norm's running
    # mean drifts to 5e-3 after 40 steps from 8e-7 after one, under torch.compile alike)
    first = ((losses[1][0], _state(module)), (losses[0][0], _state(eager)))
    for _ in range(opts.warmup):
        step(eager, opt_eager, losses[0])
        step(compiled, opt_compiled, losses[1])
    eager_ms, compiled_ms = _timed(
        [lambda: step(eager, opt_eager, losses[0]), lambda: step(compiled, opt_compiled, losses[1])], opts, result
    )
    # after the same first step from the same weights: its loss, then every parameter and buffer
    got, want = first
    _finish(result, eager_ms, compiled_ms, max_error(got, want), close(got, want, opts.train_tol), opts.train_tol)


def _state(module: torch.nn.Module) -> list[torch.Tensor]:
    return [t.detach().clone() for t in module.state_dict().values()]


def _finish(result: Result, eager_ms: float, compiled_ms: float, err: float, ok: bool, tol: float) -> None:
    result.eager_ms, result.compiled_ms = eager_ms, compiled_ms
    result.speedup = eager_ms / compiled_ms if compiled_ms > 0 else None
    result.max_error = err
    if not ok:
        result.status = "mismatch"
        result.error = f"compiled differs from eager beyond tolerance {tol:g}"


def _timed(fns: list[Callable[[], Any]], opts: BenchOptions, result: Result) -> list[float]:
    """paired_median_ms, measured again (after a pause) while other processes were busy on the CPUs; the
    least disturbed attempt is kept and its disturbance recorded (result.busy)."""
    best: tuple[float, list[float]] | None = None
    for attempt in range(opts.retries + 1):
        if attempt:
            time.sleep(5.0)
        with Meter() as meter:
            times = paired_median_ms(fns, opts.iters)
        busy = meter.others if meter.others is not None else 0.0
        if best is None or busy < best[0]:
            best = (busy, times)
        if busy <= opts.busy_limit:
            break
    assert best is not None
    result.busy = best[0]
    if best[0] > opts.busy_limit:
        result.notes.append(f"timed while other processes used {best[0]:.0%} of the CPUs: times are unreliable")
    return best[1]


def paired_median_ms(fns: list[Callable[[], Any]], iters: int) -> list[float]:
    """Median milliseconds per call of each function, timed in alternating blocks (A*k B*k A*k B*k ...).

    Alternating keeps drift in machine load fair to both; blocks of k (not single calls) keep one side's
    after-effects off the other's samples: ONNX Runtime's worker threads spin for a while after each call
    and would slow an eager call timed right after it. Only a block's first sample can be hit, the median
    ignores it."""
    iters = max(1, iters)
    block = max(1, min(5, iters // 4))
    times: list[list[float]] = [[] for _ in fns]
    while len(times[0]) < iters:
        n = min(block, iters - len(times[0]))
        for fn, ts in zip(fns, times):
            for _ in range(n):
                start = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - start)
    return [statistics.median(ts) * 1e3 for ts in times]


def _leaves(value: Any) -> list[Any]:
    return pytree.tree_flatten(value)[0]


def max_error(got: Any, want: Any) -> float:
    """Largest absolute difference over all (nested) tensors; inf if the structures differ."""
    a, b = _leaves(got), _leaves(want)
    if len(a) != len(b):
        return float("inf")
    err = 0.0
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape:
                return float("inf")
            if x.numel():
                err = max(err, (x.detach().double() - y.detach().double()).abs().max().item())
        elif x != y:
            return float("inf")
    return err


def close(got: Any, want: Any, tol: float) -> bool:
    """Whether all (nested) tensors are allclose(rtol=atol=tol) and everything else is equal."""
    a, b = _leaves(got), _leaves(want)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (
                isinstance(x, torch.Tensor)
                and isinstance(y, torch.Tensor)
                and x.shape == y.shape
                and torch.allclose(x.detach().double(), y.detach().double(), rtol=tol, atol=tol)
            ):
                return False
        elif x != y:
            return False
    return True
