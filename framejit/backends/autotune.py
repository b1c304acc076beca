"""`autotune`: compile each graph with every candidate backend that works for it, keep the fastest correct one."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import statistics
import tempfile
import time
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree

from framejit import fate
from framejit.backends.common import needs_autograd
from framejit.backends.registry import BACKENDS, lookup_backend, register_backend

log = logging.getLogger("framejit.backends.autotune")

# Candidates in order of preference on ties; None = DEFAULT_CANDIDATES. Tests monkeypatch this, users may set
# FRAMEJIT_AUTOTUNE_CANDIDATES=eager,inductor. Names that are not registered or cannot run here are skipped.
CANDIDATES: list[str] | None = None
DEFAULT_CANDIDATES = ("eager", "aot_eager", "inductor", "ofi", "onnxrt")
INFERENCE_ONLY = {"ofi", "onnxrt"}  # they cannot produce autograd graphs
NEEDS_PACKAGE = {"onnxrt": "onnxruntime"}  # skipped (not an error) when the package is absent
# ONNX Runtime's worker threads keep spinning after a call and slow down torch's own threads that run next
# (on 2 cores an eager MLP goes from 4 to 6-10 ms): such candidates are checked and timed after the others
AFTER_EFFECTS = {"onnxrt"}
TOLERANCE = 1e-3  # allclose(rtol=atol=TOLERANCE) against eager
MIN_GAIN = 0.03  # a candidate must beat eager by 3% to replace it
PASSES = 2  # timing passes over all candidates; a candidate's time is the
CALLS = 10  # ... best of its per-pass medians of up to CALLS calls,
TIME_BUDGET_S = 2.0  # ... fewer calls (at least 3) when timing would take longer
CACHE_VERSION = 1


@dataclasses.dataclass
class Decision:
    """What autotune did for one graph: the backend, and (when it timed them) each candidate's fate."""

    key: str
    backend: str
    reused: bool  # True: read from the cache, nothing was timed
    times_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    rejected: dict[str, str] = dataclasses.field(default_factory=dict)


history: list[Decision] = []  # every decision of this process, in order
_memory: dict[str, dict[str, Any]] = {}  # cache path -> its entries, loaded once per process


def cache_path() -> str:
    return os.environ.get("FRAMEJIT_AUTOTUNE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "framejit", "autotune.json"
    )


def reset_state() -> None:
    """Forget what this process knows (the on-disk cache stays), as a fresh process would."""
    _memory.clear()
    history.clear()


def graph_key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> str:
    """A stable hash of the graph's structure: its code, the inputs' shapes/strides/dtypes/devices and whether
    autograd is needed (a training graph compiles to something else), and the torch version."""
    meta = [
        [list(x.shape), list(x.stride()), str(x.dtype), x.device.type, x.requires_grad]
        if isinstance(x, torch.Tensor)
        else repr(x)
        for x in example_inputs
    ]
    text = json.dumps([gm.code, meta, needs_autograd(example_inputs), torch.__version__])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _load(path: str) -> dict[str, Any]:
    if path not in _memory:
        try:
            with open(path) as f:
                data = json.load(f)
            entries = data.get("entries", {}) if data.get("version") == CACHE_VERSION else {}
        except (OSError, ValueError):
            entries = {}  # no cache yet, or an unreadable one: tune again
        _memory[path] = dict(entries)
    return _memory[path]


def _store(path: str, key: str, entry: dict[str, Any]) -> None:
    """Add one choice to the file, keeping what other processes wrote meanwhile; written atomically."""
    _load(path)[key] = entry
    try:
        with open(path) as f:
            data = json.load(f)
        entries = data.get("entries", {}) if data.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError):
        entries = {}
    entries.update(_memory[path])
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": CACHE_VERSION, "entries": entries}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:  # a read-only home must not break compilation; the choice stays in memory
        log.warning("autotune: cannot write %s: %s", path, e)


def candidates(training: bool) -> list[str]:
    """The candidate names that can run here for this kind of graph; eager always first."""
    env = os.environ.get("FRAMEJIT_AUTOTUNE_CANDIDATES")
    names = CANDIDATES if CANDIDATES is not None else (env.split(",") if env else DEFAULT_CANDIDATES)
    out = ["eager"]
    for name in (n.strip() for n in names):
        if not name or name in out or name == "autotune" or name not in BACKENDS:
            continue
        if training and name in INFERENCE_ONLY:
            continue
        package = NEEDS_PACKAGE.get(name)
        if package and importlib.util.find_spec(package) is None:
            continue
        out.append(name)
    return out


