"""Calls whose only effect is to report: `warnings.warn` and a `logging.Logger`'s level methods."""

from __future__ import annotations

import logging
import warnings
from typing import Any, NamedTuple, Sequence

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable


class ReplayedCall(NamedTuple):
    target: Any  # a callable to load as a constant, or the Variable of the object whose method is called
    method: str | None  # the method's name when `target` is an object
    args: tuple
    kwargs: dict[str, Any]
    lineno: int  # the captured frame's line at the call: the replayed instructions' line


def _constants(args: Sequence[Variable], kwargs: dict[str, Variable], what: str) -> tuple[list, dict[str, Any]]:
    if not all(a.is_python_constant() for a in (*args, *kwargs.values())):
        unsupported(f"{what} with arguments known only at run time", BreakCode.BUILTIN_IO)
    return [a.as_python_constant() for a in args], {k: v.as_python_constant() for k, v in kwargs.items()}


def _frames(tx: Tracer) -> list[Tracer]:
    """The traced frames from the call's (the innermost) out to the captured one."""
    frames = [tx]
    while frames[-1].parent is not None:
        frames.append(frames[-1].parent)
    return frames


def _record(tx: Tracer, call: ReplayedCall) -> Variable:
    tx.output.side_effects.record_call(call)
    return ConstantVariable(None)


def _raises(message: Any, category: type, module: str | None, lineno: int | None) -> bool:
    """Whether the warnings filters make this warning an error (CPython's first matching filter decides; with the
    module or line unknown, any error filter that could match counts)."""
    text = str(message)
    for action, msg, cat, mod, line in warnings.filters:
        if (
            (msg is None or msg.match(text))
            and issubclass(category, cat)
            and (module is None or mod is None or mod.match(module))
            and (lineno is None or line in (0, lineno))
        ):
            if action == "error" or module is not None and lineno is not None:
                return action == "error"
    return warnings.defaultaction == "error"


def _warn(tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    values, named = _constants(args, kwargs, "warnings.warn")
    if "skip_file_prefixes" in named or len(values) > 4:
        unsupported("warnings.warn with skip_file_prefixes", BreakCode.BUILTIN_IO)
    params = dict(zip(("message", "category", "stacklevel", "source"), values)) | named
    message, category = params.get("message"), params.get("category")
    stacklevel, source = params.get("stacklevel", 1), params.get("source")
    if not isinstance(stacklevel, int):
        unsupported("warnings.warn with a stacklevel that is not an int", BreakCode.BUILTIN_IO)
    if category is None:
        category = type(message) if isinstance(message, Warning) else UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        unsupported("warnings.warn with a category that is not a Warning class (TypeError)", BreakCode.BUILTIN_IO)
    frames = _frames(tx)
    line = frames[-1].frame_summary().lineno
    frame = frames[max(stacklevel, 1) - 1] if stacklevel <= len(frames) else None  # the frame it names
    if _raises(
        message,
        category,
        *(
            (frame.f_globals.get("__name__", "<string>"), frame.frame_summary().lineno)
            if frame is not None
            else (None, None)
        ),
    ):
        # it raises where it stands: Python runs it there (replayed, it would raise after the graph, the writes
        # it precedes undone)
        unsupported("warnings.warn of a warning the warnings filters make an error", BreakCode.BUILTIN_IO)
    if frame is None:  # a frame above the captured one: counted from it
        kept = {"category": category, "stacklevel": stacklevel - (len(frames) - 1), "source": source}
        return _record(tx, ReplayedCall(warnings.warn, None, (message,), kept, line))
    f_globals = frame.f_globals
    registry = f_globals.setdefault("__warningregistry__", {})
    explicit = (
        message,
        category,
        frame.code.co_filename,
        frame.frame_summary().lineno,
        f_globals.get("__name__", "<string>"),
        registry,
        f_globals,
        source,
    )
    return _record(tx, ReplayedCall(warnings.warn_explicit, None, explicit, {}, line))


_LEVEL_METHODS = ("debug", "info", "warning", "warn", "error", "critical", "fatal", "log")


def _logger_method(name: str) -> Any:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        logger, rest = args[0], args[1:]
        if getattr(logger, "source", None) is None:
            unsupported(f"Logger.{name} of a logger made in the trace", BreakCode.BUILTIN_IO)
        values, named = _constants(rest, kwargs, f"Logger.{name}")
        if named.get("exc_info") or named.get("stack_info"):
            unsupported(f"Logger.{name} with exc_info or stack_info (the state at the call)", BreakCode.BUILTIN_IO)
        line = _frames(tx)[-1].frame_summary().lineno
        return _record(tx, ReplayedCall(logger, name, tuple(values), named, line))

    return trace_call


RULES = {warnings.warn: _warn, **{getattr(logging.Logger, n): _logger_method(n) for n in _LEVEL_METHODS}}
