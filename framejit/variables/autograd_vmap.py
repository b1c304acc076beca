"""`torch.vmap(F.apply, ...)(*args)` of a torch.autograd.Function whose vmap rule torch generates
(`generate_vmap_rule = True`): one graph node calling the real `torch.vmap` of the real `apply`.

Before adding it, the trace reads the Function's forward on one sample of the batch (autograd_speculation.py): it
guards what the forward reads and refuses what it writes. The graph holding the node runs as its torch ops under
any backend (`AUTOGRAD_FUNCTION_LIVE_WRITES_META` names why): the real vmap and Function run at every call, as in
eager. Any other callable under vmap, a Function with a vmap rule of its own, or options that are not constants
is a graph break naming it.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from framejit.contracts import (
    AUTOGRAD_FUNCTION_LIVE_WRITES_META,
    AUTOGRAD_FUNCTION_REFUSAL_META,
    OPAQUE_EFFECTS_META,
    GuardKind,
    Tracer,
)
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.sources import AttrSource
from framejit.variables.autograd_function import AutogradApplyVariable, AutogradFunctionClassVariable
from framejit.variables.base import KnownValueVariable, Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.tensor import TensorVariable

_OPTIONS = ("in_dims", "out_dims", "randomness", "chunk_size")


def is_vmap(value: Any) -> bool:
    return value is torch.vmap


class VmapVariable(KnownValueVariable):
    """`torch.vmap` (guarded by identity)."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args or not isinstance(args[0], AutogradApplyVariable):
            what = args[0] if args else "nothing"
            unsupported(
                f"torch.vmap of {what}: framejit traces vmap only of an autograd.Function's apply",
                BreakCode.OPAQUE_CALL,
            )
        fn = args[0]
        cls = fn.cls
        if fn.cls_source is None:
            unsupported(f"torch.vmap of {cls.__qualname__}.apply, a class made in the trace", BreakCode.OPAQUE_CALL)
        for attr in ("generate_vmap_rule", "vmap", "setup_context"):  # which rule torch's vmap takes
            value = getattr(cls, attr, None)
            kind = GuardKind.EQUALS if attr == "generate_vmap_rule" else GuardKind.ID_MATCH
            tx.output.guards.add(AttrSource(fn.cls_source, attr), kind, value)
        if not getattr(cls, "generate_vmap_rule", False) or cls.vmap is not torch.autograd.Function.vmap:
            unsupported(
                f"torch.vmap of autograd.Function {cls.__qualname__}.apply, which has a vmap rule of its own "
                "(framejit reads only a forward that torch vmaps itself, generate_vmap_rule = True)",
                BreakCode.OPAQUE_CALL,
            )
        options = dict(zip(_OPTIONS, args[1:]))
        options.update(kwargs)
        if set(options) - set(_OPTIONS) or not all(v.is_python_constant() for v in options.values()):
            unsupported(
                f"torch.vmap of {cls.__qualname__}.apply with options known only at run time", BreakCode.BAD_CALL
            )
        return VmappedApplyVariable(fn, {k: v.as_python_constant() for k, v in options.items()})


class VmappedApplyVariable(Variable):
    """What `torch.vmap(F.apply, ...)` returns: calling it adds the node."""

    def __init__(self, fn: AutogradApplyVariable, options: dict[str, Any]) -> None:
        self.fn = fn
        self.options = options

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        from framejit.variables.autograd_args import describe
        from framejit.variables.autograd_speculation import speculate

        cls = self.fn.cls
        name = cls.__qualname__
        in_dims = self.options.get("in_dims", 0)
        if kwargs or not all(isinstance(a, TensorVariable) or a.is_python_constant() for a in args):
            unsupported(f"torch.vmap of {name}.apply called with keywords or containers", BreakCode.OPAQUE_CALL)
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args) or not all(d is None or isinstance(d, int) for d in dims):
            unsupported(f"torch.vmap of {name}.apply with in_dims {in_dims!r}", BreakCode.OPAQUE_CALL)
        graph = tx.output.graph  # type: ignore[attr-defined]
        before = set(graph.nodes)
        samples = [
            tx.output.call_graph_op(
                tx, "call_function", torch.select, [a, ConstantVariable(d), ConstantVariable(0)], {}
            )
            if isinstance(a, TensorVariable) and d is not None
            else a
            for a, d in zip(args, dims)
        ]
        try:
            cls_var = AutogradFunctionClassVariable(cls, self.fn.cls_source)
            speculate(tx, cls_var, samples, {}, False, describe(tx, name, samples, {}), writes_allowed=False)
        finally:
            for node in reversed(list(graph.nodes)):
                if node not in before and not node.users and node.op == "call_function":
                    graph.erase_node(node)
        target = _vmapped(cls, self.options)
        try:
            result = tx.output.call_graph_op(tx, "call_function", target, list(args), {})
        except Unsupported as e:
            unsupported(f"torch.vmap of {name}.apply cannot run on fake tensors: {e.msg}", BreakCode.OPAQUE_CALL)
        for node in graph.nodes:
            if node.target is target:
                why = f"torch.vmap of autograd.Function {name} runs as Python at every call"
                node.meta[AUTOGRAD_FUNCTION_LIVE_WRITES_META] = node.meta[AUTOGRAD_FUNCTION_REFUSAL_META] = why
                node.meta[OPAQUE_EFFECTS_META] = True
        return result

    def __repr__(self) -> str:
        return f"VmappedApplyVariable({self.fn.cls.__qualname__})"


def _vmapped(cls: type, options: dict[str, Any]) -> Any:
    def vmapped_apply(*args: Any) -> Any:
        return torch.vmap(cls.apply, **options)(*args)

    vmapped_apply.__name__ = vmapped_apply.__qualname__ = f"vmap_{cls.__name__}_apply"
    return vmapped_apply
