"""collections.deque and types.MappingProxyType made in the trace: a deque holds its items (and maxlen) as
Variables and is made again after the graph from them; a mapping proxy is a read-only view of a dict the trace
holds, reading through to it (so it sees the dict's later writes, as the real one does).
"""

from __future__ import annotations

import collections
import types
from typing import Any, Callable, Sequence

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import _born, bound_method
from framejit.variables.mappings import DICT_READS, DictVariable

_DEQUE_MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "pop",
        "popleft",
        "extend",
        "extendleft",
        "rotate",
        "clear",
        "remove",
        "reverse",
        "insert",
        "__setitem__",
        "__delitem__",
    }
)


class DequeVariable(Variable):
    """A collections.deque made in the trace: its items, oldest first, and its maxlen (None: unbounded)."""

    rebuilt_once = True
    source = None
    iterated_as = "deque"  # (what an iterator over it names when it changes meanwhile)

    def __init__(self, items: list[Variable], maxlen: int | None) -> None:
        self.items = list(items)[-maxlen:] if maxlen else [] if maxlen == 0 else list(items)
        self.maxlen = maxlen
        self.born = _born()

    def python_type(self) -> type:
        return collections.deque

    def unpack(self, tx: Tracer) -> list[Variable]:
        return list(self.items)

    def held_keys(self) -> tuple:
        """What an iterator over it checks is unchanged at each step (any write changes it: Python raises)."""
        return tuple(enumerate(map(id, self.items)))

    def children(self) -> list[Variable]:
        return list(self.items)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return bound_method(self, name)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        index = key.as_python_constant()
        if type(index) is not int:
            unsupported(f"deque index {index!r} (Python raises TypeError)", BreakCode.INDEX)
        if not -len(self.items) <= index < len(self.items):
            raise_observed(IndexError("deque index out of range"), BreakCode.INDEX)
        return self.items[index]

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs:
            unsupported(f"deque.{name} with keyword arguments", BreakCode.CONTAINER_METHOD)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "copy":
            return DequeVariable(self.items, self.maxlen)
        if name in ("count", "index", "__contains__"):
            values = self._constants(name)
            wanted = [a.as_python_constant() for a in args]
            answer = wanted[0] in values if name == "__contains__" else getattr(values, name)(*wanted)
            return ConstantVariable(answer)
        if name not in _DEQUE_MUTATORS:
            unsupported(f"deque.{name}", BreakCode.CONTAINER_METHOD)
        result = self._mutate(tx, name, list(args))
        tx.output.side_effects.mutated_container(self)
        return result

    def _constants(self, name: str) -> list[Any]:
        if not all(i.is_python_constant() for i in self.items):
            unsupported(f"deque.{name} over items that are not constants", BreakCode.CONTAINER)
        return [i.as_python_constant() for i in self.items]

    def _mutate(self, tx: Tracer, name: str, args: list[Variable]) -> Variable:
        """A write, as deque's own method makes it (a full bounded deque drops from the other end)."""
        real: collections.deque = collections.deque(self.items, self.maxlen)
        if name in ("extend", "extendleft"):
            args = [list(args[0].unpack(tx))]  # (a Python list of Variables)
        elif name in ("remove",):
            index = self._constants(name).index(args[0].as_python_constant()) if args else 0
            args = [self.items[index]]
        elif name in ("rotate", "insert", "__setitem__", "__delitem__") and args:
            args = [args[0].as_python_constant(), *args[1:]]
        try:
            result = getattr(real, name)(*args)
        except (IndexError, ValueError) as e:
            raise_observed(e, BreakCode.INDEX)
        except TypeError as e:
            unsupported(f"deque.{name}: TypeError {e}", BreakCode.CONTAINER_METHOD)
        self.items = list(real)
        return result if isinstance(result, Variable) else ConstantVariable(None)

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(collections.deque)
        for item in self.items:
            cg.load(item)
        cg.emit("BUILD_LIST", len(self.items))
        cg.emit_const(self.maxlen)
        cg.call(2)

    def __repr__(self) -> str:
        return f"DequeVariable({self.items}, maxlen={self.maxlen})"


class MappingProxyVariable(Variable):
    """types.MappingProxyType(d) of a dict the trace holds: reads go to the dict, writes are Python's TypeError."""

    def __init__(self, mapping: DictVariable) -> None:
        self.mapping = mapping

    def python_type(self) -> type:
        return types.MappingProxyType

    def unpack(self, tx: Tracer) -> list[Variable]:
        return self.mapping.unpack(tx)

    def children(self) -> list[Variable]:
        return [self.mapping]

    def truth(self, tx: Tracer) -> bool:
        return self.mapping.truth(tx)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return bound_method(self, name)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        return self.mapping.getitem(tx, key)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name in DICT_READS:
            return self.mapping.call_method(tx, name, args, kwargs)
        if name in ("__setitem__", "__delitem__"):
            raise_observed(TypeError("'mappingproxy' object does not support item assignment"))
        unsupported(f"mappingproxy.{name}", BreakCode.CONTAINER_METHOD)

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(types.MappingProxyType)
        cg.load(self.mapping)
        cg.call(1)

    def __repr__(self) -> str:
        return f"MappingProxyVariable({self.mapping})"


def _deque(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """deque(iterable=(), maxlen=None): the iterable's items taken now, as Python's constructor takes them."""
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen_var = args[1] if len(args) > 1 else kwargs.get("maxlen")
    maxlen = None if maxlen_var is None else maxlen_var.as_python_constant()
    if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
        unsupported(f"deque(maxlen={maxlen!r}) (Python raises)", BreakCode.BAD_CALL)
    return DequeVariable(iterable.unpack(tx) if iterable is not None else [], maxlen)


def _mapping_proxy(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if len(args) != 1 or kwargs or not isinstance(args[0], DictVariable):
        unsupported(f"types.MappingProxyType of {args[0] if args else 'nothing'}", BreakCode.CALL)
    return MappingProxyVariable(args[0])


# constructors -> how a call of one is traced (joined into builtins.TRACED_BUILTINS)
RULES: dict[Any, Callable[..., Variable]] = {collections.deque: _deque, types.MappingProxyType: _mapping_proxy}
