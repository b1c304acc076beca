"""torch.autograd.Function subclasses called in a trace: one graph node that calls the class's real `apply`, after
the trace read its forward and backward (autograd_speculation.py)."""

from __future__ import annotations

import types
from typing import Any, Sequence

import torch

from framejit import policy
from framejit.contracts import (
    AUTOGRAD_FUNCTION_APPLY_META,
    AUTOGRAD_FUNCTION_INPUTS_META,
    AUTOGRAD_FUNCTION_LIVE_WRITES_META,
    AUTOGRAD_FUNCTION_REFUSAL_META,
    OPAQUE_EFFECTS_META,
    Tracer,
)
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.sources import AttrSource
from framejit.variables.base import KnownValueVariable, Variable
from framejit.variables.containers import TupleVariable
from framejit.variables.tensor import TensorVariable


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
        from framejit.variables.autograd_args import describe
        from framejit.variables.autograd_speculation import Reading, speculate, tensor_args
        from framejit.variables.autograd_writes import named

        name = self.cls.__qualname__
        arguments = describe(tx, name, args, kwargs)
        training = torch.is_grad_enabled() and any(
            t.example.requires_grad for t in tensor_args([*args, *kwargs.values()])
        )
        reading = Reading(None, False, [], None)
        if not policy.is_allowed_in_graph(self.cls):
            cls_var = AutogradFunctionClassVariable(self.cls, self.cls_source)
            reading = speculate(tx, cls_var, args, kwargs, training, arguments)
        outputs = _output_count(name, reading)
        target = _apply_of(self.cls, arguments, [path for _, path in reading.made], outputs)
        arguments.describe_live_state(tx, name)
        try:
            result = tx.output.call_graph_op(tx, "call_function", target, arguments.leaves, {})
        except Unsupported as e:
            unsupported(
                f"the forward of autograd.Function {name} cannot run on fake tensors: {e.msg}",
                BreakCode.AUTOGRAD_FUNCTION,
            )
        for node in tx.output.graph.nodes:  # type: ignore[attr-defined]
            if node.target is target:
                node.meta[AUTOGRAD_FUNCTION_APPLY_META] = name
                node.meta[AUTOGRAD_FUNCTION_INPUTS_META] = arguments.direct_leaves()
                if reading.refusal is not None:
                    node.meta[AUTOGRAD_FUNCTION_REFUSAL_META] = reading.refusal
                if reading.opaque_effects or arguments.live:
                    node.meta[OPAQUE_EFFECTS_META] = True
                if arguments.live:  # AOTAutograd would run the forward's writes once, when it compiles
                    live = ", ".join(named(state.var) for state in arguments.live)
                    node.meta[AUTOGRAD_FUNCTION_LIVE_WRITES_META] = node.meta[AUTOGRAD_FUNCTION_REFUSAL_META] = (
                        f"the forward of autograd.Function {name} writes into {live} at every call"
                    )
        if not reading.made:
            return result
        # the tensors the forward wrote into its arguments are the node's last outputs: the Variables the kept
        # writes hold stand for them from here on
        items = result.items  # type: ignore[attr-defined]
        for (var, _), item in zip(reading.made, items[len(items) - len(reading.made) :]):
            var.node, var.example = item.node, item.example  # type: ignore[attr-defined]
        if outputs is None:
            return items[0]
        return TupleVariable(items[:outputs])

    def __repr__(self) -> str:
        return f"AutogradApplyVariable({self.cls.__qualname__})"


def _apply_of(cls: type, arguments: Any, made: list[tuple], outputs: int | None) -> Any:
    """A plain function calling `cls.apply`, named after the class (FX names a target from torch by its module
    path, which a classmethod bound to a user class does not have). It takes the tensors of the call's arguments
    and rebuilds the arguments around them (autograd_args.py). With `made` (paths to what the forward wrote into
    its arguments), it returns the outputs, then what those paths hold after the call."""
    from framejit.variables.autograd_args import read_path

    def apply(*leaves: Any) -> Any:
        args, kwargs = arguments.rebuild(leaves)
        restore = arguments.enter_live_state(leaves) if arguments.live else None
        try:
            result = cls.apply(*args, **kwargs)
            if not made:
                return result
            outs = (result,) if outputs is None else tuple(result)
            return (*outs, *(read_path(args, kwargs, arguments.live, path) for path in made))
        finally:
            if restore is not None:
                restore()

    apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
    return apply


def _output_count(name: str, reading: Any) -> int | None:
    """How many outputs a forward that wrote into its arguments returns as a tuple (None: one tensor)."""
    if not reading.made or isinstance(reading.out, TensorVariable):
        return None
    if type(reading.out) is TupleVariable:
        return len(reading.out.items)
    unsupported(
        f"autograd.Function {name} writes into its arguments and returns {reading.out}: only a tensor or a tuple "
        "can come out beside what it wrote",
        BreakCode.AUTOGRAD_FUNCTION,
    )
