"""Per-function tracing policy set by users: allow_in_graph, disallow_in_graph, assume_constant_result, disable.

Functions are kept by identity in weak dictionaries where possible, so
registering a function never keeps it alive.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, TypeVar

import torch


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


# functions whose call is a graph break the user asked for, by (module, qualname) -> how the reason names them:
# recognised by name so that torch._dynamo is never imported (torch's optimizers call its graph_break())
_GRAPH_BREAK_REQUESTS: dict[tuple[str, str], str] = {
    ("framejit.markers", "graph_break"): "framejit.graph_break()",
    ("torch._dynamo.decorators", "graph_break"): "torch._dynamo.graph_break()",
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


def compile_query_answer(fn: Any) -> tuple[bool, Any]:
    """(True, answer) when `fn` is one of torch's "is a compiler tracing?" queries, else (False, None)."""
    if not callable(fn) or not isinstance(getattr(fn, "__module__", None), str):
        return False, None
    key = (fn.__module__, getattr(fn, "__qualname__", ""))
    return (True, _COMPILE_QUERIES[key]) if key in _COMPILE_QUERIES else (False, None)


def graph_break_request(fn: Any) -> str | None:
    """How a break reason names `fn` when a call of it is a requested graph break (framejit.graph_break,
    torch._dynamo.graph_break), else None."""
    if not callable(fn) or not isinstance(getattr(fn, "__module__", None), str):
        return None
    return _GRAPH_BREAK_REQUESTS.get((fn.__module__, getattr(fn, "__qualname__", "")))


def is_disabled(fn: Any) -> bool:
    return fn in _disabled


# modules the user compiled (`framejit.compile(model)`): the cache entries they make die with them
_compiled_modules: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


def mark_compiled_module(module: torch.nn.Module) -> None:
    _compiled_modules.add(module)


def is_compiled_module(module: Any) -> bool:
    return module in _compiled_modules


_torch_trace_constants()
