"""Per-function tracing policy set by users: allow_in_graph, disallow_in_graph, assume_constant_result, disable.

Functions are kept by identity in weak dictionaries where possible, so
registering a function never keeps it alive.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from framejit.variables.base import Variable, unsupported

if TYPE_CHECKING:
    from framejit.trace.translator import Translator

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


def mark_disabled(fn: Any) -> None:
    _disabled.add(fn)


def is_allowed_in_graph(fn: Any) -> bool:
    return fn in _allowed


def is_disallowed(fn: Any) -> bool:
    return fn in _disallowed


def is_constant_result(fn: Any) -> bool:
    return fn in _constant_result


def is_disabled(fn: Any) -> bool:
    return fn in _disabled


class DisallowedVariable(Variable):
    """A function the user (or framejit.disable) keeps out of graphs."""

    def __init__(self, fn: Any, reason: str = "disallow_in_graph") -> None:
        self.fn = fn
        self.reason = reason

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx: "Translator", args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        unsupported(f"call to {name}, marked {self.reason}", "disallowed")


class ConstantResultVariable(Variable):
    """A function under assume_constant_result: called now, its result becomes a constant."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.fn

    def call(self, tx: "Translator", args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.builder import wrap_constant_result
        return wrap_constant_result(self.fn(*[a.as_python_constant() for a in args],
                                            **{k: v.as_python_constant() for k, v in kwargs.items()}))


class GradModeCtorVariable(Variable):
    """torch.no_grad / torch.enable_grad / torch.set_grad_enabled as callables."""

    def __init__(self, ctor: Any) -> None:
        self.ctor = ctor

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.ctor

    def call(self, tx: "Translator", args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.torch_special import GradModeVariable
        if kwargs or (self.ctor is not __import__("torch").set_grad_enabled and args):
            unsupported("torch.no_grad/enable_grad used as a decorator inside a compiled region", "grad_mode")
        return GradModeVariable.create(tx, self.ctor, list(args))
