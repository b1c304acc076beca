"""torch.autocast (torch.amp.autocast and its device subclasses) entered in a trace: real autocast state while
ops run on fake tensors, and the same state changes as nodes of the graph."""

from __future__ import annotations

import types
from typing import Any, Sequence

import torch
from torch.amp.autocast_mode import _enter_autocast, _exit_autocast, autocast_decorator

from framejit.contracts import Emitter, GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.op_effects import leave_entered_autocast
from framejit.sources import AttrSource, ItemSource
from framejit.variables.base import KnownValueVariable, Variable


def is_autocast_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, torch.amp.autocast)


# the code of the function `@torch.autocast(...)` makes of the function it decorates
_DECORATED_CODE = next(c for c in autocast_decorator.__code__.co_consts if isinstance(c, types.CodeType))


def is_autocast_decorated(value: Any) -> bool:
    return isinstance(value, types.FunctionType) and value.__code__ is _DECORATED_CODE


class AutocastCtorVariable(KnownValueVariable):
    """torch.autocast / torch.amp.autocast / torch.cpu.amp.autocast as a callable."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            unsupported(f"{self.value.__qualname__}() with arguments known only at run time", BreakCode.AUTOCAST)
        try:  # the real constructor resolves defaults and validates (warning, or disabling itself, as in eager)
            real = self.value(
                *[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()}
            )
        except Exception as e:
            unsupported(f"{self.value.__qualname__}() raised {type(e).__name__}: {e}", BreakCode.OP_ERROR)
        return AutocastVariable(real.device, real.fast_dtype, real._enabled, real._cache_enabled)


class AutocastVariable(Variable):
    """An autocast context. Entering it sets the real autocast state for the rest of the trace (fake ops then
    cast as eager would) and adds `_enter_autocast`; leaving it restores the state and adds `_exit_autocast`.
    Those two are the nodes torch's own tracers emit: the eager backend runs them, AOTAutograd (aot_eager,
    inductor) runs them while it traces, so the casts they cause become explicit ops of its graph."""

    def __init__(
        self,
        device: str,
        dtype: torch.dtype,
        enabled: bool,
        cache_enabled: bool,
        previous: tuple[bool, torch.dtype, bool] | None = None,
    ) -> None:
        self.device, self.dtype, self.enabled, self.cache_enabled = device, dtype, enabled, cache_enabled
        self.previous = previous  # (enabled, dtype, cache_enabled) a block entered outside the trace restores
        self.enter_node: Any = None
        self.saved: tuple[bool, torch.dtype, bool] | None = None  # the trace's state before entering
        self.exit_source: Any = None  # where the real __exit__ of a block entered outside the trace is

    @classmethod
    def from_entered(cls, tx: Tracer, ctx: Any, exit_source: Any) -> "AutocastVariable":
        """A real, already entered autocast (a continuation's stack): what it restores on exit is guarded."""
        source = AttrSource(exit_source, "__self__")
        tx.output.guards.add(source, GuardKind.TYPE_MATCH, ctx)
        names = ("device", "fast_dtype", "_enabled", "_cache_enabled", "prev", "prev_fastdtype", "prev_cache_enabled")
        values = [getattr(ctx, name) for name in names]
        for name, value in zip(names, values):
            tx.output.guards.add(AttrSource(source, name), GuardKind.EQUALS, value)
        var = cls(*values[:4], previous=tuple(values[4:]))
        var.exit_source = exit_source
        return var

    def python_type(self) -> type:
        return torch.amp.autocast

    def enter(self, tx: Tracer) -> Variable:
        self.enter_node = tx.output.create_node(
            tx, "call_function", _enter_autocast, (self.device, self.dtype, self.enabled, self.cache_enabled), {}
        )
        self.enter_node.meta["example_value"] = None
        self.saved = (
            torch.is_autocast_enabled(self.device),
            torch.get_autocast_dtype(self.device),
            torch.is_autocast_cache_enabled(),
        )
        tx.output.set_autocast_state(self.device, self.enabled, self.dtype, self.cache_enabled)
        return self

    def exit(self, tx: Tracer) -> None:
        if self.enter_node is not None:
            node = tx.output.create_node(tx, "call_function", _exit_autocast, (self.enter_node,), {})
            previous = self.saved
            self.enter_node = None
        else:
            node = tx.output.create_node(tx, "call_function", leave_entered_autocast, (self.device, *self.previous), {})
            previous = self.previous
            tx.output.leave_after_graph(self.exit_source, (self.device, self.dtype, self.enabled, self.cache_enabled))
        node.meta["example_value"] = None
        tx.output.set_autocast_state(self.device, *previous)

    def exit_before_break(self, tx: Tracer) -> None:
        """At a graph break inside the block the graph leaves it; the break code enters it again for real."""
        self.exit(tx)

    def reconstruct_entered(self, cg: Emitter) -> None:
        """Leave the __exit__ of a fresh, entered autocast of this kind on the stack."""
        self.rebuild(cg)
        cg.emit("BEFORE_WITH")
        cg.emit("POP_TOP")

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(torch.amp.autocast)  # the base class: the device subclasses' constructors are deprecated
        for value in (self.device, self.dtype, self.enabled, self.cache_enabled):
            cg.emit_const(value)
        cg.call(4)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        unsupported("torch.autocast(...) used as a decorator inside a compiled region", BreakCode.AUTOCAST)

    def __repr__(self) -> str:
        return f"AutocastVariable({self.device}, {self.dtype}, enabled={self.enabled})"


class AutocastDecoratedVariable(Variable):
    """A function decorated with `@torch.autocast(...)`: called as its function inside the autocast block."""

    def __init__(self, fn: types.FunctionType, source: Any) -> None:
        self.fn = fn
        self.source = source

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.source is None:
            unsupported("a function decorated with torch.autocast made inside the trace", BreakCode.AUTOCAST)
        cells = dict(zip(self.fn.__code__.co_freevars, self.fn.__closure__))

        def cell_source(name: str) -> Any:
            index = self.fn.__code__.co_freevars.index(name)
            return AttrSource(ItemSource(AttrSource(self.source, "__closure__"), index), "cell_contents")

        real_ctx = cells["autocast_instance"].cell_contents
        ctx_source = cell_source("autocast_instance")
        tx.output.guards.add(ctx_source, GuardKind.TYPE_MATCH, real_ctx)
        fields = ("device", "fast_dtype", "_enabled", "_cache_enabled")
        for name in fields:
            tx.output.guards.add(AttrSource(ctx_source, name), GuardKind.EQUALS, getattr(real_ctx, name))
        ctx = AutocastVariable(*(getattr(real_ctx, name) for name in fields))
        fn = tx.wrap(cells["func"].cell_contents, cell_source("func"))
        ctx.enter(tx)
        result = fn.call(tx, args, kwargs)
        ctx.exit(tx)
        return result
