"""Dicts of Variables (dict, OrderedDict, defaultdict, Counter, and dict subclasses read from outside), their
key/value/item views, and how the trace makes them (dict(), dict.fromkeys, the collections constructors).

A dict is mutable here; mutating one that came from outside the frame records a side effect replayed after the graph.
"""

from __future__ import annotations

import collections
import operator
from typing import Any, Callable, ClassVar, Sequence


from framejit.contracts import Emitter, GuardKind, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.sources import AttrSource, DictItemSource, DictListSource, ItemSource
from framejit.variables.base import Variable
from framejit.variables.base import HEAPTYPE
from framejit.variables.constant import ConstantVariable, IdentityKey, is_constant_key
from framejit.variables.containers import IteratorVariable, TupleVariable, _born, bound_method, clear_and_update
from framejit.variables.hash_keys import hash_key, is_constant, key_variable, read_keys_by_position


_COLLECTIONS_TYPES = (collections.OrderedDict, collections.defaultdict, collections.Counter)

# dict methods that only read: what a dict standing for another object, or a dict subclass's, may do
DICT_READS = frozenset({"get", "keys", "values", "items", "__getitem__", "__contains__", "__len__", "__iter__", "copy"})


def dict_key(tx: Tracer, key: Variable) -> Any:
    """What a DictVariable holds for `key` (hash_keys.hash_key): a constant as itself, a tensor or an object
    compared by identity as an IdentityKey."""
    return hash_key(tx, key, "a dict key")


def _plain(key: Any) -> Any:
    return key.obj if isinstance(key, IdentityKey) else key


def _read_identity_keyed(tx: Tracer, value: dict, source: Any) -> dict[Any, Variable]:
    """The items of a real dict with keys compared by identity (an optimizer's state, keyed by parameter): each key
    and value read by position (no guard can name such a key; hash_keys.read_keys_by_position)."""
    keys = read_keys_by_position(tx, value, dict.keys(value), source, DictListSource(source, "keys"), "dict")
    values = DictListSource(source, "values")
    return {key: tx.wrap(v, ItemSource(values, i)) for i, (key, v) in enumerate(zip(keys, dict.values(value)))}


