"""Instances of user classes made of a builtin container (dict, OrderedDict, list, set, frozenset subclasses): what
they hold is a container Variable of the base type (their base contents), which the base type's own methods and
operators act on, while the class's Python methods run traced."""

from __future__ import annotations

import collections
import operator
import types
from typing import Any

from framejit.contracts import Tracer
from framejit.variables.base import Variable
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
