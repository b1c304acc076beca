"""Python literals and opaque Python objects that are used as constants during tracing."""
from __future__ import annotations

import inspect
import sys
import types
import weakref
from typing import Any, Sequence

import torch

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import AttrSource, ItemSource, ModuleGlobalsSource, WeakrefCallSource
from framejit.variables.base import KnownValueVariable, Variable


# Types whose values are immutable and can be embedded as LOAD_CONST / FX literals.
LITERAL_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
                 torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, range, slice)


def is_literal(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(is_literal(v) for v in value)
    return isinstance(value, LITERAL_TYPES)


def plain_scalar(value: Any) -> Any:
    """A subclass of a Python scalar (numpy.float64, an IntEnum) as the plain scalar it equals: FX writes node
    arguments with repr(), and `np.float64(2.0)` names a module the graph's code does not have."""
    for base in (int, float, complex, str):
        if isinstance(value, base) and type(value) not in (base, bool):
            return base(value)
    return value


class ConstantVariable(KnownValueVariable):
    """An immutable Python value known at trace time (guarded where it was read)."""

    def as_node_arg(self) -> Any:
        return plain_scalar(self.value)

    def as_fake(self) -> Any:
        return self.value

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def unpack(self, tx: Tracer) -> list[Variable]:
        if isinstance(self.value, (str, bytes, tuple, range, torch.Size, frozenset)):
            return [ConstantVariable(v) for v in self.value]
        return super().unpack(tx)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        attr = getattr(self.value, name)  # AttributeError -> translator turns it into Unsupported
        if is_literal(attr):
            return ConstantVariable(attr)
        if callable(attr):
            return ConstantMethodVariable(self, name)
        unsupported(f"attribute {name!r} of constant {self.value!r}", BreakCode.GETATTR)

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


class ConstantMethodVariable(Variable):
    """A method of a constant (str.format, int.bit_length, ...): folded when all arguments are constants."""

    def __init__(self, obj: ConstantVariable, name: str) -> None:
        self.obj = obj
        self.name = name

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{type(self.obj.value).__name__}.{self.name} with non-constant arguments", BreakCode.CALL)
        result = getattr(self.obj.value, self.name)(*[a.as_python_constant() for a in args],
                                                   **{k: v.as_python_constant() for k, v in kwargs.items()})
        return tx.wrap_constant(result)


# objects that never change once made: what is read from them is a constant, with no guard of its own
_IMMUTABLE_OBJECTS = (types.CodeType, inspect.Signature, inspect.Parameter)


def is_immutable(var: Variable) -> bool:
    return isinstance(var, ObjectVariable) and isinstance(var.value, _IMMUTABLE_OBJECTS)


class ObjectVariable(KnownValueVariable):
    """An opaque Python object used by identity: a Python module, a class, a C function...

    Attribute reads on modules and classes are wrapped with a source so that
    they are guarded like any other read.
    """

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:

        value = getattr(self.value, name)
        if is_immutable(self):  # a method of it is wrapped like any (Signature.bind has a rule of its own)
            return tx.wrap(value, None) if isinstance(value, types.MethodType) else tx.wrap_constant(value)
        if self.source is not None:
            source = AttrSource(self.source, name)
        elif isinstance(self.value, types.ModuleType) and sys.modules.get(self.value.__name__) is self.value \
                and name in vars(self.value):
            source = ItemSource(ModuleGlobalsSource(self.value.__name__), name)
        else:
            source = None
        return tx.wrap(value, source)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.callables import call_python_object
        from framejit.variables.user_object import construct, constructible
        made = new_exception(self.value, args, kwargs) if isinstance(self.value, type) else None
        if made is not None:
            return made
        if isinstance(self.value, type) and self.source is not None and constructible(self.value):
            return construct(tx, self, args, kwargs)
        if isinstance(self.value, weakref.ReferenceType) and self.source is not None and not args and not kwargs:
            return tx.wrap(self.value(), WeakrefCallSource(self.source))  # guarded like any read
        return call_python_object(tx, self.value, args, kwargs)

    def __repr__(self) -> str:
        return f"ObjectVariable({self.value!r})"


class WeakrefVariable(Variable):
    """`weakref.ref(obj)` made during the trace for an object the trace can name (nn.RNN rebuilding its
    `_flat_weight_refs`): calling it gives `obj` back; after the graph it is made again from `obj`."""

    def __init__(self, referent: Variable) -> None:
        self.referent = referent

    def python_type(self) -> type:
        return weakref.ReferenceType

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            unsupported("calling a weak reference with arguments", BreakCode.CALL)
        return self.referent

    def truth(self, tx: Tracer) -> bool:
        return True

    def children(self) -> list[Variable]:
        return [self.referent]

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(weakref.ref)
        cg.load(self.referent)
        cg.call(1)


def new_exception(cls: Any, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable | None:
    """cls(*args) for an exception class whose construction runs no Python (a builtin one, or a subclass that
    keeps BaseException's __new__ and __init__) with constant arguments, made now; None otherwise."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or kwargs:
        return None
    if any("__init__" in vars(c) or "__new__" in vars(c) for c in cls.__mro__ if c.__module__ != "builtins"):
        return None
    if not all(a.is_python_constant() for a in args):
        return None
    return ObjectVariable(cls(*[a.as_python_constant() for a in args]))
