"""How a dict or set made by the trace holds a key: what Python's hashing would find it by.

A constant is held as itself. A value hashed by identity (a tensor, a module, an object whose class keeps object's
__hash__ and __eq__) is held as an IdentityKey of a token that is one and the same exactly when the objects are:
- an object from outside the trace: the object itself, its identity guarded (ID_MATCH), as which keys are one and
  the same decides what the container holds;
- a tensor the graph computes: its example tensor (an in-place op's result has its input's example, as eager's
  is the same object);
- an object made in the trace: its Variable (the trace keeps one Variable per object).
"""

from __future__ import annotations

import types
from typing import Any, Iterable

import torch

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.variables.base import Variable, lookup_class_attr
from framejit.sources import ItemSource
from framejit.variables.constant import IdentityKey, is_constant_key


def identity_hashed(key: Any) -> bool:
    """Whether Python finds `key` by identity alone: a tensor, or an object of a class without __hash__/__eq__."""
    cls = type(key)
    if isinstance(key, torch.Tensor):
        return cls.__hash__ is torch.Tensor.__hash__
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


def _class_hashes_by_identity(cls: type) -> bool:
    return lookup_class_attr(cls, "__hash__")[1] is object.__hash__ and lookup_class_attr(cls, "__eq__")[1] in (
        object.__eq__,
        object.__ne__,
    )


def outside_object(tx: Tracer, var: Variable) -> Any:
    """The real object of a graph input tensor, or of an object compared by identity, read from a source; else None."""
    if getattr(var, "source", None) is None:
        return None
    node = getattr(var, "node", None)
    if node is not None and node.op == "placeholder":
        return next((i.value for i in tx.output.inputs if i.node is node), None)
    value = getattr(var, "module", getattr(var, "value", None))  # NNModuleVariable's module, an object's value
    if value is not None and type(value).__hash__ is object.__hash__ and type(value).__eq__ is object.__eq__:
        return value
    return None


def hash_key(tx: Tracer, key: Variable, what: str = "a dict key") -> Any:
    """What a dict or set the trace holds keeps for `key` (the module's rule); a graph break for a key whose
    hash or equality is Python code or data (a tuple of tensors, an object with its own __eq__)."""
    from framejit.variables.containers import TupleVariable
    from framejit.variables.sets import SetVariable
    from framejit.variables.tensor import TensorVariable
    from framejit.variables.user_object import NewObjectVariable

    if key.is_python_constant():
        value = key.as_python_constant()
        try:
            hash(value)
        except TypeError as e:  # an unhashable constant (a list): Python raises here
            raise_observed(e, BreakCode.DICT_KEY)
        return value
    obj = outside_object(tx, key)
    if obj is not None:
        tx.output.guards.add(key.source, GuardKind.ID_MATCH, obj)
    if isinstance(key, TensorVariable) and lookup_class_attr(key.python_type(), "__hash__")[1] is torch.Tensor.__hash__:
        return IdentityKey(key.example, key)  # one example per tensor object, input or computed
    if obj is not None:
        return IdentityKey(obj, key)
    if isinstance(key, NewObjectVariable) and _class_hashes_by_identity(key.cls):
        return IdentityKey(key, key)
    if isinstance(key, TupleVariable) and key.py_type is tuple:
        return tuple(hash_key(tx, item, what) for item in key.items)  # a tuple hashes and compares by its items
    if isinstance(key, SetVariable) and key.py_type is frozenset:
        return frozenset(key.keys)  # a frozenset, by its items
    why = "its class hashes or compares in Python code" if _python_hash(key) else "its hash is not known now"
    unsupported(
        f"{key} as {what}: {why} (constants, and tensors and objects compared by identity, can be)", BreakCode.DICT_KEY
    )


def _python_hash(key: Variable) -> bool:
    cls = key.python_type()
    return any(isinstance(lookup_class_attr(cls, n)[1], types.FunctionType) for n in ("__hash__", "__eq__"))


def key_variable(key: Any) -> Variable:
    """The Variable of a key hash_key gave: the IdentityKey's Variable, a tuple or frozenset of key Variables, or a
    constant."""
    from framejit.variables.constant import key_variable as constant_key_variable
    from framejit.variables.containers import TupleVariable

    if is_constant(key):
        return constant_key_variable(key)
    if type(key) is tuple:
        return TupleVariable([key_variable(k) for k in key])
    if type(key) is frozenset:
        from framejit.variables.sets import SetVariable

        return SetVariable(key, py_type=frozenset)
    return constant_key_variable(key)


def is_constant(key: Any) -> bool:
    """Whether a key hash_key gave is a Python constant (no IdentityKey in it, nor in a tuple or frozenset)."""
    if isinstance(key, IdentityKey):
        return False
    return type(key) not in (tuple, frozenset) or all(is_constant(k) for k in key)


def read_keys_by_position(
    tx: Tracer, container: Any, keys: Iterable[Any], source: Any, keys_source: Any, what: str
) -> list[Any]:
    """The keys of a real dict or set from `source` whose keys are compared by identity (an optimizer's state keyed
    by parameter, a set of modules): each read by position from `keys_source` (the list of them, a DictListSource),
    as no guard can name such a key; the container's type and length guarded, and each key in order, by identity
    or by value."""
    keys = list(keys)
    if not all(is_constant_key(k) or identity_hashed(k) for k in keys):
        unsupported(f"a {what} with keys that are neither constants nor compared by identity", BreakCode.DICT_KEY)
    if source is None:
        unsupported(f"a {what} with non-constant keys, from nowhere the guards can read", BreakCode.DICT_KEY)
    tx.output.guards.add(source, GuardKind.TYPE_MATCH, container)  # first: the list is read by the base type's
    tx.output.guards.add(keys_source, GuardKind.LEN_MATCH, keys)  # methods, never a Python override
    held: list[Any] = []
    for i, k in enumerate(keys):
        if is_constant_key(k):
            tx.output.guards.add(ItemSource(keys_source, i), GuardKind.EQUALS, k)
            held.append(k)
        else:
            held.append(hash_key(tx, tx.wrap(k, ItemSource(keys_source, i)), what))  # its identity guarded
    return held
