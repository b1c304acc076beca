"""Sets and frozensets the trace holds: their keys as hash_keys gives them (constants, or IdentityKeys for tensors
and objects compared by identity), in a real Python set, so that membership, algebra and comparisons are Python's
own. A set from outside mutated by the trace is given its new contents after the graph (apply_set_writes)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from framejit.contracts import Emitter, GuardKind, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.variables.base import Variable, lookup_class_attr
from framejit.sources import DictListSource
from framejit.variables.constant import ConstantVariable, is_literal
from framejit.variables.containers import IteratorVariable, _born, bound_method
from framejit.variables.hash_keys import hash_key, is_constant, key_variable, read_keys_by_position

# set methods that change it, and those that read it (answering a new set, a bool, or a copy)
SET_WRITES = frozenset(
    {
        "add",
        "discard",
        "remove",
        "update",
        "clear",
        "pop",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "__init__",
    }
)
SET_READS = frozenset(
    {
        "copy",
        "union",
        "intersection",
        "difference",
        "symmetric_difference",
        "issubset",
        "issuperset",
        "isdisjoint",
    }
)


def apply_set_writes(target: set, final: set) -> None:
    """Make `target` (a set from outside, or an instance of a subclass) hold `final`'s items: what it lost is
    discarded and what it gained added, one by one, by set's own methods. Unlike clear() then update(), the items
    it keeps stay where they were in its table, so it iterates afterwards as eager's set, changed in place, does."""
    for item in [item for item in set.__iter__(target) if item not in final]:
        set.discard(target, item)
    for item in final:
        if not set.__contains__(target, item):
            set.add(target, item)


def set_keys(tx: Tracer, iterable: Variable) -> list[Any]:
    """The keys of an iterable's items, as a set made from it holds them."""
    if isinstance(iterable, SetVariable):
        return iterable.ordered_keys()
    return [hash_key(tx, item, "a set item") for item in iterable.each_item(tx)]


def keys_as_taken(tx: Tracer, iterable: Variable) -> Iterable[Any]:
    """The keys of an iterable's items, taken as the Python set method given them asks for them: an iterator's
    (a generator's) one at a time, so the method stops where CPython's does, reading the set as it is then."""
    if isinstance(iterable, SetVariable):
        return iterable.ordered_keys()
    return (hash_key(tx, item, "a set item") for item in iterable.each_item(tx))


