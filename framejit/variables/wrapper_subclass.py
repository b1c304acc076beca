"""Tensor subclasses that dispatch their ops in Python (traceable wrapper subclasses: DTensor, TwoTensor): which
ones the trace reads as graph inputs, the guards of such an input, their attributes in the trace, and DTensor's
own methods (`to_local`, `redistribute`, `full_tensor`, `DTensor.from_local`) as graph ops whose mesh and
placements are trace-time constants baked into the op.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Sequence

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass, is_traceable_wrapper_subclass_type

from framejit.contracts import GuardKind, GuardRecorder, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import AttrSource, Source
from framejit.variables.base import KnownValueVariable, Variable, lookup_class_attr

_DTENSOR_MODULE = "torch.distributed.tensor._api"


def subclass_name(cls: type) -> str:
    """`torch.distributed.tensor.DTensor` for DTensor (its public module), else module.qualname."""
    if cls is _dtensor_type():
        return "torch.distributed.tensor.DTensor"
    return f"{cls.__module__}.{cls.__qualname__}"


def _dtensor_type() -> type | None:
    api = sys.modules.get(_DTENSOR_MODULE)  # not imported: nothing can be a DTensor
    return None if api is None else api.DTensor


def is_wrapper_subclass_type(cls: type) -> bool:
    return cls is not torch.Tensor and is_traceable_wrapper_subclass_type(cls)


def input_refusal(value: torch.Tensor) -> str | None:
    """Why a wrapper subclass tensor cannot be a graph input (None: it can). Its ops must dispatch below autograd
    only (`__torch_dispatch__`, its `__torch_function__` disabled), and what `__tensor_flatten__` gives must be
    plain tensors (or, as DTensor's mesh, objects compared by value): AOTAutograd rebuilds the subclass from them."""
    cls = type(value)
    if getattr(cls.__torch_function__, "__func__", cls.__torch_function__) is not _disabled_torch_function():
        return "it has a __torch_function__ of its own"
    attrs, _ = value.__tensor_flatten__()
    for attr in attrs:
        inner = getattr(value, attr)
        if isinstance(inner, torch.Tensor) and is_traceable_wrapper_subclass(inner):
            return f"its {attr} is a wrapper subclass too"
        if not isinstance(inner, torch.Tensor) and not _is_mesh(inner):
            return f"its {attr} is a {type(inner).__name__}"
    return None


def _disabled_torch_function() -> Any:
    return torch._C._disabled_torch_function_impl


def _is_mesh(value: Any) -> bool:
    mesh_module = sys.modules.get("torch.distributed.device_mesh")
    return mesh_module is not None and isinstance(value, mesh_module.DeviceMesh)


def guard_input(guards: GuardRecorder, source: Source, value: torch.Tensor) -> None:
    """The guards of a wrapper subclass input besides its own TENSOR_MATCH (type, global shape and stride...):
    its `__tensor_flatten__` metadata (DTensor's placements and shard order) by value, and each inner attribute:
    a tensor by TENSOR_MATCH, DTensor's mesh by value."""
    guards.add(source, GuardKind.SUBCLASS_METADATA, value)
    attrs, _ = value.__tensor_flatten__()
    for attr in attrs:
        inner = getattr(value, attr)
        if isinstance(inner, torch.Tensor):
            guards.add(AttrSource(source, attr), GuardKind.TENSOR_MATCH, inner)
        else:
            guards.add(AttrSource(source, attr), GuardKind.EQUALS, inner)


def getattr_of(tx: Tracer, var: Any, name: str) -> Variable | None:
    """`var.name` for a TensorVariable of a wrapper subclass, where the subclass decides: an inner tensor of its
    `__tensor_flatten__` (a graph op), DTensor's placements and mesh (constants: guarded with the input, or fixed
    where the graph made it), DTensor's methods made graph ops. None: a name torch.Tensor has (its ops dispatch
    through the subclass). Other names of the subclass are a graph break naming it."""
    from framejit.variables.containers import BoundMethod

    fake = var.example
    cls = var.python_type()  # (a subclass of a subclass may have the fake of its base: TwoTensor's unflatten)
    attrs, _ = fake.__tensor_flatten__()
    if name in attrs and isinstance(getattr(fake, name), torch.Tensor):
        return tx.output.call_graph_op(tx, "call_function", getattr, [var, tx.wrap_constant(name)], {})
    if cls is _dtensor_type():
        if name in ("placements", "device_mesh"):
            return tx.wrap_constant(getattr(fake, name))
        if name in _DTENSOR_METHODS:
            return BoundMethod(var, name)
    owner, raw = lookup_class_attr(cls, name)
    if (
        owner is not None
        and not owner.__module__.startswith("torch")
        and isinstance(raw, (types.FunctionType, property))
    ):
        return _user_method(tx, var, raw)  # a user's subclass: its Python code is traced as any
    if hasattr(torch.Tensor, name):
        return None
    unsupported(
        f"{subclass_name(cls)}.{name}: an attribute of a tensor subclass that framejit does not trace; the code "
        "that uses it runs as Python",
        BreakCode.TENSOR_SUBCLASS,
    )


def _user_method(tx: Tracer, var: Any, raw: types.FunctionType | property) -> Variable:
    """A method (bound to `var`) or a property's value (its getter called on `var`) of a user's subclass."""
    from framejit.variables.callables import UserMethodVariable

    if isinstance(raw, property):
        if not isinstance(raw.fget, types.FunctionType):
            unsupported(f"a property of {type(var.example).__name__} with no Python getter", BreakCode.TENSOR_SUBCLASS)
        return tx.wrap(raw.fget, None).call(tx, [var], {})
    return UserMethodVariable(tx.wrap(raw, None), var)


# DTensor's methods that take a mesh and placements (or none): graph ops with those baked in
_DTENSOR_METHODS = frozenset({"to_local", "redistribute", "full_tensor"})


def call_method_of(
    tx: Tracer, var: Any, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]
) -> Variable | None:
    """A DTensor method of _DTENSOR_METHODS called on `var`: one graph op, a function of the DTensor alone that
    holds the other arguments (meshes, placements: objects an FX graph cannot write as literals). None for other
    methods."""
    if name not in _DTENSOR_METHODS or var.python_type() is not _dtensor_type():
        return None
    consts = [_constant_argument(tx, a, f"DTensor.{name}") for a in args]
    kw = {k: _constant_argument(tx, v, f"DTensor.{name}") for k, v in kwargs.items()}
    op = baked_method(name, consts, kw)
    return tx.output.call_graph_op(tx, "call_function", op, [var], {})


