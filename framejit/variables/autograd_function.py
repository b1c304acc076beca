"""torch.autograd.Function subclasses called in a trace: one graph node that calls the class's real `apply`, after
the trace read its forward and backward (autograd_speculation.py)."""

from __future__ import annotations

import enum
import types
from typing import Any, Sequence

import torch

from framejit import policy
from framejit.contracts import (
    AUTOGRAD_FUNCTION_APPLY_META,
    AUTOGRAD_FUNCTION_REFUSAL_META,
    OPAQUE_EFFECTS_META,
    Tracer,
)
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.sources import AttrSource
from framejit.variables.base import KnownValueVariable, Variable


def is_autograd_function_class(value: Any) -> bool:
    return (
        isinstance(value, type) and issubclass(value, torch.autograd.Function) and value is not torch.autograd.Function
    )


def is_bound_apply(value: Any) -> bool:
    """`MyFn.apply` read as a value (a classmethod bound to a Function subclass). Asked of every value wrapped, so
    it reads only a bound method's own fields: getattr() on any object could run its class's __getattr__."""
    return (
        isinstance(value, types.MethodType)
        and value.__func__ is torch.autograd.Function.apply.__func__
        and is_autograd_function_class(value.__self__)
    )


class AutogradFunctionClassVariable(KnownValueVariable):
    """A torch.autograd.Function subclass (guarded by identity: another class, or a redefined one, recompiles)."""

    @property
    def cls(self) -> type:
        return self.value

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "apply":
            return AutogradApplyVariable(self.cls, AttrSource(self.source, name) if self.source else None, self.source)
        return tx.wrap(getattr(self.cls, name), AttrSource(self.source, name) if self.source else None)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            unsupported(
                f"instantiating the autograd.Function {self.cls.__qualname__} with arguments (call its .apply instead)",
                BreakCode.AUTOGRAD_FUNCTION,
            )
        # `MyFn().apply(x)`: apply is the class's classmethod
        return AutogradFunctionInstanceVariable(self.cls, self.source)

    def __repr__(self) -> str:
        return f"AutogradFunctionClassVariable({self.cls.__qualname__})"


class AutogradFunctionInstanceVariable(Variable):
    """`MyFn()`, made in the trace only to reach `.apply` (a classmethod, so the instance adds nothing)."""

    def __init__(self, cls: type, cls_source: Any = None) -> None:
        self.cls = cls
        self.cls_source = cls_source

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "apply":
            return AutogradApplyVariable(self.cls, None, self.cls_source)
        unsupported(f"{self.cls.__qualname__}().{name} on an autograd.Function instance", BreakCode.AUTOGRAD_FUNCTION)

    def __repr__(self) -> str:
        return f"AutogradFunctionInstanceVariable({self.cls.__qualname__})"


class AutogradApplyVariable(Variable):
    """`MyFn.apply`: calling it adds one node whose target is the real `MyFn.apply`.

    Why a single node: autograd then sees the user's real Function at run time (its backward, ctx attributes,
    saved tensors, needs_input_grad and non-differentiable outputs all behave as in eager). Before adding it, the
    trace reads the forward and backward (autograd_speculation.py): a forward it cannot read, or one with Python
    side effects, is a graph break naming the Function; a backward AOTAutograd would trace wrongly makes a
    training graph run as its torch ops. The result's metadata comes from running `apply` on fake tensors, under
    the trace's grad mode. A Function the user put in `allow_in_graph` is not read.
    """

    def __init__(self, cls: type, source: Any = None, cls_source: Any = None) -> None:
        self.cls = cls
        self.source = source
        self.cls_source = cls_source

    def python_type(self) -> type:
        return type(self.cls.apply)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.autograd_speculation import Reading, speculate, tensor_args

        name = self.cls.__qualname__
        baked: dict[int | str, Any] = {}
        for key, arg in [*enumerate(args), *kwargs.items()]:
            if _bakeable(arg):
                baked[key] = arg.as_python_constant()
            elif not _graph_argument(arg):
                unsupported(
                    f"autograd.Function {name}.apply gets {arg}, which a graph op cannot take (tensors, numbers, "
                    "strings, lists and tuples of them, and enum members)",
                    BreakCode.AUTOGRAD_FUNCTION,
                )
        training = torch.is_grad_enabled() and any(
            t.example.requires_grad for t in tensor_args([*args, *kwargs.values()])
        )
        reading = Reading(None, False)
        if not policy.is_allowed_in_graph(self.cls):
            reading = speculate(tx, AutogradFunctionClassVariable(self.cls, self.cls_source), args, kwargs, training)
        target = _apply_of(self.cls, baked)
        node_args = [a for i, a in enumerate(args) if i not in baked]
        node_kwargs = {k: v for k, v in kwargs.items() if k not in baked}
        try:
            result = tx.output.call_graph_op(tx, "call_function", target, node_args, node_kwargs)
        except Unsupported as e:
            unsupported(
                f"the forward of autograd.Function {name} cannot run on fake tensors: {e.msg}",
                BreakCode.AUTOGRAD_FUNCTION,
            )
        for node in tx.output.graph.nodes:  # type: ignore[attr-defined]
            if node.target is target:
                node.meta[AUTOGRAD_FUNCTION_APPLY_META] = name
                if reading.refusal is not None:
                    node.meta[AUTOGRAD_FUNCTION_REFUSAL_META] = reading.refusal
                if reading.opaque_effects:
                    node.meta[OPAQUE_EFFECTS_META] = True
        return result

    def __repr__(self) -> str:
        return f"AutogradApplyVariable({self.cls.__qualname__})"


def _apply_of(cls: type, baked: dict[int | str, Any]) -> Any:
    """A plain function calling `cls.apply`, named after the class: FX names a target from torch by its module
    path, which a classmethod bound to a user class does not have. The `baked` arguments (by position or keyword:
    enum members, which FX cannot write in its code) are put back where the call had them."""

    def apply(*args: Any, **kwargs: Any) -> Any:
        if baked:
            rest = iter(args)
            count = len(args) + sum(1 for k in baked if isinstance(k, int))
            args = tuple(baked[i] if i in baked else next(rest) for i in range(count))
            kwargs = {**kwargs, **{k: v for k, v in baked.items() if isinstance(k, str)}}
        return cls.apply(*args, **kwargs)

    apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
    return apply


def _bakeable(var: Variable) -> bool:
    """An enum member (guarded by identity): immutable, so the node may hold it."""
    return var.is_python_constant() and isinstance(var.as_python_constant(), enum.Enum)


def _graph_argument(var: Variable) -> bool:
    """A tensor, a constant FX can write, or a tuple/list of them: what a graph node can take as an argument."""
    from framejit.variables.containers import ListVariable, TupleVariable
    from framejit.variables.symbolic import SymbolicVariable
    from framejit.variables.tensor import TensorVariable

    if type(var) in (TupleVariable, ListVariable):
        return all(_graph_argument(v) for v in var.items)  # type: ignore[attr-defined]
    if isinstance(var, (TensorVariable, SymbolicVariable)):
        return True
    if not var.is_python_constant():
        return False
    try:
        var.as_node_arg()
    except Unsupported:
        return False
    return True