class DictVariable(Variable):
    """A dict whose keys are Python constants (str, int, ...) or IdentityKeys, values Variables."""

    rebuilt_once = True
    owner: Variable | None = None  # the instance of a dict subclass whose items these are

    def __init__(
        self,
        items: dict[Any, Variable],
        source: Any = None,
        py_type: type = dict,
        read_only: bool = False,
        default_factory: Variable | None = None,
    ) -> None:
        self.items = dict(items)
        self.source = source
        self.py_type = py_type
        self.default_factory = default_factory  # a defaultdict's; None for other mappings
        self.born = _born()
        self.read_only = read_only  # a snapshot standing for something else (an object's __dict__): no writes

    @classmethod
    def read(cls, tx: Tracer, value: dict, source: Any) -> "DictVariable":
        """A real dict read from `source`: its keys guarded (they must be constants), each value wrapped."""
        factory = None
        if isinstance(value, collections.defaultdict):
            factory = tx.wrap(value.default_factory, AttrSource(source, "default_factory") if source else None)
        if all(is_constant_key(k) for k in value):
            if source is not None:
                tx.output.guards.add(source, GuardKind.DICT_KEYS, value)
            item = ItemSource if type(value).__getitem__ is dict.__getitem__ else DictItemSource  # past a Python one
            items = {k: tx.wrap(v, item(source, k) if source else None) for k, v in value.items()}
        else:
            items = _read_identity_keyed(tx, value, source)
        return cls(items, source, type(value), default_factory=factory)

    def python_type(self) -> type:
        return self.py_type

    def held_keys(self) -> Any:
        """Its keys as it holds them (what an iterator over it checks are unchanged)."""
        return self.items.keys()

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def unpack(self, tx: Tracer) -> list[Variable]:
        return [key_variable(k) for k in self.items]

    def children(self) -> list[Variable]:
        factory = [self.default_factory] if self.default_factory is not None else []
        keys = [key_variable(k) for k in self.items if not is_constant(k)]  # a tensor key the graph computes
        return [*keys, *self.items.values(), *factory]

    def rebuild(self, cg: Emitter) -> None:
        made_as = self.made_as()
        if made_as is not dict:  # OrderedDict(d), Counter(d), defaultdict(factory, d)
            cg.emit("PUSH_NULL")
            cg.emit_const(made_as)
            if self.default_factory is not None:
                cg.load(self.default_factory)
        for key, value in self.items.items():
            if is_constant(key):
                cg.emit_const(key)
            else:
                cg.load(key_variable(key))
            cg.load(value)
        cg.emit("BUILD_MAP", len(self.items))
        if made_as is not dict:
            cg.call(2 if self.default_factory is not None else 1)

    def made_as(self) -> type:
        """The type it is made as: its own, or for the items of a user's dict subclass (the contents given back to
        one from outside) the nearest builtin type, whose constructor runs no user code."""
        if self.py_type in _COLLECTIONS_TYPES or not self.py_type.__flags__ & HEAPTYPE:
            return self.py_type
        return next(k for k in self.py_type.__mro__ if not k.__flags__ & HEAPTYPE)

    def replace_contents(self, cg: Emitter, temp: str) -> None:
        clear_and_update(cg, self, temp, self.py_type)

    def is_python_constant(self) -> bool:
        return all(v.is_python_constant() and is_constant(k) for k, v in self.items.items())

    def as_python_constant(self) -> Any:
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def as_node_arg(self) -> Any:
        return {k: v.as_node_arg() for k, v in self.items.items()}

    def as_fake(self) -> Any:
        return {k: v.as_fake() for k, v in self.items.items()}

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return bound_method(self, name)

    def _mutated(self, tx: Tracer) -> None:
        tx.output.side_effects.mutated_container(self)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        k = dict_key(tx, key)
        if k in self.items:
            return self.items[k]
        if self.default_factory is not None and not (
            self.default_factory.is_python_constant() and self.default_factory.as_python_constant() is None
        ):
            value = self.default_factory.call(tx, [], {})  # defaultdict.__missing__: store factory()
            self.items[k] = value
            self._mutated(tx)
            return value
        if issubclass(self.py_type, collections.Counter):
            return ConstantVariable(0)  # Counter.__missing__ answers 0 and stores nothing
        if self.owner is not None:  # dict.__getitem__ of a subclass calls the class's __missing__, if it has one
            from framejit.variables.user_object import python_class_method

            missing = python_class_method(tx, self.owner, "__missing__")
            if missing is not None:
                return missing.call(tx, [key], {})
        raise_observed(KeyError(_plain(k)), BreakCode.DICT_KEY)

    def _merge_mapping(self, tx: Tracer, mapping: Variable) -> None:
        """`for k in mapping.keys(): d[k] = mapping[k]`, traced (a user's Mapping: its own keys and __getitem__)."""
        from framejit.variables.operators import call_operator

        keys = mapping.var_getattr(tx, "keys").call(tx, [], {})
        for key in keys.unpack(tx):
            self.items[dict_key(tx, key)] = call_operator(tx, operator.getitem, [mapping, key])

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.read_only and name not in DICT_READS:
            unsupported(f"dict.{name} on a snapshot that stands for another object", BreakCode.SIDE_EFFECT)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            return ConstantVariable(dict_key(tx, args[0]) in self.items)
        if name == "get":
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return self.items.get(dict_key(tx, args[0]), default)
        if name in ("keys", "values", "items"):
            return DictViewVariable(self, name)
        if name == "copy":  # the collections' mappings copy to their own type; dict.copy of a subclass is a dict
            kept = self.py_type if self.py_type in _COLLECTIONS_TYPES else dict
            return DictVariable(self.items, py_type=kept, default_factory=self.default_factory)
        if name == "__setitem__":
            self.items[dict_key(tx, args[0])] = args[1]
        elif name == "__delitem__":
            del self.items[dict_key(tx, args[0])]
        elif name in ("update", "__init__"):  # dict.__init__(d, ...) adds to d as update does
            self._mutated(tx)  # (first: a generator that raises midway leaves the pairs it gave)
            for source in args:
                if isinstance(source, DictVariable):
                    self.items.update(source.items)
                    continue
                if hasattr(source.python_type(), "keys"):  # as CPython: a mapping is read by keys() and [key]
                    self._merge_mapping(tx, source)
                    continue
                for pair in source.each_item(tx):  # stored one by one as given: a generator may read d between
                    k_v = pair.unpack(tx)
                    if len(k_v) != 2:
                        unsupported(
                            f"dict update sequence element has length {len(k_v)}; 2 is required",
                            BreakCode.CONTAINER_METHOD,
                        )
                    self.items[dict_key(tx, k_v[0])] = k_v[1]
            self.items.update(kwargs)
        elif name == "pop":
            key = dict_key(tx, args[0])
            if key not in self.items and len(args) < 2:
                raise_observed(KeyError(_plain(key)), BreakCode.DICT_KEY)
            self._mutated(tx)
            return self.items.pop(key, args[1] if len(args) > 1 else None)
        elif name == "setdefault":
            key = dict_key(tx, args[0])
            if key not in self.items:
                self.items[key] = args[1] if len(args) > 1 else ConstantVariable(None)
                self._mutated(tx)
            return self.items[key]
        elif name == "clear":
            self.items.clear()
        elif name == "move_to_end" and issubclass(self.py_type, collections.OrderedDict):
            key = args[0].as_python_constant()
            last = (args[1] if len(args) > 1 else kwargs.get("last", ConstantVariable(True))).as_python_constant()
            if key not in self.items:
                unsupported(f"KeyError: {key!r}", BreakCode.DICT_KEY)
            value = self.items.pop(key)
            self.items = {key: value, **self.items} if not last else {**self.items, key: value}
        else:
            unsupported(f"dict.{name}", BreakCode.CONTAINER_METHOD)
        self._mutated(tx)
        return ConstantVariable(None)

    def merged_with(self, left: "DictVariable", right: "DictVariable") -> "DictVariable":
        """This (new) mapping holding left's items updated with right's: the result of `left | right`."""
        self.items = {**left.items, **right.items}
        return self

    def __repr__(self) -> str:
        return f"DictVariable({self.items})"


