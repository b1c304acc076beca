"""torch functions that run a callable the program passes them (associative_scan's combine_fn): one graph node.

Such a function's own Python (a vmap of the callable, a recursive scan over slices) is torch-internal code that
the trace does not read. Instead the node calls the real torch function with the callable made real, so eager's
implementation is what runs: at trace time on fake tensors (for the result's metadata), then in the compiled
graph, where AOTAutograd and inductor trace through it as through any Python op. Their contract asks for a pure
callable; one that closes over a traced tensor, or has defaults that are not constants, is a graph break.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Sequence

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


def is_callable_op(value: Any) -> bool:
    return isinstance(value, types.FunctionType) and value in CALLABLE_OPS  # (any value is asked: some don't hash)


class CallableOpVariable(KnownValueVariable):
    """A torch function of CALLABLE_OPS (guarded by identity)."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = getattr(self.value, "__name__", repr(self.value))
        if not args:
            unsupported(f"{name}() without its callable", BreakCode.BAD_CALL)
        fn = real_callable(tx, args[0])
        if fn is None:
            unsupported(f"{name}() of {args[0]}, which is not a function of constants alone (it closes over a traced "
                        f"value, or has defaults that are not constants)", BreakCode.OPAQUE_CALL)
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
        if var.kwdefaults or var.annotations is not None \
                or not all(d.is_python_constant() for d in var.defaults):
            return None
        cells = []
        for cell in var.closure or ():
            if cell.value is None:
                cells.append(types.CellType())
            elif cell.value.is_python_constant() and _is_constant_value(cell.value.as_python_constant()):
                cells.append(types.CellType(cell.value.as_python_constant()))
            else:
                return None
        fn = types.FunctionType(var.code, var.f_globals, var.code.co_name,
                                tuple(d.as_python_constant() for d in var.defaults) or None,
                                tuple(cells) if var.closure else None)
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
