"""Per-function tracing policy set by users: allow_in_graph, disallow_in_graph, assume_constant_result, disable.

Functions are kept by identity in weak dictionaries where possible, so
registering a function never keeps it alive.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import weakref
from typing import Any, Callable, TypeVar

import torch

from framejit import capture_policy, markers


F = TypeVar("F", bound=Callable[..., Any])


class _IdSet:
    """A set of callables by identity; weak where the object allows it."""

    def __init__(self) -> None:
        self._weak: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
        self._strong: dict[int, Any] = {}

    def add(self, fn: Any) -> None:
        try:
            self._weak[fn] = True
        except TypeError:
            self._strong[id(fn)] = fn

    def discard(self, fn: Any) -> None:
        try:
            self._weak.pop(fn, None)
        except TypeError:
            self._strong.pop(id(fn), None)

    def __contains__(self, fn: Any) -> bool:
        try:
            return fn in self._weak
        except TypeError:
            return id(fn) in self._strong


_allowed = _IdSet()
_disallowed = _IdSet()
_constant_result = _IdSet()
_refusals = _IdSet()  # framejit's polyfills' "break here" markers
_disabled = _IdSet()
# torch functions that ask "is a compiler tracing me?", by (module, name) -> answer: answered without calling
# them (their flags belong to TorchDynamo, which framejit never sets). As under TorchDynamo, code being
# captured sees is_compiling() == True (users branch on it to keep logging or checks out of graphs); framejit
# is not torch.export.
_COMPILE_QUERIES: dict[tuple[str, str], bool] = {
    ("torch.compiler", "is_compiling"): True,
    ("torch.compiler", "is_dynamo_compiling"): True,
    ("torch.compiler", "is_exporting"): False,
    ("torch._utils", "is_compiling"): True,
    ("framejit.markers", "is_compiling"): True,
    # other tracers framejit is not
    ("torch.fx._symbolic_trace", "is_fx_tracing"): False,
    ("torch.onnx", "is_in_onnx_export"): False,
}


def _unwrap(fn: Any) -> Any:
    return getattr(fn, "_framejit_orig", fn)


def allow_in_graph(fn: F) -> F:
    """Put calls to fn into graphs as one opaque call_function node (fn must take and return tensors)."""
    if not callable(fn):
        raise TypeError(f"allow_in_graph expects a callable, got {type(fn).__name__}")
    _disallowed.discard(_unwrap(fn))
    _allowed.add(_unwrap(fn))
    return fn


def disallow_in_graph(fn: F) -> F:
    """Never put fn into a graph: a call to it stops the trace (a graph break)."""
    if not callable(fn):
        raise TypeError(f"disallow_in_graph expects a callable, got {type(fn).__name__}")
    _allowed.discard(_unwrap(fn))
    _disallowed.add(_unwrap(fn))
    return fn


def assume_constant_result(fn: F) -> F:
    """Call fn at trace time and treat its result as a constant baked into the graph."""
    _constant_result.add(_unwrap(fn))
    return fn


@dataclasses.dataclass(frozen=True)
class Substitute:
    """substitute_in_graph: the trace inlines `polyfill` where code calls `original` (or the decorated function);
    with `fold`, a call whose arguments are all constants calls `original` at trace time instead."""

    original: Any
    polyfill: types.FunctionType
    fold: bool


_substitutes: dict[int, Substitute] = {}  # by id of the original and of the function the decorator returns


def substitute_in_graph(
    original_fn: Callable[..., Any], *, can_constant_fold_through: bool = False, skip_signature_check: bool = False
) -> Callable[[F], F]:
    """Register a Python polyfill that traces trace in place of `original_fn` (usually a C function), as
    torch.compiler.substitute_in_graph. The decorator returns a function that calls `original_fn` when called
    eagerly; the polyfill itself runs only in traces."""
    if not callable(original_fn) or isinstance(original_fn, type):
        raise TypeError(f"substitute_in_graph expects a function, got {type(original_fn)!r}")

    def register(polyfill: F) -> F:
        if not isinstance(polyfill, types.FunctionType):
            raise TypeError(f"@substitute_in_graph(...) expects a Python function, got {type(polyfill)!r}")
        if not skip_signature_check:
            _check_same_signature(original_fn, polyfill)
        if id(original_fn) in _substitutes:
            raise ValueError(
                f"{original_fn!r} already has a polyfill: {_substitutes[id(original_fn)].polyfill.__qualname__}"
            )

        @functools.wraps(polyfill)
        def substituted(*args: Any, **kwargs: Any) -> Any:
            return original_fn(*args, **kwargs)

        entry = Substitute(original_fn, polyfill, can_constant_fold_through)
        _substitutes[id(original_fn)] = _substitutes[id(substituted)] = entry
        substituted.__framejit_original__ = original_fn  # type: ignore[attr-defined]
        substituted.__framejit_polyfill__ = polyfill  # type: ignore[attr-defined]
        return substituted  # type: ignore[return-value]

    return register


def _check_same_signature(original: Any, polyfill: types.FunctionType) -> None:
    """Parameter names, keyword-only names and defaults must agree (annotations and the names of *args/**kwargs
    do not matter; either side taking (*args, **kwargs) fits anything), as torch checks them."""
    try:
        theirs = inspect.signature(original)
    except ValueError:  # a C function without a text signature: nothing to compare
        return
    ours = inspect.signature(polyfill)

    def ident(sig: inspect.Signature) -> tuple:
        params = sig.parameters.values()
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        return (
            tuple(p.name for p in params if p.kind not in (*variadic, inspect.Parameter.KEYWORD_ONLY)),
            {p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY},
            {p.name: p.default for p in params if p.kind not in variadic},
        )

    wildcard = ident(inspect.signature(lambda *args, **kwargs: None))
    if ident(theirs) != ident(ours) and wildcard not in (ident(theirs), ident(ours)):
        raise TypeError(f"Signature mismatch between {original!r} and {polyfill.__qualname__}: {theirs} != {ours}")


def substitute_for(fn: Any) -> Substitute | None:
    """The polyfill registered for `fn` (an original or the function substitute_in_graph returned), if any."""
    entry = _substitutes.get(id(fn))
    if entry is None or not (fn is entry.original or getattr(fn, "__framejit_original__", None) is entry.original):
        return None  # (an id of a function that died, reused)
    return entry


def _torch_trace_constants() -> None:
    """torch functions whose answer is fixed while framejit traces (no TorchScript scripting or tracing)."""
    for fn in (
        torch.jit.is_scripting,
        torch.jit.is_tracing,
        torch._C._get_tracing_state,
        torch._jit_internal.is_scripting,
    ):
        _constant_result.add(fn)


def mark_disabled(fn: Any) -> None:
    _disabled.add(fn)


def is_allowed_in_graph(fn: Any) -> bool:
    return fn in _allowed


def is_disallowed(fn: Any) -> bool:
    return fn in _disallowed


def is_constant_result(fn: Any) -> bool:
    return fn in _constant_result


def mark_refusal(fn: F) -> F:
    """`fn(reason)` called in a polyfill is a graph break with that reason (the program's own call then runs)."""
    _refusals.add(fn)
    return fn


def is_refusal(fn: Any) -> bool:
    return fn in _refusals


def compile_query_answer(fn: Any) -> tuple[bool, Any]:
    """(True, answer) when `fn` is one of torch's "is a compiler tracing?" queries, else (False, None)."""
    if not callable(fn) or not isinstance(getattr(fn, "__module__", None), str):
        return False, None
    key = (fn.__module__, getattr(fn, "__qualname__", ""))
    return (True, _COMPILE_QUERIES[key]) if key in _COMPILE_QUERIES else (False, None)


def graph_break_request(fn: Any) -> str | None:
    """How a break reason names `fn` when a call of it is a requested graph break, else None: framejit's
    graph_break and TorchDynamo's (torch's optimizers call it), each named as its package exports it."""
    if fn is markers.graph_break or capture_policy.is_torchdynamo_function(fn, "graph_break"):
        return f"{fn.__module__.rpartition('.')[0]}.{fn.__name__}()"
    return None


def is_disabled(fn: Any) -> bool:
    return fn in _disabled


# modules the user compiled (`framejit.compile(model)`): the cache entries they make die with them
_compiled_modules: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def mark_compiled_module(module: torch.nn.Module) -> None:
    _compiled_modules.add(module)


def is_compiled_module(module: Any) -> bool:
    return module in _compiled_modules


_torch_trace_constants()
