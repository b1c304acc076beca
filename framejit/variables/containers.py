"""Tuples, lists, sets, slices and iterators of Variables (dicts are in mappings.py)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import torch

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, Unsupported, raise_observed, unsupported
from framejit.variables.base import HEAPTYPE, Variable
from framejit.variables.constant import ConstantVariable


def const_args(args: Sequence[Variable], what: str) -> list[Any]:
    if not all(a.is_python_constant() for a in args):
        unsupported(f"{what} with non-constant arguments", BreakCode.CONTAINER)
    return [a.as_python_constant() for a in args]


_births = [0]


def birth_mark() -> int:
    """A counter that grows with every container made in a trace: what is made after a mark is newer."""
    return _births[0]


def _born() -> int:
    _births[0] += 1
    return _births[0]


class BaseListVariable(Variable):
    """Shared behaviour of tuples and lists."""

    def __init__(self, items: list[Variable], source: Any = None) -> None:
        self.items = list(items)
        self.source = source
        self.born = _born()

    def unpack(self, tx: Tracer) -> list[Variable]:
        return list(self.items)

    def children(self) -> list[Variable]:
        return list(self.items)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def is_python_constant(self) -> bool:
        return all(i.is_python_constant() for i in self.items)

    def as_python_constant(self) -> Any:
        return self.python_type()([i.as_python_constant() for i in self.items])

    def as_node_arg(self) -> Any:
        return self.python_type()([i.as_node_arg() for i in self.items])

    def as_fake(self) -> Any:
        return self.python_type()([i.as_fake() for i in self.items])

    def rebuild(self, cg: Emitter) -> None:
        for item in self.items:
            cg.load(item)
        cg.emit("BUILD_LIST" if isinstance(self, ListVariable) else "BUILD_TUPLE", len(self.items))

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        index = key.as_python_constant()
        if isinstance(index, slice):
            return (
                type(self)(self.items[index])
                if type(self) in (TupleVariable, ListVariable)
                else TupleVariable(self.items[index])
            )
        try:
            return self.items[index]
        except IndexError as e:
            raise_observed(e, BreakCode.INDEX)
        except TypeError as e:
            unsupported(f"TypeError indexing {self}: {e}", BreakCode.INDEX)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name in ("index", "count") and not kwargs:
            const = const_args(args, f"{self.python_type().__name__}.{name}")
            values = [i.as_python_constant() for i in self.items] if self.is_python_constant() else None
            if values is None:
                unsupported(f"{name}() on a sequence of non-constants", BreakCode.CONTAINER)
            return ConstantVariable(getattr(values, name)(*const))
        unsupported(f"{self.python_type().__name__}.{name}", BreakCode.CONTAINER_METHOD)


class TupleVariable(BaseListVariable):
    """A tuple; `py_type` keeps named tuples (e.g. torch.return_types.max) for attribute access."""

    def __init__(self, items: list[Variable], source: Any = None, py_type: type = tuple) -> None:
        super().__init__(items, source)
        self.py_type = py_type

    def python_type(self) -> type:
        return self.py_type

    def as_python_constant(self) -> Any:
        values = tuple(i.as_python_constant() for i in self.items)
        return torch.Size(values) if self.py_type is torch.Size else values

    def as_node_arg(self) -> Any:
        return tuple(i.as_node_arg() for i in self.items)

    def as_fake(self) -> Any:
        return tuple(i.as_fake() for i in self.items)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        # namedtuples have _fields; structseqs such as torch.return_types.max have __match_args__
        fields = getattr(self.py_type, "_fields", None) or getattr(self.py_type, "__match_args__", None) or ()
        if name in fields:
            return self.items[list(fields).index(name)]
        return bound_method(self, name)

    def rebuild(self, cg: Emitter) -> None:
        super().rebuild(cg)
        if self.py_type is tuple:
            return
        # plain tuple -> py_type(*tuple) for namedtuples, py_type(tuple) for structseqs
        temp = cg.new_temp()
        cg.emit("STORE_FAST", temp)
        cg.emit("PUSH_NULL")
        cg.emit_const(self.py_type)
        if hasattr(self.py_type, "_make"):
            cg.emit("LOAD_ATTR", "_make")
        cg.emit("LOAD_FAST", temp)
        cg.call(1)

    def __repr__(self) -> str:
        return f"TupleVariable({self.items})"


class ListVariable(BaseListVariable):
    rebuilt_once = True
    owner: Variable | None = None  # the instance of a list subclass whose items these are

    def python_type(self) -> type:
        return list

    def replace_contents(self, cg: Emitter, temp: str) -> None:
        """list.__setitem__(source, slice(None), temp): list's own, so a list subclass's __setitem__ (already
        traced) does not run again."""
        cg.emit("PUSH_NULL")
        cg.emit_const(list.__setitem__)
        cg.load_source(self)
        cg.emit_const(None)
        cg.emit_const(None)
        cg.emit("BUILD_SLICE", 2)
        cg.emit("LOAD_FAST", temp)
        cg.call(3)
        cg.emit("POP_TOP")

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        return bound_method(self, name)

    def _mutated(self, tx: Tracer) -> None:
        tx.output.side_effects.mutated_container(self)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs and name != "sort":
            unsupported(f"list.{name} with keyword arguments", BreakCode.CONTAINER_METHOD)
        if name == "append":
            self.items.append(args[0])
        elif name == "extend":
            self._extend(tx, args[0])
        elif name == "__init__":  # list.__init__(l, iterable=()): emptied, then extended by the iterable
            self.items.clear()
            if args:
                self._extend(tx, args[0])
        elif name == "insert":
            self.items.insert(args[0].as_python_constant(), args[1])
        elif name == "pop":
            index = args[0].as_python_constant() if args else -1
            self._mutated(tx)
            return self.items.pop(index)
        elif name == "clear":
            self.items.clear()
        elif name == "reverse":
            self.items.reverse()
        elif name == "remove":
            target = args[0].as_python_constant()
            for i, item in enumerate(self.items):
                if item.is_python_constant() and item.as_python_constant() == target:
                    del self.items[i]
                    break
            else:
                unsupported("list.remove of a value not found among constants", BreakCode.CONTAINER_METHOD)
        elif name == "copy":
            return ListVariable(self.items)
        elif name == "__setitem__":
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                self.items[key] = args[1].unpack(tx)
            else:
                self.items[key] = args[1]
        elif name == "__delitem__":
            del self.items[args[0].as_python_constant()]
        else:
            return super().call_method(tx, name, args, kwargs)
        self._mutated(tx)
        return ConstantVariable(None)

    def _extend(self, tx: Tracer, iterable: Variable) -> None:
        """list.extend: a list or tuple's items as they are now (`l.extend(l)` doubles it); another iterable's
        appended one by one as it gives them, as CPython's does, so a generator reading the list sees each."""
        if isinstance(iterable, IteratorVariable) and iterable.live is self and not iterable.exhausted:
            unsupported("list.extend of an iterator over the list itself (endless in Python)", BreakCode.ITER)
        self._mutated(tx)  # (first: a generator that raises midway leaves the items it gave)
        if isinstance(iterable, BaseListVariable):
            self.items.extend(iterable.unpack(tx))
            return
        for item in iterable.each_item(tx):
            self.items.append(item)

    def __repr__(self) -> str:
        return f"ListVariable({self.items})"