class SetVariable(Variable):
    """A set (or frozenset, `py_type`) the trace holds, of keys from hash_keys.hash_key."""

    rebuilt_once = True
    owner: Variable | None = None  # the instance of a set or frozenset subclass whose items these are

    def __init__(self, keys: Iterable[Any], source: Any = None, py_type: type = set) -> None:
        self.keys: set[Any] = set(keys)
        # the real set's iteration order, for one read from outside until the trace writes it (a set made anew
        # from its items may iterate otherwise: its table's history differs); else None: the keys' own order
        self.read_order: list[Any] | None = None
        self.source = source
        self.py_type = py_type
        self.born = _born()

    @classmethod
    def read(cls, tx: Tracer, value: Any, source: Any) -> "SetVariable":
        """A real set or frozenset (or an instance of a subclass) from `source`: its items in the base type's
        iteration order, guarded (constants by value in one guard; else, or past a subclass's own __iter__ or
        __len__, each by position, as hash_keys.read_keys_by_position reads them)."""
        base = frozenset if isinstance(value, frozenset) else set
        items = list(base.__iter__(value))
        keeps_base = all(lookup_class_attr(type(value), n)[1] is vars(base)[n] for n in ("__iter__", "__len__"))
        if all(is_literal(k) for k in items) and keeps_base:  # (the guard's list() runs them)
            if source is not None:
                tx.output.guards.add(source, GuardKind.DICT_KEYS, value)  # its type, and its items in order
            keys = items
        else:
            members = DictListSource(source, "members")
            keys = read_keys_by_position(tx, value, items, source, members, type(value).__name__)
        result = cls(keys, source, base)
        result.read_order = keys
        return result

    @classmethod
    def of(cls, tx: Tracer, items: Sequence[Variable], py_type: type = set) -> "SetVariable":
        """{a, b, ...} or set(items): each item's key."""
        return cls([hash_key(tx, item, "a set item") for item in items], py_type=py_type)

    def python_type(self) -> type:
        return self.py_type

    def held_keys(self) -> set[Any]:
        """Its keys (what an iterator over it checks are unchanged)."""
        return self.keys

    def ordered_keys(self) -> list[Any]:
        """Its keys in iteration order."""
        return list(self.read_order if self.read_order is not None else self.keys)

    def is_python_constant(self) -> bool:
        return all(is_constant(k) for k in self.keys)

    def as_python_constant(self) -> Any:
        if not self.is_python_constant():
            unsupported("a set of tensors or objects used as a Python constant", BreakCode.CONTAINER)
        return self.py_type(self.keys)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.keys)

    def unpack(self, tx: Tracer) -> list[Variable]:
        return [key_variable(k) for k in self.ordered_keys()]

    def children(self) -> list[Variable]:
        return [key_variable(k) for k in self.keys if not is_constant(k)]

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return bound_method(self, name)

    def as_real_set(self) -> Any:
        """Its keys in a set of its own type, made from them in iteration order as CPython copies a set: Python's
        set algebra and comparisons on it are the answer."""
        return self.py_type(self.ordered_keys())

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs:
            unsupported(f"{self.py_type.__name__}.{name} with keyword arguments", BreakCode.CONTAINER_METHOD)
        if name == "__contains__":
            return ConstantVariable(hash_key(tx, args[0], "a set item") in self.keys)
        if name == "__len__":
            return ConstantVariable(len(self.keys))
        if name == "__iter__":  # set.__iter__(s) called by a subclass's own __iter__
            return IteratorVariable.over(tx, self)
        if name == "pop":
            if len(self.keys) > 1:
                unsupported("set.pop(): which item it takes is the set's hash order", BreakCode.CONTAINER_METHOD)
            popped = next(iter(self.ordered_keys()), None)
            self._write(tx, name, args)  # (an empty set raises KeyError)
            return key_variable(popped)
        if name in SET_WRITES:
            self._write(tx, name, args)
            return ConstantVariable(None)
        if name == "copy" and self.py_type is frozenset and self.owner is None:
            return self  # a frozenset's copy is itself
        if name == "copy" and self.owner is not None and self.py_type is frozenset:
            return SetVariable(self.ordered_keys(), py_type=frozenset)  # a subclass's copy: a plain frozenset
        if name in SET_READS:
            return self.wrap_result(self._read(tx, name, args))
        unsupported(f"{self.py_type.__name__}.{name}", BreakCode.CONTAINER_METHOD)

    def _read(self, tx: Tracer, name: str, args: Sequence[Variable]) -> Any:
        """Python's own method on the keys, given the arguments' keys as CPython takes them: issubset and
        symmetric_difference take all of them first; isdisjoint, issuperset and intersection take an iterator's
        one by one against the set as it is (stopping at the answer); union and difference copy the set first."""
        keys = [keys_as_taken(tx, a) for a in args]
        if name in ("issubset", "symmetric_difference"):
            keys = [list(k) for k in keys]
        if name in ("isdisjoint", "issuperset", "intersection") and any(isinstance(a, IteratorVariable) for a in args):
            result = getattr(self.keys, name)(*keys)  # (an intersection's order is its argument's)
            return frozenset(result) if self.py_type is frozenset and isinstance(result, set) else result
        return getattr(self.as_real_set(), name)(*keys)

    @staticmethod
    def wrap_result(result: Any) -> Variable:
        """A result of Python's set operations on keys: a set of keys, or a bool."""
        if isinstance(result, (set, frozenset)):
            return SetVariable(result, py_type=type(result))
        return ConstantVariable(result)

    def _write(self, tx: Tracer, name: str, args: Sequence[Variable]) -> None:
        if self.py_type is frozenset:
            unsupported(f"'frozenset' object has no attribute {name!r}", BreakCode.MISSING_ATTR)
        before = set(self.keys)
        # the same operation on the real set of keys, items in the arguments' order: where the set keeps an item,
        # and so its iteration order, is what CPython's gives
        if name in ("add", "discard", "remove"):
            key = hash_key(tx, args[0], "a set item")
            if name == "remove" and key not in self.keys:
                raise_observed(
                    KeyError(args[0].as_python_constant() if is_constant(key) else key), BreakCode.CONTAINER_METHOD
                )
            self.keys.add(key) if name == "add" else self.keys.discard(key)
        elif name == "pop":
            if not self.keys:
                raise_observed(KeyError("pop from an empty set"), BreakCode.CONTAINER_METHOD)
            self.keys.clear()  # (of one item: the caller checked)
        else:  # clear, update and the *_update forms (each of any iterables), set.__init__(s, it) (emptied, then
            # updated): the keys taken as CPython's take them (a generator's one by one, reading the set between)
            if name == "__init__":
                self.keys.clear()
            try:
                getattr(self.keys, "update" if name == "__init__" else name)(*[keys_as_taken(tx, a) for a in args])
            finally:
                self._note_write(tx, before, name)
            return
        self._note_write(tx, before, name)

    def _note_write(self, tx: Tracer, before: set[Any], name: str) -> None:
        if self.keys != before or name in ("clear", "__init__"):
            tx.output.side_effects.mutated_container(self)  # one from outside: replayed after the graph
            self.read_order = None

    def replace_contents(self, cg: Emitter, temp: str) -> None:
        """The set from outside given the contents the trace left in it, item by item (`apply_set_writes`)."""
        cg.emit("PUSH_NULL")
        cg.emit_const(apply_set_writes)
        cg.load_source(self)
        cg.emit("LOAD_FAST", temp)
        cg.call(2)
        cg.emit("POP_TOP")

    def rebuild(self, cg: Emitter) -> None:
        if self.py_type is frozenset:
            cg.emit("PUSH_NULL")
            cg.emit_const(frozenset)
        for key in self.ordered_keys():
            if is_constant(key):
                cg.emit_const(key)
            else:
                cg.load(key_variable(key))
        cg.emit("BUILD_SET", len(self.keys))
        if self.py_type is frozenset:
            cg.call(1)

    def __repr__(self) -> str:
        return f"SetVariable({self.py_type.__name__}, {len(self.keys)} items)"
