"""Running one program eagerly (twice, to catch a generator that made something nondeterministic) and compiled
by framejit, making the calls its CALLS describe with the same inputs (values and layouts) on both sides, under
its COMPILE policy, and judging the first disagreement."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import io
import itertools
import logging
import re
import sys
import time
import types
from typing import Any, Callable, Sequence

import torch

import framejit
from framejit import eval_frame
from framejit.fuzz import layouts
from framejit.fuzz.compare import (
    REORDERED_SCALE,
    Loosened,
    diff,
    printed_alike,
    reordered_tolerance,
    snap,
    snap_globals,
)
from framejit.fuzz.plan import CallSpec, calls_of, policy_of, tensor_labels

_module_ids = itertools.count()


def load_module(path: str) -> types.ModuleType:
    """A fresh module from the program file (a real file, so inspect, linecache and tracebacks work)."""
    name = f"_fuzz_program_{next(_module_ids)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    torch.manual_seed(0)  # module-level randn without a seed of its own (a minimiser may delete it) stays the same
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def build_inputs(module: types.ModuleType, call: CallSpec, train: bool) -> tuple[list, dict, dict]:
    """The arguments described by the program's INPUTS in the call's layouts, (training) the leaf tensors their
    grads go to, and the tensor arguments; both by label, where they are passed (`x`, `xs[0]`, `obj.t`). Values
    come from the call's seed in build order, so two runs get equal values in equal layouts. Training: each
    tensor argument is made from a clone of a leaf (layouts.make), so the program may update it in place."""
    gen = torch.Generator().manual_seed(call.seed)
    leaves: dict[str, torch.Tensor] = {}
    built: dict[str, torch.Tensor] = {}
    names = list(inspect.signature(module.program).parameters)

    def tensors(name: str, spec: tuple) -> list[torch.Tensor]:
        for label, shape_spec in tensor_labels(name, spec):
            shape = [call.n if d == "N" else d for d in shape_spec]
            layout = call.layout(label)
            if layouts.is_alias(layout):
                built[label] = layouts.alias(layout[0], built[layout[1]], shape)
                continue
            built[label], leaf = layouts.make(layout, shape, call.dtype, gen, train)
            if leaf is not None:
                leaves[label] = leaf
        return [built[label] for label, _ in tensor_labels(name, spec)]

    args: list[Any] = []
    for name, spec in zip(names, module.INPUTS):
        kind = spec[0]
        if kind == "tensor":
            args.append(tensors(name, spec)[0])
        elif kind in ("int", "float"):
            args.append(spec[1] + call.bump)
        elif kind == "list":
            args.append(tensors(name, spec))
        elif kind == "dict":
            args.append(dict(zip(spec[1], tensors(name, spec))))
        elif kind == "box":
            args.append(module.Box(tensors(name, spec)[0], spec[2]))
        else:
            raise ValueError(f"unknown INPUTS entry {spec!r}")
    return args, leaves, built


def _floating_outputs(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.requires_grad else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _floating_outputs(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _floating_outputs(v)]
    return []


def _module_params(module: types.ModuleType) -> dict[str, torch.Tensor]:
    return {
        f"{g}.{name}": p
        for g, v in vars(module).items()
        if isinstance(v, torch.nn.Module)
        for name, p in v.named_parameters()
    }


def call_once(fn: Callable, module: types.ModuleType, args: list, leaves: dict, train: bool) -> dict:
    """Call the program once and snapshot everything it produced or changed."""
    out = io.StringIO()
    torch.set_grad_enabled(True)
    torch.manual_seed(0)
    exc = ret = None
    with contextlib.redirect_stdout(out):
        try:
            ret = fn(*args)
        except Exception as e:  # the program's own exceptions are part of its behaviour
            exc = (type(e).__name__, str(e))
    rec = {"exc": exc, "grad_mode": torch.is_grad_enabled()}
    torch.set_grad_enabled(True)
    aliases = {id(a): f"argument {i}" for i, a in enumerate(args)}
    rec["ret"] = snap(ret, aliases)
    rec["args"] = snap(args)
    rec["globals"] = snap_globals(module)
    if train and exc is None:
        terms = _floating_outputs(ret)
        rec["backward_exc"] = None
        if terms:
            with contextlib.redirect_stdout(out):
                try:
                    sum(t.sum() for t in terms).backward()
                except Exception as e:
                    rec["backward_exc"] = (type(e).__name__, str(e))
            torch.set_grad_enabled(True)
        rec["grads"] = snap({k: t.grad for k, t in {**leaves, **_module_params(module)}.items()})
    rec["stdout"] = out.getvalue()
    return rec


def resolve_backend(spec: str) -> Any:
    """A registered backend name, or `package.module:function` for a backend callable (tests plant bugs)."""
    if ":" not in spec:
        return spec
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr)


def compile_program(
    fn: Callable, spec: str, graphs: list[int], dynamic: bool | None = None, fates: list[str] | None = None
) -> Callable:
    """`fn` compiled by framejit with backend `spec` and `dynamic=`, counting graphs and noting in `fates` why
    each graph (or part) the backend did not compile runs as torch ops. `torch.compile:NAME` compiles with
    torch.compile instead (its backend found through framejit.bench.jits, the comparison code): the reference
    that tells a framejit bug from one it shares with torch's own stack."""
    if spec.startswith("torch.compile:"):
        from framejit.bench import jits

        backend = jits.torch_backend(spec.partition(":")[2])

        def compile_with(f: Callable, backend: Any) -> Callable:
            return jits.torch_compile(f, backend, dynamic)
    else:
        backend = framejit.lookup_backend(resolve_backend(spec))

        def compile_with(f: Callable, backend: Any) -> Callable:
            return eval_frame.make_context(backend, backend.__name__, dynamic=dynamic, on_graph=noting)(f)

    def noting(gm: torch.fx.GraphModule, compiled: Any, fate: Any) -> None:
        if fates is not None:
            fates.extend(fate.torch_ops)

    def counting(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        graphs[0] += 1
        return backend(gm, example_inputs)

    counting.__name__ = getattr(backend, "__name__", "backend")  # what the compiler's errors call the backend
    return compile_with(fn, counting)


def _mark_dynamic(tensors: dict[str, torch.Tensor], labels: Sequence[str], torch_compile: bool) -> None:
    """Dim 0 of these arguments made dynamic before the call (torch.compile's own mark for the reference)."""
    if torch_compile:
        from framejit.bench.jits import torch_mark_dynamic as mark
    else:
        mark = framejit.mark_dynamic
    for label in labels:
        t = tensors.get(label)
        if t is not None and t.dim() >= 1:
            mark(t, 0)


def run_side(path: str, compile_with: str | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Load the program afresh and make every call of its CALLS: eagerly, or compiled with backend
    `compile_with` under the program's COMPILE policy (dynamic=, mark_dynamic)."""
    module = load_module(path)
    train = bool(getattr(module, "TRAIN", False))
    calls = calls_of(module, train)
    policy = policy_of(module)
    graphs, fates = [0], []
    fn = (
        module.program
        if compile_with is None
        else compile_program(module.program, compile_with, graphs, policy.dynamic, fates)
    )
    records = []
    args: list = []
    leaves: dict = {}
    for i, call in enumerate(calls):
        progress(f"{'compiled' if compile_with else 'eager'} {call.describe(i)}")
        if not (call.reuse and not train):
            args, leaves, tensors = build_inputs(module, call, train)
            if compile_with is not None and policy.mark_dynamic:
                _mark_dynamic(tensors, policy.mark_dynamic, compile_with.startswith("torch.compile:"))
        records.append(call_once(fn, module, args, leaves, train))
    return {
        "calls": records,
        "graphs": graphs[0],
        "torch_ops": fates,
        "train": train,
        "backend": policy.backend,
        "described": [call.describe(i) for i, call in enumerate(calls)],
        "dtypes": [c.dtype for c in calls],
    }


_ORDER = ("exc", "ret", "args", "globals", "stdout", "grad_mode", "backward_exc", "grads")
# float16/bfloat16 gradients get 4 times assert_close's tolerances (a few units in the last place): the grad of a
# tensor used k times is a sum of k contributions, which AOTAutograd's backward graph adds in another order than
# eager autograd, and in these dtypes each addition rounds (2 units off in 1 of about 20 such training programs)
_GRAD_LOW_PRECISION = 4.0


def judge(eager: dict, compiled: dict, reorders_sums: bool = False) -> dict:
    """The first disagreement between two runs: outcome, kind (what differed, e.g. `return.requires_grad`),
    and a description naming the call. `reorders_sums`: the compiled side's backend has kernels of its own
    (inductor), so tensors get REORDERED_SCALE times their tolerances (at least the call dtype's), Python
    floats the call dtype's (compare.reordered_tolerance), and printed floats are compared as numbers
    (compare.printed_alike)."""
    for i, (a, b) in enumerate(zip(eager["calls"], compiled["calls"])):
        where = eager["described"][i]
        for key in _ORDER:
            if key not in a and key not in b:
                continue
            if key == "grads" and a.get("backward_exc"):
                # both backwards raised alike: which grads were accumulated before the failing node depends on
                # the order autograd runs its nodes, and a compiled graph's nodes are others
                continue
            x, y = a.get(key), b.get(key)
            if key in ("exc", "backward_exc"):
                verdict = _judge_exc(key, x, y, where)
                if verdict:
                    return verdict
                continue
            if key == "stdout" and reorders_sums and printed_alike(x, y, eager["dtypes"][i]):
                continue
            if key in ("stdout", "grad_mode"):
                if x != y:
                    return {
                        "outcome": "mismatch",
                        "kind": key,
                        "detail": f"{where}: {key}: eager {x!r}, compiled {y!r}",
                    }
                continue
            loose = (
                Loosened(reordered_tolerance(eager["dtypes"][i]), REORDERED_SCALE, at_least=eager["dtypes"][i])
                if reorders_sums
                else Loosened()
            )
            if key == "grads":
                loose = dataclasses.replace(loose, low_precision=_GRAD_LOW_PRECISION)
            found = diff(x, y, loose=loose)
            if found:
                what, text = found
                label = {"ret": "return", "args": "arguments"}.get(key, key)
                return {"outcome": "mismatch", "kind": f"{label}.{what}", "detail": f"{where}: {label} {text}"}
    return {"outcome": "ok", "kind": "", "detail": ""}


_AUTOGRAD_DETAIL = re.compile(r"(modified by an inplace operation): .*", re.S)


_VIEW_NODE = re.compile(r"^Output \d+ of \w+ is a view[^.]*\.")


def _same_message(x: str, y: str) -> bool:
    """Messages equal but for what autograd's in-place checks say about their own graph nodes: which saved
    tensor was found first, its shape, the node that saved it, its version, the hint; which view (or view of
    its base) written in place was found first, and the node that made it. A compiled graph has other nodes and
    saves other tensors; the error is the same."""

    def general(m: str) -> str:
        return _VIEW_NODE.sub("A view was written in place.", _AUTOGRAD_DETAIL.sub(r"\1", m))

    return x == y or general(x) == general(y)


def _judge_exc(key: str, x: Any, y: Any, where: str) -> dict | None:
    if x == y or (x is not None and y is not None and x[0] == y[0] and _same_message(x[1], y[1])):
        return None
    phase = "backward" if key == "backward_exc" else "call"
    if y is not None and (x is None or x[0] != y[0]):
        said = f"eager raised {x[0]}: {x[1]}" if x else "eager returned"
        return {
            "outcome": "compiled_raised",
            "kind": f"{phase}:{y[0]}",
            "detail": f"{where}: {said}; compiled raised {y[0]}: {y[1]}",
        }
    if y is None:
        return {
            "outcome": "mismatch",
            "kind": f"{phase}.exception_missing",
            "detail": f"{where}: eager raised {x[0]}: {x[1]}; compiled did not raise",
        }
    return {
        "outcome": "mismatch",
        "kind": f"{phase}.exception_message",
        "detail": f"{where}: {x[0]} message: eager {x[1]!r}, compiled {y[1]!r}",
    }


class _InternalErrors(logging.Handler):
    """Collects framejit's 'internal error ... running it as Python' fallbacks: not wrong results, but places
    where the compiler crashed and gave up on a frame, worth reporting."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "internal error" in message:
            self.messages.append(message.splitlines()[0][:300])


def backend_for(own: str | None, train: bool, override: str | None = None) -> str:
    """The backend the compiled side uses: `override` (a name, module:function, or `torch.compile` for
    torch.compile with the program's own backend), else the program's own (COMPILE), else eager (aot_eager for
    training programs)."""
    own = own or ("aot_eager" if train else "eager")
    if override == "torch.compile":
        return f"torch.compile:{own}"
    return override or own


def _inductor_rounding_as_eager() -> Any:
    """Inductor rounding float16/bfloat16 intermediates where eager does (it computes fused ops in float32 by
    default, which moves low-precision results by many units in the last place: no framejit bug to find)."""
    import torch._inductor.config

    return torch._inductor.config.patch(emulate_precision_casts=True)


def check_program(path: str, backend: str | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Eager twice (they must agree, else the generator made a nondeterministic program), then compiled."""
    start = time.perf_counter()
    framejit.reset()
    try:
        progress("load")
        first = run_side(path, None, progress)
        second = run_side(path, None, progress)
    except Exception as e:  # the module itself failed to load or to build its inputs: a generator bug
        return {
            "outcome": "invalid",
            "kind": type(e).__name__,
            "detail": f"{type(e).__name__}: {e}",
            "graphs": 0,
            "eager_raised": 0,
            "seconds": time.perf_counter() - start,
        }
    verdict = judge(first, second)
    if verdict["outcome"] != "ok":
        verdict = {"outcome": "eager_nondeterministic", "kind": verdict["kind"], "detail": verdict["detail"]}
        compiled = {"graphs": 0}
    else:
        spec = backend_for(first["backend"], first["train"], backend)
        internal = _InternalErrors()
        logging.getLogger("framejit").addHandler(internal)
        inductor = spec.rpartition(":")[2] == "inductor"
        try:
            with _inductor_rounding_as_eager() if inductor else contextlib.nullcontext():
                compiled = run_side(path, spec, progress)
        finally:
            logging.getLogger("framejit").removeHandler(internal)
        verdict = judge(first, compiled, reorders_sums=inductor)
        verdict["internal_errors"] = internal.messages[:3]
        verdict["torch_ops"] = list(dict.fromkeys(compiled["torch_ops"]))[:3]
        verdict["backend"] = spec
    framejit.reset()
    verdict["graphs"] = compiled["graphs"]
    verdict["eager_raised"] = sum(1 for c in first["calls"] if c["exc"] is not None)
    verdict["seconds"] = round(time.perf_counter() - start, 3)
    return verdict


def check_repro(path: str, backend: str | None = None, internal_errors: bool = False) -> None:
    """What a repro file runs: print the verdict, and fail (AssertionError) while eager and compiled disagree
    (or, with `internal_errors`, while framejit falls back on an internal error)."""
    verdict = check_program(path, backend)
    print(f"{verdict['outcome']}: {verdict['detail'] or 'eager and compiled agree'}")
    assert verdict["outcome"] == "ok", verdict["detail"]
    if internal_errors:
        print("\n".join(verdict.get("internal_errors", [])) or "no internal error")
        assert not verdict.get("internal_errors"), verdict["internal_errors"]
