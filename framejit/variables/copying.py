"""copy.deepcopy and copy.copy of values the trace holds, made the way the copy module makes them."""

from __future__ import annotations

import collections
import copy
import copyreg
from typing import Any, Callable

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import HEAPTYPE, Variable, lookup_class_attr
from framejit.variables.constant import is_literal
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.hash_keys import key_variable
from framejit.variables.sets import SetVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.user_object import NewObjectVariable, UserObjectVariable, instance_dict

# what Python's copy module returns unchanged (types, functions, numbers, strings, code, weak references...)
_ATOMIC = frozenset(cls for cls, copier in copy._deepcopy_dispatch.items() if copier is copy._deepcopy_atomic)
# protocol methods whose presence means a class copies itself in its own way
_OWN_PROTOCOL = ("__reduce_ex__", "__reduce__", "__getstate__", "__setstate__")


def _memo_key(value: Variable) -> Any:
    # one real object may be reached through several Variables (different sources): Python's memo is by identity
    return ("object", id(value.value)) if isinstance(value, UserObjectVariable) else ("variable", id(value))


def _is_atomic(value: Variable) -> bool:
    cls = value.python_type()
    return (
        cls in _ATOMIC
        or issubclass(cls, type)
        or (value.is_python_constant() and is_literal(value.as_python_constant()))
    )


def _refuse(value: Variable, why: str) -> None:
    unsupported(f"copying {value}: {why}", BreakCode.CALL)


def _check_default_protocol(value: Variable, hook: str) -> type:
    """The class of a user object whose copy Python makes as cls.__new__(cls) plus its __dict__ (and dict items)."""
    cls = value.python_type()
    found, _ = lookup_class_attr(cls, hook)
    if found is not None:
        _refuse(value, f"{cls.__name__} defines {hook}")
    if cls in copyreg.dispatch_table:
        _refuse(value, f"copyreg has a reducer for {cls.__name__}")
    for name in _OWN_PROTOCOL:
        owner, _ = lookup_class_attr(cls, name)
        if owner is not None and owner.__flags__ & HEAPTYPE:
            _refuse(value, f"{cls.__name__} defines {name}")
    if any(vars(k).get("__slots__") not in (None, (), []) for k in cls.__mro__):
        _refuse(value, f"{cls.__name__} has __slots__")
    base_new = dict.__new__ if issubclass(cls, dict) else object.__new__
    if cls.__new__ is not base_new or issubclass(cls, (list, set, tuple)):
        _refuse(value, f"{cls.__name__} is not made by object's or dict's __new__")
    return cls


def _object_state(tx: Tracer, value: Variable) -> tuple[dict[str, Variable], list[tuple[Variable, Variable]]]:
    """A user object's attributes and, for a dict subclass, its items, as the trace reads them."""
    writes = tx.output.side_effects
    attrs = (
        {}
        if isinstance(value, NewObjectVariable)
        else DictVariable.read(tx, instance_dict(value.value), value.attr_source("__dict__")).items
    )
    attrs.update({name: writes.pending_attr(value, name) for name in writes.attribute_names(value)})  # the trace's
    part = value.base_contents(tx) if issubclass(value.python_type(), dict) else None
    items = [] if part is None else [(key_variable(k), v) for k, v in part.items.items()]
    return attrs, items


def _copy_object(tx: Tracer, value: Variable, memo: dict, deep: bool) -> Variable:
    cls = _check_default_protocol(value, "__deepcopy__" if deep else "__copy__")
    attrs, items = _object_state(tx, value)
    result = NewObjectVariable(cls, value.class_var(tx))
    memo[_memo_key(value)] = result
    writes = tx.output.side_effects
    for name, attr in attrs.items():  # y.__dict__.update(state): no __setattr__ runs
        writes.store_attr(result, name, _deepcopy(tx, attr, memo) if deep else attr, generic=True)
    for key, item in items:  # y[key] = item, through the class's own __setitem__
        result.call_method(tx, "__setitem__", [key, _deepcopy(tx, item, memo) if deep else item], {})
    return result


def _deepcopy(tx: Tracer, value: Variable, memo: dict) -> Variable:
    key = _memo_key(value)
    if key in memo:
        return memo[key]
    cls = value.python_type()
    if isinstance(value, (UserObjectVariable, NewObjectVariable)):
        return _copy_object(tx, value, memo, deep=True)
    if _is_atomic(value):
        return value
    if isinstance(value, ListVariable) and cls is list:
        result = memo[key] = ListVariable([])
        result.items = [_deepcopy(tx, item, memo) for item in value.items]
        return result
    if isinstance(value, TupleVariable) and (cls is tuple or hasattr(cls, "_fields")):  # a named tuple too
        return memo.setdefault(key, TupleVariable([_deepcopy(tx, item, memo) for item in value.items], None, cls))
    if isinstance(value, DictVariable) and cls in (dict, collections.OrderedDict):
        result = memo[key] = DictVariable({}, None, cls)
        result.items = {k: _deepcopy(tx, v, memo) for k, v in value.items.items()}  # keys are constants
        return result
    if isinstance(value, SetVariable) and value.is_python_constant():  # its items are hashable constants
        return memo.setdefault(key, _new_set(value))
    _refuse(value, "framejit copies containers, constants and plain user objects")


def _new_set(value: SetVariable) -> Variable:
    if value.py_type is frozenset:  # immutable: the copy is the same object
        return value
    return SetVariable(value.keys, None, value.py_type)


def _shallow_copy(tx: Tracer, value: Variable) -> Variable:
    cls = value.python_type()
    if isinstance(value, (UserObjectVariable, NewObjectVariable)):
        return _copy_object(tx, value, {}, deep=False)
    if _is_atomic(value) or cls is tuple:
        return value
    if isinstance(value, ListVariable) and cls is list:
        return ListVariable(list(value.items))
    if isinstance(value, DictVariable) and cls in (dict, collections.OrderedDict):
        return DictVariable(dict(value.items), None, cls)
    if isinstance(value, SetVariable):
        return _new_set(value)
    _refuse(value, "framejit copies containers, constants and plain user objects")


def _deepcopy_rule(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if len(args) != 1 or kwargs:
        unsupported("copy.deepcopy with a memo argument", BreakCode.CALL)
    return _deepcopy(tx, args[0], {})


def _copy_rule(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if len(args) != 1 or kwargs:
        unsupported("copy.copy takes one argument", BreakCode.BAD_CALL)
    return _shallow_copy(tx, args[0])


RULES: dict[Any, Callable[..., Variable]] = {copy.deepcopy: _deepcopy_rule, copy.copy: _copy_rule}