class SliceVariable(Variable):
    def __init__(self, parts: list[Variable]) -> None:
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def children(self) -> list[Variable]:
        return list(self.parts)

    def rebuild(self, cg: Emitter) -> None:
        for part in self.parts:
            cg.load(part)
        cg.emit("BUILD_SLICE", len(self.parts))

    def is_python_constant(self) -> bool:
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self) -> Any:
        return slice(*[p.as_python_constant() for p in self.parts])

    def as_node_arg(self) -> Any:
        return slice(*[p.as_node_arg() for p in self.parts])

    def as_fake(self) -> Any:
        return slice(*[p.as_fake() for p in self.parts])


class IteratorVariable(Variable):
    """An iterator made by GET_ITER: the remaining items, consumed by FOR_ITER."""

    returned: Variable | None = None  # an inlined generator's return value (`x = yield from gen`)
    from_generator = False  # a generator made in the trace (generators.GeneratorVariable): advancing it runs code

    rebuilt_once = True

    def __init__(
        self, items: list[Variable], source: Any = None, live: "ListVariable | None" = None, start: int = 0
    ) -> None:
        self._items = list(items)
        self._next = start if live is not None else 0  # `items` of a snapshot start at the position
        self._start = start  # the position of a real iterator when the trace received it
        self.source = source  # a real iterator (a continuation's loop iterator, an argument), or None
        self.live = live  # iter(a list): reads the list as it is now, as a list iterator does
        self._exhausted = False
        self.over_dict: Any = None  # iter(a dict or set, DictVariable or SetVariable): its keys may not change
        self._dict_keys: tuple = ()

    @classmethod
    def over(cls, tx: Tracer, dict_var: Any, items: list[Variable] | None = None) -> "IteratorVariable":
        """Iteration over a dict's keys or a set's items, or `items` of a dict's view (snapshot); changing the
        container's size meanwhile is Python's error."""
        iterator = cls(dict_var.unpack(tx) if items is None else items)
        iterator.over_dict, iterator._dict_keys = dict_var, tuple(dict_var.held_keys())
        return iterator

    @property
    def consumed(self) -> int:
        """Items taken so far."""
        return self._next - (self._start if self.live is not None else 0)

    @property
    def position(self) -> int:
        """The index the iterator is at (what the replay sets a real iterator to, by __setstate__)."""
        return self._start + self.consumed

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    def _all(self) -> list[Variable]:
        return self.live.items if self.live is not None else self._items

    @property
    def items(self) -> list[Variable]:
        """The items not consumed yet."""
        return [] if self._exhausted else self._all()[self._next :]

    def python_type(self) -> type:
        return type(iter(()))

    def children(self) -> list[Variable]:
        return list(self.items)

    def unpack(self, tx: Tracer) -> list[Variable]:
        items, self._next, self._exhausted = self.items, len(self._all()), True
        return items

    def each_item(self, tx: Tracer) -> Iterator[Variable]:
        while (item := self.next()) is not None:
            yield item

    def next(self) -> Variable | None:
        what = (
            "dictionary" if isinstance(self.over_dict, dict_types()) else getattr(self.over_dict, "iterated_as", "set")
        )
        if self.over_dict is not None and len(self.over_dict.held_keys()) != len(self._dict_keys):
            unsupported(f"{what} changed size during iteration (Python raises RuntimeError)", BreakCode.ITER)
        if self.over_dict is not None and set(self.over_dict.held_keys()) != set(self._dict_keys):
            # as many keys, other ones: whether Python raises "keys changed", yields the new key or stops early
            # depends on where the table put them, which the trace does not know
            error = Unsupported(
                f"{what} keys changed during iteration: this frame runs as Python, where the "
                f"{what}'s own iterator decides what happens",
                code=BreakCode.ITER,
            )
            error.frame_runs_as_python = True
            raise error
        items = self._all()
        if self._exhausted or self._next >= len(items):
            self._exhausted = True  # stays exhausted even if the list grows later
            return None
        self._next += 1
        return items[self._next - 1]

    def stop_iteration(self) -> StopIteration:
        """What next() raises once it is exhausted."""
        return StopIteration()

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "__next__":
            return BoundMethod(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "__next__":
            item = self.next()
            if item is None:  # a `try` in the trace may catch it (contextlib's __exit__ does)
                raise_observed(self.stop_iteration(), BreakCode.ITER)
            return item
        unsupported(f"iterator.{name}", BreakCode.ITER)

    def rebuild(self, cg: Emitter) -> None:
        if self.live is not None and self.exhausted:
            cg.emit_const(iter(()))  # exhausted: stays so even if the list grows
        elif self.live is not None:
            cg.emit("PUSH_NULL")  # iter(the same list), advanced as far as the trace went
            cg.emit_const(_advanced_iterator)
            cg.load(self.live)
            cg.emit_const(self.position)
            cg.call(2)
        else:
            for item in self.items:
                cg.load(item)
            cg.emit("BUILD_TUPLE", len(self.items))
            cg.emit("GET_ITER")


def dict_types() -> tuple:
    from framejit.variables.mappings import DictVariable

    return (DictVariable,)


def _advanced_iterator(iterable: Any, position: int) -> Any:
    """iter(iterable) at `position`: a list iterator the trace had advanced."""
    iterator = iter(iterable)
    iterator.__setstate__(position)
    return iterator


def clear_and_update(cg: Emitter, var: Variable, temp: str, py_type: type) -> None:
    """base.clear(source); base.update(source, temp): a dict or set from outside given the contents the trace left
    in it, by the methods of the builtin type it is made of (`py_type`'s nearest one written in C), so that a
    subclass's own clear or update does not run again."""
    for method, args in (("clear", ()), ("update", (temp,))):
        cg.emit("PUSH_NULL")
        cg.emit_const(base_method(py_type, method))
        cg.load_source(var)
        for arg in args:
            cg.emit("LOAD_FAST", arg)
        cg.call(1 + len(args))
        cg.emit("POP_TOP")


def base_method(cls: type, name: str) -> Any:
    """The method `name` of the nearest class in cls's MRO written in C: what the builtin type the class is made
    of does, past its Python overrides."""
    return next(vars(k)[name] for k in cls.__mro__ if not k.__flags__ & HEAPTYPE and name in vars(k))


def bound_method(obj: Variable, name: str) -> "BoundMethod":
    """obj.name for a container: a method its call_method implements, or a missing attribute."""
    if not hasattr(obj.python_type(), name):
        unsupported(f"{obj.python_type().__name__!r} object has no attribute {name!r}", BreakCode.MISSING_ATTR)
    return BoundMethod(obj, name)


class BoundMethod(Variable):
    """obj.name for a Variable whose methods are implemented by its call_method."""

    def __init__(self, obj: Variable, name: str) -> None:
        self.obj = obj
        self.name = name

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.operators import call_dunder_operator

        result = call_dunder_operator(tx, self.obj, self.name, args, kwargs)
        if result is None:
            result = self.obj.call_method(tx, self.name, args, kwargs)
        owner = getattr(self.obj, "owner", None)
        return owner if result is self.obj and owner is not None else result  # `s.__ior__(t)` answers s itself

    def children(self) -> list[Variable]:
        return [self.obj]

    def rebuild(self, cg: Emitter) -> None:
        cg.load(self.obj)
        cg.emit("LOAD_ATTR", self.name)

    def __repr__(self) -> str:
        return f"BoundMethod({self.obj}.{self.name})"
