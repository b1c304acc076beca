"""torch.autograd.Function subclasses called in a trace: one graph node that calls the class's real `apply`."""

from __future__ import annotations

import types
from typing import Any, Sequence

import torch

from framejit.contracts import Tracer
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
            return AutogradApplyVariable(self.cls, AttrSource(self.source, name) if self.source else None)
        return tx.wrap(getattr(self.cls, name), AttrSource(self.source, name) if self.source else None)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            unsupported(
                f"instantiating the autograd.Function {self.cls.__qualname__} with arguments (call its .apply instead)",
                BreakCode.AUTOGRAD_FUNCTION,
            )
        return AutogradFunctionInstanceVariable(self.cls)  # `MyFn().apply(x)`: apply is the class's classmethod

    def __repr__(self) -> str:
        return f"AutogradFunctionClassVariable({self.cls.__qualname__})"


class AutogradFunctionInstanceVariable(Variable):
    """`MyFn()`, made in the trace only to reach `.apply` (a classmethod, so the instance adds nothing)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "apply":
            return AutogradApplyVariable(self.cls)
        unsupported(f"{self.cls.__qualname__}().{name} on an autograd.Function instance", BreakCode.AUTOGRAD_FUNCTION)

    def __repr__(self) -> str:
        return f"AutogradFunctionInstanceVariable({self.cls.__qualname__})"


class AutogradApplyVariable(Variable):
    """`MyFn.apply`: calling it adds one node whose target is the real `MyFn.apply`.

    Why a single node: autograd then sees the user's real Function at run time (its backward, ctx attributes,
    saved tensors, needs_input_grad and non-differentiable outputs all behave as in eager), and AOTAutograd
    traces the forward and the backward through it when it builds the joint graph. The result's metadata comes
    from running `apply` on fake tensors, under the trace's grad mode; a forward that cannot (it reads a
    tensor's value, calls numpy) is a graph break naming the Function.
    """

    def __init__(self, cls: type, source: Any = None) -> None:
        self.cls = cls
        self.source = source

    def python_type(self) -> type:
        return type(self.cls.apply)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = self.cls.__qualname__
        for arg in [*args, *kwargs.values()]:
            if not _graph_argument(arg):
                unsupported(
                    f"autograd.Function {name}.apply gets {arg}, which is neither a tensor nor a constant",
                    BreakCode.AUTOGRAD_FUNCTION,
                )
        try:
            return tx.output.call_graph_op(tx, "call_function", _apply_of(self.cls), list(args), kwargs)
        except Unsupported as e:
            unsupported(
                f"the forward of autograd.Function {name} cannot run on fake tensors: {e.msg}",
                BreakCode.AUTOGRAD_FUNCTION,
            )

    def __repr__(self) -> str:
        return f"AutogradApplyVariable({self.cls.__qualname__})"


def _apply_of(cls: type) -> Any:
    """A plain function calling `cls.apply`, named after the class: FX names a target from torch by its module
    path, which a classmethod bound to a user class does not have."""

    def apply(*args: Any, **kwargs: Any) -> Any:
        return cls.apply(*args, **kwargs)

    apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
    return apply


def _graph_argument(var: Variable) -> bool:
    """A tensor, a constant, or a tuple/list of them: what a graph node can take as an argument."""
    from framejit.variables.containers import ListVariable, TupleVariable
    from framejit.variables.tensor import TensorVariable

    if isinstance(var, TensorVariable) or var.is_python_constant():
        return True
    return type(var) in (TupleVariable, ListVariable) and all(_graph_argument(v) for v in var.items)