def _clone(example_inputs: Sequence[Any]) -> list[Any]:
    """Copies with the same strides and requires_grad: running candidates must not apply a graph's in-place
    effects (BatchNorm's running stats) to the real inputs, nor accumulate into their .grad."""

    def one(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        with torch.no_grad():
            y.copy_(x)
        return y.requires_grad_(x.requires_grad)

    return [one(x) for x in example_inputs]


def _run(fn: Callable[..., Any], inputs: list[Any], training: bool) -> tuple[Any, Any]:
    """Call once; for a training graph also compute the inputs' gradients (so backward is timed and checked)."""
    out = fn(*inputs)
    grads = None
    if training:
        outs = [o for o in pytree.tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
        if outs and wrt:
            grads = torch.autograd.grad(outs, wrt, [torch.ones_like(o) for o in outs], allow_unused=True)
    return out, grads


def _close(got: Any, want: Any) -> bool:
    a, b = pytree.tree_flatten(got)[0], pytree.tree_flatten(want)[0]
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if (
                x.shape != y.shape
                or x.dtype != y.dtype
                or not torch.allclose(x.detach(), y.detach(), rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True)
            ):
                return False
        elif (x is None) != (y is None) or isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            return False
        elif x is not None and x != y:
            return False
    return True


def _compile_checked(
    name: str,
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    training: bool,
    want: Any,
    decision: Decision,
    fates: dict[str, fate.GraphFate],
) -> Callable[..., Any] | None:
    """The candidate's compiled graph if it compiles and matches eager, else None (and why, in decision); what the
    candidate made of the graph goes in `fates`."""
    try:
        # a copy each: some compilers rewrite the graph they are given
        with fate.recording(name) as fates[name]:
            fn = gm.forward if name == "eager" else lookup_backend(name)(copy.deepcopy(gm), _clone(example_inputs))
        if fn is None:
            decision.rejected[name] = "returned None (cannot compile this graph)"
            return None
        if not _close(_run(fn, _clone(example_inputs), training), want):
            decision.rejected[name] = f"results differ from eager beyond tolerance {TOLERANCE:g}"
            log.warning("autotune: backend %r gives wrong results for a graph; never choosing it", name)
            return None
        return fn
    except Exception as e:  # noqa: BLE001  (a backend that fails is just not a candidate)
        decision.rejected[name] = f"{type(e).__name__}: {str(e).strip()[:200]}"
        return None


def _time_ms(compiled: dict[str, Callable[..., Any]], example_inputs: list[Any], training: bool) -> dict[str, float]:
    """Each candidate's best per-pass median, in milliseconds."""
    inputs = {name: _clone(example_inputs) for name in compiled}
    medians: dict[str, list[float]] = {name: [] for name in compiled}
    per_block = TIME_BUDGET_S / (PASSES * max(1, len(compiled)))
    for _ in range(PASSES):
        for name, fn in compiled.items():
            # each candidate in a block of its own, after one untimed call (lazy setup, warm caches)
            _run(fn, inputs[name], training)
            ts: list[float] = []
            block_start = time.perf_counter()
            while len(ts) < CALLS and (len(ts) < 3 or time.perf_counter() - block_start < per_block):
                t0 = time.perf_counter()
                _run(fn, inputs[name], training)
                ts.append(time.perf_counter() - t0)
            medians[name].append(statistics.median(ts))
    return {name: min(ms) * 1e3 for name, ms in medians.items()}


def _tune(
    gm: torch.fx.GraphModule, example_inputs: list[Any], key: str, training: bool
) -> tuple[str, Callable[..., Any], Decision]:
    """Compile with every candidate, check against eager, time the survivors; the fastest (eager on ties)."""
    want = _run(copy.deepcopy(gm).forward, _clone(example_inputs), training)
    decision = Decision(key=key, backend="eager", reused=False)
    compiled: dict[str, Callable[..., Any]] = {}
    fates: dict[str, fate.GraphFate] = {}
    names = candidates(training)
    # candidates that leave busy threads behind go last, so that they cannot slow down the others' timing
    for group in ([n for n in names if n not in AFTER_EFFECTS], [n for n in names if n in AFTER_EFFECTS]):
        fns = {
            name: fn
            for name in group
            if (fn := _compile_checked(name, gm, example_inputs, training, want, decision, fates)) is not None
        }
        if "eager" in group and "eager" not in fns:  # eager itself failed: nothing to compare with
            return "eager", gm.forward, decision
        decision.times_ms.update(_time_ms(fns, example_inputs, training))
        compiled.update(fns)
    best = min(decision.times_ms, key=decision.times_ms.__getitem__)
    if decision.times_ms[best] > decision.times_ms["eager"] * (1 - MIN_GAIN):
        best = "eager"
    decision.backend = best
    fate.adopt(fates[best])
    return best, compiled[best], decision


@register_backend(name="autotune")
def autotune(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compile with the backend that was fastest (and correct) for this graph structure, tuning if unknown."""
    key = graph_key(gm, example_inputs)
    training = needs_autograd(example_inputs)
    path = cache_path()
    entry = _load(path).get(key)
    if entry is not None and entry.get("backend") in BACKENDS:
        name = entry["backend"]
        try:
            fn = gm.forward if name == "eager" else lookup_backend(name)(gm, example_inputs)
        except Exception as e:  # noqa: BLE001  (what worked before may not now: tune again)
            log.warning("autotune: stored choice %r failed (%s); tuning again", name, e)
            fn = None
        if fn is not None:
            history.append(Decision(key=key, backend=name, reused=True))
            return fn
    name, fn, decision = _tune(gm, example_inputs, key, training)
    history.append(decision)
    log.info("autotune: %s for graph %s (ms: %s; rejected: %s)", name, key, decision.times_ms, decision.rejected)
    _store(
        path,
        key,
        {
            "backend": name,
            "times_ms": decision.times_ms,
            "rejected": decision.rejected,
            "training": training,
            "torch": torch.__version__,
        },
    )
    return fn
