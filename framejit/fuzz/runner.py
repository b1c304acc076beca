"""Running one program eagerly (twice, to catch a generator that made something nondeterministic) and compiled
by framejit, with the same fresh inputs per call, and judging the first disagreement."""
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
from typing import Any, Callable

import torch

import framejit
from framejit.fuzz.compare import diff, snap, snap_globals


@dataclasses.dataclass(frozen=True)
class CallSpec:
    """One call of the program: batch size, dtype of the tensor arguments, the seed of their values, whether it
    passes the previous call's argument objects again, and what is added to Python number arguments."""

    n: int
    dtype: torch.dtype
    seed: int
    reuse: bool = False
    bump: int = 0

    def describe(self, i: int) -> str:
        what = "same argument objects again" if self.reuse else f"N={self.n}, {str(self.dtype)[6:]}"
        return f"call {i} ({what})"


CALLS = (CallSpec(3, torch.float32, 1), CallSpec(3, torch.float32, 1, reuse=True),
         CallSpec(5, torch.float32, 2, bump=1), CallSpec(3, torch.float64, 3))
TRAIN_CALLS = CALLS[:3]  # aot_eager compiles are slow: training programs skip the float64 recompile

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


def build_inputs(module: types.ModuleType, call: CallSpec, train: bool) -> tuple[list, dict]:
    """The arguments described by the program's INPUTS, and (training) the leaf tensors their grads go to, by
    where they are passed (`x`, `xs[0]`, `obj.t`): each tensor argument is then a clone of a leaf, so the
    program may update it in place."""
    gen = torch.Generator().manual_seed(call.seed)
    leaves: dict[str, torch.Tensor] = {}
    names = list(inspect.signature(module.program).parameters)

    def tensor(shape: tuple, label: str) -> torch.Tensor:
        t = torch.randn([call.n if d == "N" else d for d in shape], generator=gen, dtype=call.dtype)
        if not train:
            return t
        leaves[label] = t.requires_grad_()
        return t.clone()

    args: list[Any] = []
    for name, spec in zip(names, module.INPUTS):
        kind = spec[0]
        if kind == "tensor":
            args.append(tensor(spec[1], name))
        elif kind in ("int", "float"):
            args.append(spec[1] + call.bump)
        elif kind == "list":
            args.append([tensor(spec[2], f"{name}[{i}]") for i in range(spec[1])])
        elif kind == "dict":
            args.append({k: tensor(spec[2], f"{name}[{k!r}]") for k in spec[1]})
        elif kind == "box":
            args.append(module.Box(tensor(spec[1], f"{name}.t"), spec[2]))
        else:
            raise ValueError(f"unknown INPUTS entry {spec!r}")
    return args, leaves


def _floating_outputs(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.requires_grad else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _floating_outputs(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _floating_outputs(v)]
    return []


def _module_params(module: types.ModuleType) -> dict[str, torch.Tensor]:
    return {f"{g}.{name}": p for g, v in vars(module).items() if isinstance(v, torch.nn.Module)
            for name, p in v.named_parameters()}


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


def compile_program(fn: Callable, spec: str, graphs: list[int]) -> Callable:
    """`fn` compiled by framejit with backend `spec`, counting graphs. `torch.compile:NAME` compiles with
    torch.compile instead (through framejit.bench.jits, the comparison code): the reference that tells a framejit
    bug from one it shares with torch's own stack."""
    if spec.startswith("torch.compile:"):
        from framejit.bench import jits
        backend, compile_with = jits.torch_backend(spec.partition(":")[2]), jits.torch_compile
    else:
        backend, compile_with = framejit.lookup_backend(resolve_backend(spec)), framejit.compile

    def counting(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        graphs[0] += 1
        return backend(gm, example_inputs)
    counting.__name__ = getattr(backend, "__name__", "backend")  # what the compiler's errors call the backend
    return compile_with(fn, backend=counting)


def run_side(path: str, compile_with: str | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Load the program afresh and make every call of CALLS: eagerly, or compiled with backend `compile_with`."""
    module = load_module(path)
    train = bool(getattr(module, "TRAIN", False))
    graphs = [0]
    fn = module.program if compile_with is None else compile_program(module.program, compile_with, graphs)
    records = []
    args: list = []
    leaves: dict = {}
    for i, call in enumerate(TRAIN_CALLS if train else CALLS):
        progress(f"{'compiled' if compile_with else 'eager'} {call.describe(i)}")
        if not (call.reuse and not train):
            args, leaves = build_inputs(module, call, train)
        records.append(call_once(fn, module, args, leaves, train))
    return {"calls": records, "graphs": graphs[0], "train": train}


_ORDER = ("exc", "ret", "args", "globals", "stdout", "grad_mode", "backward_exc", "grads")


def judge(eager: dict, compiled: dict) -> dict:
    """The first disagreement between two runs: outcome, kind (what differed, e.g. `return.requires_grad`),
    and a description naming the call."""
    for i, (a, b) in enumerate(zip(eager["calls"], compiled["calls"])):
        where = CALLS[i].describe(i)
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
            if key in ("stdout", "grad_mode"):
                if x != y:
                    return {"outcome": "mismatch", "kind": key,
                            "detail": f"{where}: {key}: eager {x!r}, compiled {y!r}"}
                continue
            found = diff(x, y)
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
        return {"outcome": "compiled_raised", "kind": f"{phase}:{y[0]}",
                "detail": f"{where}: {said}; compiled raised {y[0]}: {y[1]}"}
    if y is None:
        return {"outcome": "mismatch", "kind": f"{phase}.exception_missing",
                "detail": f"{where}: eager raised {x[0]}: {x[1]}; compiled did not raise"}
    return {"outcome": "mismatch", "kind": f"{phase}.exception_message",
            "detail": f"{where}: {x[0]} message: eager {x[1]!r}, compiled {y[1]!r}"}


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


def check_program(path: str, backend: str | None = None, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Eager twice (they must agree, else the generator made a nondeterministic program), then compiled."""
    start = time.perf_counter()
    framejit.reset()
    try:
        progress("load")
        first = run_side(path, None, progress)
        second = run_side(path, None, progress)
    except Exception as e:  # the module itself failed to load or to build its inputs: a generator bug
        return {"outcome": "invalid", "kind": type(e).__name__, "detail": f"{type(e).__name__}: {e}", "graphs": 0,
                "eager_raised": 0, "seconds": time.perf_counter() - start}
    verdict = judge(first, second)
    if verdict["outcome"] != "ok":
        verdict = {"outcome": "eager_nondeterministic", "kind": verdict["kind"], "detail": verdict["detail"]}
        compiled = {"graphs": 0}
    else:
        default = "aot_eager" if first["train"] else "eager"
        spec = f"torch.compile:{default}" if backend == "torch.compile" else (backend or default)
        internal = _InternalErrors()
        logging.getLogger("framejit").addHandler(internal)
        try:
            compiled = run_side(path, spec, progress)
        finally:
            logging.getLogger("framejit").removeHandler(internal)
        verdict = judge(first, compiled)
        verdict["internal_errors"] = internal.messages[:3]
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
