"""torch functions that run a callable the program passes them: `associative_scan` (one graph node) and
`torch.utils.checkpoint.checkpoint` (traced into the graph, its nodes tagged for recomputation).
"""

from __future__ import annotations

import itertools
import types
from typing import Any, Callable, Sequence

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, noop_context_fn

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.variables.base import KnownValueVariable, Variable
from framejit.variables.callables import NestedFunctionVariable, UserFunctionVariable


def _torch_functions_taking_callables() -> frozenset:
    try:  # a prototype API of torch's: it may move
        from torch._higher_order_ops.associative_scan import associative_scan
    except ImportError:
        return frozenset()
    return frozenset({associative_scan})


CALLABLE_OPS = _torch_functions_taking_callables()  # each takes its callable as the first argument


def is_callable_op(value: Any) -> bool:  # (any value is asked: some don't hash)
    return isinstance(value, types.FunctionType) and (value in CALLABLE_OPS or value is checkpoint)


class CallableOpVariable(KnownValueVariable):
    """A torch function of CALLABLE_OPS, or torch.utils.checkpoint.checkpoint (guarded by identity)."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = getattr(self.value, "__name__", repr(self.value))
        if not args:
            unsupported(f"{name}() without its callable", BreakCode.BAD_CALL)
        if self.value is checkpoint:
            return call_checkpointed(tx, args[0], args[1:], kwargs)
        fn = real_callable(tx, args[0])
        if fn is None:
            unsupported(
                f"{name}() of {args[0]}, which is not a function of constants alone (it closes over a traced "
                f"value, or has defaults that are not constants)",
                BreakCode.OPAQUE_CALL,
            )
        try:
            return tx.output.call_graph_op(tx, "call_function", _calling_with(self.value, fn), list(args[1:]), kwargs)
        except Unsupported as e:
            unsupported(f"{name}() of {fn.__qualname__} cannot run on fake tensors: {e.msg}", BreakCode.OPAQUE_CALL)

    def __repr__(self) -> str:
        return f"CallableOpVariable({getattr(self.value, '__name__', self.value)})"


def real_callable(tx: Tracer, var: Variable) -> Callable | None:
    """The function a traced callable stands for, as an object a graph can call, or None.

    A function from outside the trace is itself (it reads its globals and cells when it runs, as in eager; with
    cells, its identity is guarded). One the trace made (an inner def) is made again from its code, with its
    defaults and closure cells, provided they are all constants."""
    if isinstance(var, UserFunctionVariable):
        fn = var.fn
        if fn.__closure__:  # its code is guarded, not its cells: the same function object, then
            if var.source is None:
                return None
            tx.output.guards.add(var.source, GuardKind.ID_MATCH, fn)
        return fn
    if isinstance(var, NestedFunctionVariable):
        if var.kwdefaults or var.annotations is not None or not all(d.is_python_constant() for d in var.defaults):
            return None
        cells = []
        for cell in var.closure or ():
            if cell.value is None:
                cells.append(types.CellType())
            elif cell.value.is_python_constant() and _is_constant_value(cell.value.as_python_constant()):
                cells.append(types.CellType(cell.value.as_python_constant()))
            else:
                return None
        fn = types.FunctionType(
            var.code,
            var.f_globals,
            var.code.co_name,
            tuple(d.as_python_constant() for d in var.defaults) or None,
            tuple(cells) if var.closure else None,
        )
        fn.__qualname__ = var.qualname
        return fn
    return None


def _is_constant_value(value: Any) -> bool:
    """Immutable and tensor-free: what a function made again may hold from the trace."""
    if isinstance(value, (tuple, frozenset)):
        return all(_is_constant_value(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes, types.FunctionType))


def _calling_with(op: Any, fn: Callable) -> Callable:
    """A plain function calling `op(fn, ...)`, named after both: FX names a node by its target's name."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return op(fn, *args, **kwargs)

    call.__name__ = call.__qualname__ = f"{op.__name__}_of_{fn.__name__}"
    return call


_CHECKPOINT_OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state")
_checkpoint_regions = itertools.count(1)


def call_checkpointed(tx: Tracer, fn: Variable, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`checkpoint(fn, *args, use_reentrant=False, **kwargs)`: fn traced into the graph, its nodes tagged for
    recomputation in backward (`recompute`, `ac_graph_id`: the tags AOTAutograd's partitioners read, as under
    torch.compile's checkpoint), so a training graph saves the region's inputs, not its activations.

    Eager's backward runs fn a second time; the graph runs it once. That is the same program only where fn writes
    nothing outside itself: a Python write, or an in-place write into a tensor from outside (a BatchNorm's
    running stats), is a graph break, and so is the reentrant variant (whose outputs need a grad input)."""
    options = {k: kwargs[k] for k in _CHECKPOINT_OPTIONS if k in kwargs}
    fn_kwargs = {k: v for k, v in kwargs.items() if k not in options}
    values = {k: v.as_python_constant() if v.is_python_constant() else v for k, v in options.items()}
    if values.get("use_reentrant", None) is not False:
        unsupported(
            "checkpoint without use_reentrant=False (the reentrant variant runs as Python)", BreakCode.OPAQUE_CALL
        )
    if values.get("context_fn", noop_context_fn) is not noop_context_fn or values.get("debug", False) is not False:
        unsupported("checkpoint with a context_fn or debug (runs as Python)", BreakCode.OPAQUE_CALL)
    graph = tx.output.graph
    before = set(graph.nodes)
    side_effects = tx.output.side_effects.checkpoint()
    result = fn.call(tx, list(args), fn_kwargs)
    if tx.output.side_effects.wrote_older_state(side_effects, tensors=False):  # tensors: _refuse_outside_writes
        unsupported(
            "checkpoint of a function with Python side effects (eager's backward runs it again)", BreakCode.SIDE_EFFECT
        )
    region = [n for n in graph.nodes if n not in before and n.op not in ("placeholder", "get_attr", "output")]
    _refuse_outside_writes(graph, region)
    region_id = next(_checkpoint_regions)
    for node in region:
        node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
        node.meta["ac_graph_id"] = region_id
    return result


def _refuse_outside_writes(graph: Any, region: list) -> None:
    """A checkpointed region's in-place write into memory from outside it (an input's, a buffer's, a view's)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    from framejit.op_effects import op_name, writes_first_argument

    def storage(node: Any) -> Any:
        value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        return StorageWeakRef(value.untyped_storage()) if isinstance(value, torch.Tensor) else None

    inside = set(region)
    outside = {storage(n) for n in graph.nodes if n not in inside} - {None}
    for node in region:
        if "out" in node.kwargs or writes_first_argument(node.target, op_name(node.target), dict(node.kwargs)):
            written = storage(node.kwargs.get("out", node.args[0] if node.args else None))
            if written is None or written in outside:
                unsupported(
                    "checkpoint of a function that writes in place into a tensor from outside it (eager's "
                    "backward writes it again)",
                    BreakCode.SIDE_EFFECT,
                )
