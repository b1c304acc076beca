"""Calls to torch callables: most become graph ops; a few are trace-time state (grad mode) or constants."""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch

from framejit.variables.base import Variable, unsupported
from framejit.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from framejit.trace.translator import Translator

# Python-level torch modules whose functions are single graph ops (not traced into).
OP_MODULES = frozenset({"torch", "torch.functional", "torch.nn.functional", "torch._tensor", "torch.nn.init",
                        "torch.special", "torch.linalg", "torch.fft", "torch._C._nn", "torch._C._linalg",
                        "torch._C._special", "torch._C._fft", "torch._C._VariableFunctions", "torch.random"})
# Functions that change or read global state: running them at trace time would be wrong.
_STATEFUL = frozenset({"manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "save", "load",
                       "set_default_dtype", "set_default_device", "set_default_tensor_type", "set_printoptions",
                       "use_deterministic_algorithms", "set_num_threads", "set_num_interop_threads",
                       "set_anomaly_enabled", "set_autocast_enabled", "compile"})
_CONSTANT_QUERIES = frozenset({"is_grad_enabled", "is_inference_mode_enabled", "get_default_dtype",
                               "is_autocast_enabled", "are_deterministic_algorithms_enabled"})


def is_torch_op(value: Any) -> bool:
    """Whether calling `value` should put one op in the graph."""
    from framejit import registry
    if registry.is_allowed_in_graph(value):
        return True
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                          types.MethodWrapperType)):
        owner = getattr(value, "__objclass__", None)
        if owner is not None:
            return issubclass(owner, torch._C.TensorBase)
        module = getattr(value, "__module__", None) or ""
        return module.startswith("torch")
    if isinstance(value, types.FunctionType):
        return value.__module__ in OP_MODULES
    return isinstance(value, torch._ops.OpOverloadPacket) or isinstance(value, torch._ops.OpOverload)


def call_torch_function(tx: "Translator", fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    name = getattr(fn, "__name__", "")
    if name in _STATEFUL:
        unsupported(f"torch.{name}() changes global state", "torch_stateful")
    if name in _CONSTANT_QUERIES and not args:
        return ConstantVariable(fn())
    return tx.output.call_graph_op(tx, "call_function", fn, args, kwargs)


class GradModeVariable(Variable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b): grad mode during the trace and in the graph."""

    def __init__(self, ctor: Any, mode: bool, previous: bool) -> None:
        self.ctor = ctor  # torch.no_grad, torch.enable_grad or torch.set_grad_enabled
        self.mode = mode
        self.applies_on_create = ctor is torch.set_grad_enabled  # acts when called, not on __enter__
        self.previous = previous

    @classmethod
    def create(cls, tx: "Translator", ctor: Any, args: list[Variable]) -> "GradModeVariable":
        previous = torch.is_grad_enabled()
        if ctor is torch.set_grad_enabled:
            var = cls(ctor, bool(args[0].as_python_constant()), previous)
            tx.output.set_grad_mode(var.mode)
            return var
        return cls(ctor, ctor is torch.enable_grad, previous)

    @classmethod
    def from_entered(cls, ctx: Any) -> "GradModeVariable":
        """The Variable for a real, already entered grad-mode context object (a continuation's stack)."""
        ctor = type(ctx)
        mode = ctx.mode if ctor is torch.set_grad_enabled else ctor is torch.enable_grad
        return cls(ctor, mode, ctx.prev)

    def python_type(self) -> type:
        return torch.set_grad_enabled if self.applies_on_create else torch.no_grad

    def enter(self, tx: "Translator") -> Variable:
        if not self.applies_on_create:
            self.previous = torch.is_grad_enabled()
            tx.output.set_grad_mode(self.mode)
        return ConstantVariable(None)

    def exit(self, tx: "Translator") -> None:
        tx.output.set_grad_mode(self.previous)

    def reconstruct_entered(self, cg: Any) -> None:
        """Leave the __exit__ of a fresh, entered context of this kind on the stack (grad mode is then set)."""
        cg.emit("PUSH_NULL")
        cg.emit_const(self.ctor)
        if self.applies_on_create:
            cg.emit_const(self.mode)
        cg.call(1 if self.applies_on_create else 0)
        cg.emit("BEFORE_WITH")
        cg.emit("POP_TOP")


class WithExitVariable(Variable):
    """The __exit__ that BEFORE_WITH leaves on the stack; the normal exit path calls it with 3 Nones."""

    def __init__(self, ctx: GradModeVariable, source: Any = None) -> None:
        self.ctx = ctx
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: "Translator", args: Any, kwargs: dict[str, Variable]) -> Variable:
        self.ctx.exit(tx)
        return ConstantVariable(None)


GRAD_MODE_CTORS = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)
