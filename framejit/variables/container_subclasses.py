"""Instances of user classes made of a builtin container (dict, OrderedDict, list, set, frozenset subclasses): what
they hold is a container Variable of the base type (their base contents), which the base type's own methods and
operators act on, while the class's Python methods run traced."""

from __future__ import annotations

import collections
import operator
import types
from typing import Any

from framejit.contracts import Tracer
from framejit.variables.base import HEAPTYPE, Variable
from framejit.variables.containers import BoundMethod, bound_method
from framejit.variables.mappings import DictVariable, dict_key

# the builtin containers a user class may be made of: an instance holds what they hold (its base contents)
BASES = (dict, collections.OrderedDict, list, set, frozenset)


def base_container_method(tx: Tracer, obj: Variable, name: str) -> Variable | None:
    """obj.<name> where obj is an instance of a subclass of a builtin container and <name> is the container's own
    method: that method on what obj holds (an in-place operator answers obj); one from outside written is given
    its new contents after the graph by the base type's own methods. None for other objects."""
    from framejit.variables.user_object import NewObjectVariable, UserObjectVariable

    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)) or not issubclass(obj.python_type(), BASES):
        return None
    return BoundMethod(obj.base_contents(tx), name)


def unbound_container_method(tx: Tracer, method: Any, obj: Variable) -> Variable | None:
    """`set.add(s, x)`, `dict.__ior__(d, e)`, `list.append(l, x)`: a builtin container's method called through its
    class, bound to its first argument (an instance of the container type or of a subclass); None otherwise."""
    from framejit.variables.user_object import NewObjectVariable, UserObjectVariable

    owner = getattr(method, "__objclass__", None)
    if (
        not isinstance(method, (types.MethodDescriptorType, types.WrapperDescriptorType))
        or owner not in (*BASES, tuple)
        or not issubclass(obj.python_type(), owner)
    ):
        return None
    if isinstance(obj, (UserObjectVariable, NewObjectVariable)):
        return base_container_method(tx, obj, method.__name__)
    return bound_method(obj, method.__name__)


def merged_mapping(tx: Tracer, obj: Variable) -> DictVariable | None:
    """The items `**obj` (or {**obj}) takes from a dict subclass, as CPython's dict merge takes them: the raw
    items when the class keeps dict's own iteration, else obj.keys() and obj[key] for each (traced where they
    are Python). None for anything that is not an object of a dict subclass."""
    from framejit.variables.operators import call_operator
    from framejit.variables.user_object import NewObjectVariable, UserObjectVariable

    if not isinstance(obj, (UserObjectVariable, NewObjectVariable)) or not issubclass(obj.python_type(), dict):
        return None
    raw = obj.base_contents(tx)
    if obj.python_type().__iter__ is dict.__iter__:
        return DictVariable(raw.items)
    keys = obj.var_getattr(tx, "keys").call(tx, [], {}).unpack(tx)
    return DictVariable({dict_key(tx, k): call_operator(tx, operator.getitem, [obj, k]) for k in keys})


def text_operand(value: Variable) -> Any:
    """What str(), repr(), format() and an f-string format for `value`: a constant, or for an object of a
    dict/list/set subclass made in the trace that formats as its base type does (no __repr__, __str__ or
    __format__ in Python) and holds constants, a real instance of its class holding them (made by the base
    type's own __new__ and methods: no user code runs). Anything else is not a constant (the caller breaks)."""
    from framejit.variables.user_object import NewObjectVariable

    if not isinstance(value, NewObjectVariable) or value.base_part is None or not _formats_as_base(value.cls):
        return value.as_python_constant()
    contents = value.base_part.as_python_constant()  # (not constants: that break names them)
    cls = value.cls
    if issubclass(cls, frozenset):
        return frozenset.__new__(cls, contents)
    real = cls.__new__(cls)
    base = next(b for b in (dict, list, set) if issubclass(cls, b))
    {dict: dict.update, list: list.extend, set: set.update}[base](real, contents)
    return real


def _formats_as_base(cls: type) -> bool:
    """Whether formatting a `cls` instance runs only C code (its __repr__, __str__ and __format__ are builtin)."""
    return all(
        not next(k for k in cls.__mro__ if name in vars(k)).__flags__ & HEAPTYPE
        for name in ("__repr__", "__str__", "__format__")
    )
