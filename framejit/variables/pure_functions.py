"""Standard-library functions that only compute from their arguments: called now when every argument is a
constant (type hints included), as a constant result. Their Python bodies (typing's isinstance checks against its
private classes) are not worth tracing for an answer that depends on nothing else."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable

_PURE = (typing.get_origin, typing.get_args, inspect.isclass, inspect.isfunction, inspect.ismethod)


def _fold(fn: Callable[..., Any]) -> Callable[..., Variable]:
    def rule(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{fn.__qualname__} of a value known only at run time", BreakCode.CALL)
        return tx.wrap_constant(
            fn(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
        )

    return rule


RULES: dict[Any, Callable[..., Variable]] = {fn: _fold(fn) for fn in _PURE}