def call_from_local(tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`DTensor.from_local(t, mesh, placements, ...)`: one graph op of the local tensor, the rest baked in."""
    if not args:
        unsupported("DTensor.from_local called without its local tensor", BreakCode.BAD_CALL)
    consts = [_constant_argument(tx, a, "DTensor.from_local") for a in args[1:]]
    kw = {k: _constant_argument(tx, v, "DTensor.from_local") for k, v in kwargs.items()}
    dtensor = _dtensor_type()
    assert dtensor is not None  # its from_local was called
    op = _baked(dtensor.from_local, "dtensor_from_local", consts, kw)
    return tx.output.call_graph_op(tx, "call_function", op, [args[0]], {})


class FromLocalVariable(KnownValueVariable):
    """`DTensor.from_local`: a call is one graph op (call_from_local)."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        return call_from_local(tx, args, kwargs)


class FoldedCallVariable(KnownValueVariable):
    """A placement class (Shard, Replicate, Partial), or a method of a mesh or a placement: called with constants,
    called now, its result a constant (meshes and placements are immutable, and guarded where read)."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = getattr(self.value, "__qualname__", repr(self.value))
        if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            unsupported(f"{name}() of a value known only at run time", BreakCode.TENSOR_SUBCLASS)
        consts = [a.as_python_constant() for a in args]
        return tx.wrap_constant(self.value(*consts, **{k: v.as_python_constant() for k, v in kwargs.items()}))


class DistributedConstantVariable(KnownValueVariable):
    """A DeviceMesh or a DTensor placement: a constant of the trace (guarded by identity where it is read from
    outside, fixed where a DTensor's metadata gave it); its attributes and what its methods return are constants
    computed now (`mesh.size()`, `placement.is_shard()`)."""

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        attr = getattr(self.value, name)
        if callable(attr) and not isinstance(attr, type):
            return FoldedCallVariable(attr)
        return tx.wrap_constant(attr)


def is_placement_class(value: Any) -> bool:
    placements = sys.modules.get("torch.distributed.tensor.placement_types")
    return placements is not None and isinstance(value, type) and issubclass(value, placements.Placement)


def is_mesh_or_placement(value: Any) -> bool:
    placements = sys.modules.get("torch.distributed.tensor.placement_types")
    return _is_mesh(value) or (placements is not None and isinstance(value, placements.Placement))


def is_from_local(value: Any) -> bool:
    dtensor = _dtensor_type()
    return dtensor is not None and value is dtensor.from_local


def baked_method(name: str, args: list[Any], kwargs: dict[str, Any]) -> Callable[[torch.Tensor], Any]:
    """`lambda d: d.<name>(*args, **kwargs)`, named `dtensor_<name>` in graph code."""
    return _baked(lambda d, *a, **k: getattr(d, name)(*a, **k), f"dtensor_{name}", args, kwargs)


def _baked(fn: Callable[..., Any], name: str, args: list[Any], kwargs: dict[str, Any]) -> Callable[[Any], Any]:
    def op(first: Any) -> Any:
        return fn(first, *args, **kwargs)

    op.__name__ = op.__qualname__ = name
    return op


def _constant_argument(tx: Tracer, var: Variable, call: str) -> Any:
    """An argument of a DTensor call other than the tensor, as the object the op holds: a constant (placements,
    a DeviceMesh, flags)."""
    from framejit.variables.containers import ListVariable, TupleVariable

    if isinstance(var, (ListVariable, TupleVariable)):
        return var.python_type()(_constant_argument(tx, v, call) for v in var.items)
    if var.is_python_constant():
        return var.as_python_constant()
    unsupported(f"{call} with an argument known only at run time ({var})", BreakCode.TENSOR_SUBCLASS)
