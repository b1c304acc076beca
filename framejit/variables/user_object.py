"""Instances of user classes read during tracing: attribute reads are guarded, writes replayed."""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Sequence

from framejit.trace.sources import AttrSource
from framejit.variables.base import Variable, unsupported

if TYPE_CHECKING:
    from framejit.trace.translator import Translator


def lookup_class_attr(cls: type, name: str) -> tuple[bool, Any]:
    for klass in cls.__mro__:
        if name in vars(klass):
            return True, vars(klass)[name]
    return False, None


class UserObjectVariable(Variable):
    """An object of a user-defined class that exists outside the frame (it has a source)."""

    def __init__(self, value: Any, source: Any) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx: "Translator", name: str) -> Variable:
        from framejit.variables.builder import wrap_value
        from framejit.variables.callables import UserFunctionVariable, UserMethodVariable
        pending = tx.output.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        cls = type(self.value)
        found, attr = lookup_class_attr(cls, name)
        is_data_descriptor = found and hasattr(type(attr), "__set__")
        inst = getattr(self.value, "__dict__", {})
        if name in inst and not is_data_descriptor:
            return wrap_value(tx, inst[name], AttrSource(self.source, name))
        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(attr), self)
        if isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
            return UserFunctionVariable(attr.fget).call(tx, [self], {})
        if isinstance(attr, staticmethod):
            return wrap_value(tx, attr.__func__, None)
        if found and not hasattr(type(attr), "__get__"):
            return wrap_value(tx, attr, AttrSource(self.source, name))
        if not found and "__getattr__" in dir(cls) and lookup_class_attr(cls, "__getattr__")[0]:
            unsupported(f"{cls.__name__} defines __getattr__", "getattr")
        if not found and name not in inst:
            raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
        return wrap_value(tx, getattr(self.value, name), AttrSource(self.source, name))

    def call(self, tx: "Translator", args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.callables import UserFunctionVariable
        found, call = lookup_class_attr(type(self.value), "__call__")
        if found and isinstance(call, types.FunctionType):
            return UserFunctionVariable(call).call(tx, [self, *args], kwargs)
        unsupported(f"calling a {type(self.value).__name__} object", "call")

    def __repr__(self) -> str:
        return f"UserObjectVariable({type(self.value).__name__})"