class DictViewVariable(Variable):
    """d.keys() / d.values() / d.items(): a view, so it shows the dict as it is when it is read."""

    _TYPES: ClassVar[dict[str, type]] = {
        "keys": type({}.keys()),
        "values": type({}.values()),
        "items": type({}.items()),
    }

    def __init__(self, dict_var: DictVariable, kind: str) -> None:
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self) -> type:
        return self._TYPES[self.kind]

    def _now(self) -> list[Variable]:
        items = self.dict_var.items
        if self.kind == "keys":
            return [key_variable(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable([key_variable(k), v]) for k, v in items.items()]

    def unpack(self, tx: Tracer) -> list[Variable]:
        return self._now()

    def children(self) -> list[Variable]:
        return self._now()

    def truth(self, tx: Tracer) -> bool:
        return bool(self.dict_var.items)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return bound_method(self, name)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "__len__":
            return ConstantVariable(len(self.dict_var.items))
        if name == "__contains__" and self.kind == "keys":
            return ConstantVariable(dict_key(tx, args[0]) in self.dict_var.items)
        if name == "isdisjoint" and self.kind != "values" and len(args) == 1:  # as the set it holds
            from framejit.variables.sets import SetVariable

            return SetVariable.of(tx, self.unpack(tx)).call_method(tx, name, args, kwargs)
        unsupported(f"dict_{self.kind}.{name}", BreakCode.CONTAINER_METHOD)

    def rebuild(self, cg: Emitter) -> None:
        cg.load(self.dict_var)
        cg.emit("LOAD_METHOD", self.kind)
        cg.call(0)

    def __repr__(self) -> str:
        return f"DictViewVariable({self.kind})"


def dict_iterator(tx: Tracer, value: Variable) -> IteratorVariable | None:
    """iter() of a dict, one of its views, or a set (None for anything else): the dict or set may not change size
    while the iterator runs, as Python checks at each step."""
    from framejit.variables.sets import SetVariable
    from framejit.variables.stdlib_containers import DequeVariable

    if isinstance(value, (DictVariable, SetVariable, DequeVariable)):
        return IteratorVariable.over(tx, value)
    if isinstance(value, DictViewVariable):
        return IteratorVariable.over(tx, value.dict_var, value.unpack(tx))
    return None


def _dict(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    result = DictVariable({})
    if args:
        result.call_method(tx, "update", args, {})
    result.items.update(kwargs)
    return result


def _fromkeys_of(cls: type) -> Callable[..., Variable]:
    """cls.fromkeys(keys, value=None) for dict, OrderedDict and defaultdict (whose factory is then None)."""

    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        value = args[1] if len(args) > 1 else kwargs.get("value", ConstantVariable(None))
        items = {dict_key(tx, k): value for k in _iterate(tx, args[0])}
        factory = ConstantVariable(None) if cls is collections.defaultdict else None
        return DictVariable(items, py_type=cls, default_factory=factory)

    return trace_call


def _ordered_dict(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    result = _dict(tx, args, kwargs)
    result.py_type = collections.OrderedDict
    return result


def _defaultdict(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    factory = args[0] if args else ConstantVariable(None)
    result = _dict(tx, args[1:], kwargs)
    result.py_type, result.default_factory = collections.defaultdict, factory
    return result


def _counter(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """Counter(iterable of constants) or Counter(mapping): the counts are computed now."""
    counts: collections.Counter = collections.Counter()
    for arg in args:
        if isinstance(arg, DictVariable):
            counts.update({k: v.as_python_constant() for k, v in arg.items.items()})
        else:
            counts.update(item.as_python_constant() for item in _iterate(tx, arg))
    counts.update({k: v.as_python_constant() for k, v in kwargs.items()})
    return DictVariable({k: ConstantVariable(n) for k, n in counts.items()}, py_type=collections.Counter)


def _iterate(tx: Tracer, value: Variable) -> list[Variable]:
    return value.unpack(tx)


# constructors of mappings -> how a call of one is traced (joined into builtins.TRACED_BUILTINS)
RULES: dict[Any, Callable[..., Variable]] = {
    dict: _dict,
    dict.fromkeys: _fromkeys_of(dict),
    collections.OrderedDict.fromkeys: _fromkeys_of(collections.OrderedDict),
    collections.defaultdict.fromkeys: _fromkeys_of(collections.defaultdict),
    collections.OrderedDict: _ordered_dict,
    collections.defaultdict: _defaultdict,
    collections.Counter: _counter,
}
