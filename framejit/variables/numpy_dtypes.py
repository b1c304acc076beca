"""numpy's dtype (and shape) for a numpy op traced through torch._numpy, asked of numpy itself.

torch._numpy follows numpy's promotion, but not everywhere: int / int is float32 under torch's default dtype
(numpy: float64), `np.square` of ints is float64 (numpy: int64), `np.sin` of bools float64 (numpy: float16).
So before a numpy op goes to the graph, the trace runs numpy's own function and torch._numpy's on small stand-ins
of the same dtypes (and shapes, where small; dtypes do not depend on values) and compares. Where they differ, the
graph op casts integer and bool inputs to numpy's dtype (so it computes in that dtype), or, if that does not
give it, casts the result. Shapes are compared too (np.median(a) is 0-d, torch._numpy's has one item): where the
stand-ins have the real shapes, a result of numpy's size is reshaped to numpy's shape; any other difference in
shape (or in the number of dims, with cut stand-ins) is a break. An op whose stand-ins fail (a shape the cut
stand-ins do not fit, a singular matrix) is left as torch._numpy makes it."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Callable, Sequence

import torch

from framejit import numpy_graph_ops
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable

_SMALL = 4096  # stand-ins keep the real shape up to this many items; larger ones are cut to one item per dim


class _NoStandIn(Exception):
    """An argument the stand-ins cannot copy (a symbolic number, a value known only at run time)."""


class _StandIns:
    """Stand-ins of a call's arguments: zeros of each array's dtype; `exact` while every shape is the real one."""

    def __init__(self) -> None:
        self.exact = True

    def dims(self, example: torch.Tensor) -> tuple[int, ...]:
        dims = tuple(d if type(d) is int else 1 for d in example.shape)  # a symbolic size: one item
        if dims != tuple(example.shape) or math.prod(dims) > _SMALL:
            self.exact = False
            return tuple(min(d, 1) for d in dims)
        return dims

    def numpy(self, value: Variable) -> Any:
        from framejit.variables.numpy_arrays import NumpyArrayVariable

        import numpy

        if isinstance(value, NumpyArrayVariable):
            dtype = torch.empty(0, dtype=value.example.dtype).numpy().dtype
            array = numpy.zeros(self.dims(value.example), dtype=dtype)
            return array[()] if value.scalar else array
        if isinstance(value, (ListVariable, TupleVariable)):
            return type(value.python_type()())(self.numpy(v) for v in value.items)
        if isinstance(value, SymbolicVariable):  # a number known at run time: its type decides (NEP 50)
            return value.python_type()(1)
        if value.is_python_constant():
            return value.as_python_constant()
        raise _NoStandIn

    def torch(self, value: Variable) -> Any:
        if isinstance(value, TensorVariable):
            return torch.zeros(self.dims(value.example), dtype=value.example.dtype)
        if isinstance(value, (ListVariable, TupleVariable)):
            return type(value.python_type()())(self.torch(v) for v in value.items)
        if isinstance(value, SymbolicVariable):
            return value.python_type()(1)
        if value.is_python_constant():
            return value.as_python_constant()
        raise _NoStandIn


def _described(value: Any) -> Any:
    """A result as (torch dtype, shape), a tuple of those for tuples; None where torch knows no such dtype."""
    import numpy

    if isinstance(value, (tuple, list)):
        return tuple(_described(v) for v in value)
    if isinstance(value, torch.Tensor):
        return value.dtype, tuple(value.shape)
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        try:
            return torch.from_numpy(numpy.empty(0, dtype=value.dtype)).dtype, numpy.shape(value)
        except TypeError:
            return None
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class NumpyAnswer:
    """What numpy's own run on the stand-ins says of a numpy op: `fixes` for numpy_graph_ops.numpy_op (cast_inputs,
    result_dtype, result_shape); `container`, numpy's type for a sequence of results (a tuple where torch._numpy
    gives a list, a named tuple); `dtype_answer`, numpy's answer when it is a dtype or a scalar type (np.result_type,
    np.common_type): it depends on the dtypes alone, so it is a constant."""

    fixes: tuple[Any, ...] = (None, None, None)
    container: type | None = None
    dtype_answer: Any = None


def numpy_answer(
    kind: str,
    key: Any,
    numpy_fn: Callable[..., Any],
    what: str,
    args: Sequence[Variable],
    kwargs: dict[str, Variable],
    graph_args: Sequence[Variable],
    graph_kwargs: dict[str, Variable],
) -> NumpyAnswer:
    """Run numpy's function and torch._numpy's on stand-ins and say how the graph op gives numpy's result."""
    import numpy

    stand_ins = _StandIns()
    try:
        np_args, np_kwargs = [stand_ins.numpy(a) for a in args], {k: stand_ins.numpy(v) for k, v in kwargs.items()}
        t_args = [stand_ins.torch(a) for a in graph_args]
        t_kwargs = {k: stand_ins.torch(v) for k, v in graph_kwargs.items()}
    except _NoStandIn:
        return NumpyAnswer()
    errors: list[Exception] = []

    def run(fn: Callable[..., Any], *call: Any, **kw: Any) -> Any:
        with warnings.catch_warnings(), numpy.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                return fn(*call, **kw)
            except Exception as e:  # noqa: BLE001 - a stand-in it does not fit: no answer
                errors.append(e)
                return _FAILED

    raw = run(numpy_fn, *np_args, **np_kwargs)
    if isinstance(raw, numpy.dtype) or isinstance(raw, type) and issubclass(raw, numpy.generic):
        return NumpyAnswer(dtype_answer=raw)
    container = type(raw) if isinstance(raw, (tuple, list)) else None
    got_raw = run(numpy_graph_ops.numpy_op(kind, key), *t_args, **t_kwargs)
    if raw is not _FAILED and got_raw is _FAILED:  # (cumsum of bools: torch has no such kernel)
        error = errors[-1]
        unsupported(
            f"{what} raised {type(error).__name__} in torch._numpy where numpy gives a result: {error}", BreakCode.NUMPY
        )
    want, got = _described(raw), _described(got_raw)
    if want is None or got is None or want == got:
        return NumpyAnswer(container=container)
    if isinstance(want[0], tuple) or isinstance(got[0], tuple):
        unsupported(f"{what} gives {got} in torch._numpy where numpy gives {want} (dtype, shape)", BreakCode.NUMPY)
    (want_dtype, want_shape), (got_dtype, got_shape) = want, got
    shape = None
    if want_shape != got_shape:
        if not stand_ins.exact and len(want_shape) == len(got_shape):
            shape = None  # cut stand-ins: their shapes say nothing beyond the number of dims
        elif stand_ins.exact and math.prod(want_shape) == math.prod(got_shape):
            shape = want_shape
        else:
            unsupported(
                f"{what} gives shape {got_shape} in torch._numpy where numpy gives {want_shape}", BreakCode.NUMPY
            )
    if want_dtype == got_dtype:
        return NumpyAnswer(fixes=(None, None, shape))
    if want_dtype.is_floating_point or want_dtype.is_complex:
        cast = _described(run(numpy_graph_ops.numpy_op(kind, key, want_dtype, None, shape), *t_args, **t_kwargs))
        if cast is not None and cast[0] == want_dtype:
            return NumpyAnswer(fixes=(want_dtype, None, shape))
    return NumpyAnswer(fixes=(None, want_dtype, shape))


_FAILED = object()  # a stand-in run that raised
