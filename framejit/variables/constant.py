"""Python literals and opaque Python objects that are used as constants during tracing."""

from __future__ import annotations

import enum
import inspect
import sys
import types
import typing
import weakref
from typing import Any, Sequence

import torch

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import AttrSource, ItemSource, ModuleGlobalsSource, WeakrefCallSource
from framejit.variables.base import KnownValueVariable, Variable


# Types whose values are immutable and can be embedded as LOAD_CONST / FX literals.
LITERAL_TYPES = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    type(Ellipsis),
    type(NotImplemented),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.Size,
    range,
    slice,
)


# type hints (`int | None`, `list[int]`, `Optional[T]`, `Union`, forward references): immutable, used by identity
TYPE_HINTS = (
    types.UnionType,
    types.GenericAlias,
    type(typing.Optional[int]),
    type(typing.List[int]),
    type(typing.List),
    type(typing.Callable),
    type(typing.Tuple),
    type(typing.Union),
    typing.ForwardRef,
    typing.TypeVar,
)


def is_literal(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(is_literal(v) for v in value)
    return isinstance(value, LITERAL_TYPES) or _is_numpy_scalar(value)


def _is_numpy_scalar(value: Any) -> bool:
    numpy = sys.modules.get("numpy")  # not imported: nothing can be one
    return numpy is not None and isinstance(value, numpy.generic) and not isinstance(value, numpy.object_)


def is_numpy_integer(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.integer)


_PLAIN_TYPES = (int, float, complex, str, bytes)  # bool is final: it has no subclasses


def plain_literal(value: Any) -> Any:
    """`value` as the builtin type it derives from, where its own type is a subclass of one (an IntEnum member),
    or as the Python number it holds (a numpy scalar): a graph's generated code writes its literals by repr(), and
    `np.float64(8.0)` names a module that code does not import. torch treats such values as Python numbers."""
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(plain_literal(v) for v in value)
    if _is_numpy_scalar(value):
        return value.item()
    if type(value) not in _PLAIN_TYPES and isinstance(value, _PLAIN_TYPES) and not isinstance(value, bool):
        return next(base for base in _PLAIN_TYPES if isinstance(value, base))(value)
    return value


def is_constant_key(value: Any) -> bool:
    """A dict key the trace can hold: a literal, or an object hashed by identity that never changes (a class, a
    function, a type hint, an enum member; registries keyed by type)."""
    return is_literal(value) or isinstance(
        value, (type, types.FunctionType, types.BuiltinFunctionType, enum.Enum, TYPE_HINTS)
    )


class IdentityKey:
    """A dict key compared by identity whose object exists outside the trace (a tensor the graph takes as an input,
    an object of a class without __eq__/__hash__): the object, for the dict's hashing, and its Variable, which the
    trace reads and rebuilds the key from."""

    __slots__ = ("obj", "variable")

    def __init__(self, obj: Any, variable: Variable) -> None:
        self.obj, self.variable = obj, variable

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdentityKey) and other.obj is self.obj


def key_variable(key: Any) -> Variable:
    """The Variable of a dict key the trace holds (is_constant_key, or an IdentityKey)."""
    if isinstance(key, IdentityKey):
        return key.variable
    return ConstantVariable(key) if is_literal(key) else ObjectVariable(key)


class ConstantVariable(KnownValueVariable):
    """An immutable Python value known at trace time (guarded where it was read)."""

    def as_node_arg(self) -> Any:
        return plain_literal(self.value)

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
        result = getattr(self.obj.value, self.name)(
            *[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()}
        )
        return tx.wrap_constant(result)


# objects that never change once made: what is read from them is a constant, with no guard of its own
_IMMUTABLE_OBJECTS = (types.CodeType, inspect.Signature, inspect.Parameter, frozenset)


def is_immutable(var: Variable) -> bool:
    return isinstance(var, ObjectVariable) and isinstance(var.value, _IMMUTABLE_OBJECTS)


class ObjectVariable(KnownValueVariable):
    """An opaque Python object used by identity: a Python module, a class, a C function...

    Attribute reads on modules and classes are wrapped with a source so that
    they are guarded like any other read.
    """

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def unpack(self, tx: Tracer) -> list[Variable]:
        if type(self.value) is frozenset:  # guarded by identity, so its items and their order are fixed
            return [tx.wrap(v, None) for v in self.value]
        return super().unpack(tx)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        value = getattr(self.value, name)
        if isinstance(self.value, BaseException) and isinstance(value, BaseException) and self.source is None:
            return ObjectVariable(value)  # __context__/__cause__ of an exception the trace raised: one as well
        if is_immutable(self):  # a method of it is wrapped like any (Signature.bind has a rule of its own)
            return tx.wrap(value, None) if isinstance(value, types.MethodType) else tx.wrap_constant(value)
        if self.source is not None:
            source = AttrSource(self.source, name)
        elif (
            isinstance(self.value, types.ModuleType)
            and sys.modules.get(self.value.__name__) is self.value
            and name in vars(self.value)
        ):
            source = ItemSource(ModuleGlobalsSource(self.value.__name__), name)
        else:
            source = None
        return tx.wrap(value, source)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.callables import call_python_object
        from framejit.variables.nn_module import NewModuleVariable, is_torch_nn_class
        from framejit.variables.user_object import construct, constructible

        if isinstance(self.value, type) and is_torch_nn_class(self.value):
            return NewModuleVariable.make(self.value, args, kwargs)
        made = new_exception(self.value, args, kwargs) if isinstance(self.value, type) else None
        if made is not None:
            return made
        if isinstance(self.value, type) and self.source is not None and constructible(self.value):
            return construct(tx, self, args, kwargs)
        meta_call = type(self.value).__call__ if isinstance(self.value, type) else None
        if isinstance(meta_call, types.FunctionType) and self.source is not None:  # a metaclass's own (Enum's)
            call_source = AttrSource(AttrSource(self.source, "__class__"), "__call__")
            return tx.wrap(meta_call, call_source).call(tx, [self, *args], kwargs)
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
