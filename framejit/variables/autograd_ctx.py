"""The `ctx` of a torch.autograd.Function while the trace reads its forward and backward (autograd_speculation.py):
it holds what they tell it (saved tensors, marks, attributes) and answers what they ask (needs_input_grad)."""

from __future__ import annotations

from typing import Any, Sequence

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BoundMethod, TupleVariable

# FunctionCtx's methods the trace knows; each records what it is told
_METHODS = (
    "save_for_backward",
    "save_for_forward",
    "mark_dirty",
    "mark_non_differentiable",
    "set_materialize_grads",
    "mark_shared_storage",
)


class AutogradCtxVariable(Variable):
    """The ctx the trace hands to forward (or setup_context) and then to backward. Attributes set on it stay on it,
    as on eager's ctx; an attribute of eager's ctx the trace does not know (`ctx.next_functions`) breaks."""

    def __init__(self, cls: type, needs_input_grad: tuple[bool, ...]) -> None:
        self.cls = cls
        self.needs_input_grad = needs_input_grad
        self.attrs: dict[str, Variable] = {}
        self.saved: list[Variable] = []
        self.dirty: list[Variable] = []
        self.non_differentiable: list[Variable] = []
        self.materialize_grads = True

    def python_type(self) -> type:
        return self.cls._backward_cls  # eager's ctx is an instance of the Function's backward class

    def truth(self, tx: Tracer) -> bool:
        return True

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name in self.attrs:
            return self.attrs[name]
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(flag) for flag in self.needs_input_grad])
        if name in ("saved_tensors", "saved_variables"):
            return TupleVariable(list(self.saved))
        if name in _METHODS:
            return BoundMethod(self, name)
        if hasattr(self.python_type(), name):
            unsupported(
                f"ctx.{name} of autograd.Function {self.cls.__qualname__} (the trace knows only the ctx's "
                f"methods, needs_input_grad, saved_tensors and attributes the Function sets)",
                BreakCode.AUTOGRAD_FUNCTION,
            )
        unsupported(f"{self.python_type().__name__!r} object has no attribute {name!r}", BreakCode.MISSING_ATTR)

    def set_attr(self, name: str, value: Variable) -> None:
        """ctx.name = value (`ctx.needs_input_grad = ...` too: a later read gives what was stored)."""
        if name in ("saved_tensors", "saved_variables") or (name in _METHODS):
            unsupported(f"setting ctx.{name} of an autograd.Function", BreakCode.AUTOGRAD_FUNCTION)
        if name != "needs_input_grad" and hasattr(type(getattr(self.python_type(), name, None)), "__set__"):
            unsupported(f"setting ctx.{name} (a field of eager's ctx)", BreakCode.AUTOGRAD_FUNCTION)
        self.attrs[name] = value

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.tensor import TensorVariable

        if kwargs or name not in _METHODS:
            unsupported(f"ctx.{name}(...) of an autograd.Function", BreakCode.AUTOGRAD_FUNCTION)
        if name == "set_materialize_grads":
            if len(args) != 1 or not args[0].is_python_constant():
                unsupported(
                    "ctx.set_materialize_grads with a value known only at run time", BreakCode.AUTOGRAD_FUNCTION
                )
            self.materialize_grads = bool(args[0].as_python_constant())
            return ConstantVariable(None)
        tensors = [a for a in args if isinstance(a, TensorVariable)]
        if len(tensors) != len(args) and (
            name != "save_for_backward" or any(not _is_none(a) for a in args if not isinstance(a, TensorVariable))
        ):
            unsupported(f"ctx.{name} of something other than tensors", BreakCode.AUTOGRAD_FUNCTION)
        if name == "save_for_backward":
            self.saved = list(args)  # a second call replaces the first, as in eager
        elif name == "mark_dirty":
            self.dirty = tensors
        elif name == "mark_non_differentiable":
            self.non_differentiable = tensors
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"AutogradCtxVariable({self.cls.__qualname__})"


def _is_none(var: Variable) -> Any:
    return var.is_python_constant() and var.as_python_constant() is None
