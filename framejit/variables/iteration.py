"""itertools and functools helpers and dict.fromkeys over values the trace holds: they produce their items (or
fold them) now.

Each is evaluated at once, which is what the lazy original gives when its inputs are containers: reading a
container has no effect, so taking all of it cannot differ from taking it item by item. An iterator argument
(a generator, a real iterator) would be advanced too far by that, so those run as Python (a graph break).
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Callable

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import DictVariable, IteratorVariable


def _items(tx: Tracer, value: Variable, what: str) -> list[Variable]:
    if isinstance(value, IteratorVariable):
        unsupported(f"{what} over an iterator (it would be advanced further than Python advances it)",
                    BreakCode.ITER)
    return value.unpack(tx)


def _chain(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return IteratorVariable([item for arg in args for item in _items(tx, arg, "itertools.chain")])


def _chain_from_iterable(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return _chain(tx, _items(tx, args[0], "itertools.chain.from_iterable"), kwargs)


def _islice(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    bounds = [a.as_python_constant() for a in args[1:]]
    return IteratorVariable(_items(tx, args[0], "itertools.islice")[slice(*bounds)])


def _reduce(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn, items = args[0], args[1].unpack(tx)  # reduce takes every item, as Python's does
    if len(args) > 2:
        items = [args[2], *items]
    if not items:
        unsupported("functools.reduce of an empty sequence with no initial value (TypeError)", BreakCode.CALL)
    value = items[0]
    for item in items[1:]:
        value = fn.call(tx, [value, item], {})
    return value


def _fromkeys(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """dict.fromkeys(keys, value): every key maps to the one value object, as in Python."""
    value = args[1] if len(args) > 1 else kwargs.get("value", ConstantVariable(None))
    return DictVariable({k.as_python_constant(): value for k in _items(tx, args[0], "dict.fromkeys")})


RULES: dict[Any, Callable[..., Variable]] = {
    itertools.chain: _chain, itertools.chain.from_iterable: _chain_from_iterable, itertools.islice: _islice,
    functools.reduce: _reduce, dict.fromkeys: _fromkeys,
}
