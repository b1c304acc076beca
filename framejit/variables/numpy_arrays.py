"""numpy code on tensors, traced through torch._numpy (as torch.compile does).

`t.numpy()` in the trace is a `NumpyArrayVariable`: an ndarray backed by a tensor of the graph (a view of `t`,
sharing its memory as Tensor.numpy() does). A numpy function called on such arrays (`np.sin(a)`), an ndarray
method or attribute (`a.sum()`, `a.T`) and an operator (`a * 2`, `a[1:]`) are one graph op each: a callable of
`numpy_graph_ops` that runs torch._numpy's counterpart on the tensors, so numpy's rules (dtype promotion with
float64 defaults, broadcasting, axis arguments) hold and the graph is torch ops. `torch.from_numpy(a)` and
`torch.as_tensor(a)` give the tensor back. An array the program keeps after the graph is made from the graph's
tensor (`.numpy()`, sharing its memory); a 0-d result of a computation is a numpy scalar, as numpy gives it.

A write into an array is done on a copy of its tensor, then copied into it (a torch write the graph tracks).
Refused, each a graph break with its reason: a numpy function torch._numpy lacks, numpy's random functions
(numpy's random state is outside the graph), numpy functions given torch tensors (eager numpy converts them
through __array__), reading an array's values as Python values. docs/numpy.md has the rules."""

from __future__ import annotations

import functools
import operator
import sys
from typing import Any, Callable, Sequence

import torch

from framejit import numpy_graph_ops
from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.op_effects import OUT_OF_PLACE
from framejit.sources import FromNumpySource, Source
from framejit.variables.base import KnownValueVariable, Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BoundMethod, ListVariable, TupleVariable
from framejit.variables.numpy_dtypes import NumpyAnswer, numpy_answer
from framejit.variables.symbolic import SymbolicVariable, has_symbolic
from framejit.variables.tensor import TensorVariable

# numpy's modules and torch._numpy's counterparts, by the names both export
_MODULES = (("numpy", "torch._numpy"), ("numpy.linalg", "torch._numpy.linalg"), ("numpy.fft", "torch._numpy.fft"))
_PUBLIC_MODULES = frozenset({"numpy", "numpy.linalg", "numpy.fft", "numpy.random"})
# results that stay arrays when 0-d (np.asarray(5.0), a.reshape(())); any other 0-d result is a numpy scalar
_ARRAY_RESULTS = frozenset(
    {
        "array",
        "asarray",
        "asanyarray",
        "ascontiguousarray",
        "asfortranarray",
        "copy",
        "reshape",
        "squeeze",
        "transpose",
        "T",
        "astype",
        "view",
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "broadcast_to",
        "where",
        "swapaxes",
        "moveaxis",
    }
)
# questions about dtypes, answered by numpy now when asked of constants (np.issubdtype(a.dtype, np.floating))
_DTYPE_QUERIES = frozenset({"issubdtype", "can_cast", "result_type", "promote_types", "iinfo", "finfo", "isscalar"})
# methods that write into their array, done on a copy then copied into the array's tensor (`_write`)
_WRITING_METHODS = frozenset({"fill", "sort", "put"})
# writes refused: they change the array's shape or flags, or torch._numpy lacks them
_REFUSED_WRITES = frozenset({"partition", "itemset", "resize", "setfield", "setflags", "byteswap"})
# functions that write into an argument (out= aside): refused
_WRITING_FUNCTIONS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"})
# reading the values as Python values: data-dependent
_DATA_METHODS = frozenset(
    {"item", "tolist", "tobytes", "tostring", "__bool__", "__int__", "__float__", "__index__", "__array__"}
)
_IN_PLACE_OPERATORS = frozenset({operator.setitem, operator.delitem, *OUT_OF_PLACE})


def _numpy() -> Any:
    return sys.modules.get("numpy")


@functools.lru_cache(maxsize=1)
def _counterparts() -> dict[int, tuple[Any, Any, str]]:
    """id(numpy callable) -> (it, torch._numpy's function of the same name, "numpy.name")."""
    import importlib

    table: dict[int, tuple[Any, Any, str]] = {}
    for np_name, tnp_name in (*_MODULES, ("numpy.random", "torch._numpy.random")):
        np_mod, tnp_mod = importlib.import_module(np_name), importlib.import_module(tnp_name)
        for name, tnp_fn in vars(tnp_mod).items():
            np_fn = getattr(np_mod, name, None)
            if callable(tnp_fn) and callable(np_fn) and not isinstance(np_fn, type) and not name.startswith("_"):
                table.setdefault(id(np_fn), (np_fn, tnp_fn, f"{np_name}.{name}"))
    return table


def is_numpy_function(value: Any) -> bool:
    """A function of numpy's (a ufunc, np.sum, np.linalg.norm, np.random.rand...), not a class (np.float32)."""
    numpy = _numpy()
    if numpy is None or isinstance(value, type) or not callable(value):
        return False
    module = getattr(value, "__module__", None)  # numpy's public namespaces (not its internals: _core...)
    return isinstance(value, numpy.ufunc) or module in _PUBLIC_MODULES and hasattr(value, "__name__")


@functools.lru_cache(maxsize=None)
def _scalar_type(dtype: torch.dtype) -> type:
    return type(torch.zeros((), dtype=dtype).numpy()[()])


class NumpyArrayVariable(Variable):
    """An ndarray (or numpy scalar) the graph computes, as torch._numpy's ndarray over `tensor`.

    `scalar`: a 0-d result numpy gives as a scalar (np.float64), made so after the graph."""

    rebuilt_once = True  # an object with an identity

    def __init__(self, tensor: TensorVariable, scalar: bool = False, source: Source | None = None) -> None:
        self.tensor = tensor
        self.source = source
        self.scalar = scalar and tensor.example.dim() == 0

    @property
    def example(self) -> torch.Tensor:
        return self.tensor.example

    def python_type(self) -> type:
        return _scalar_type(self.example.dtype) if self.scalar else _numpy().ndarray

    def children(self) -> list[Variable]:
        return [self.tensor]

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(numpy_graph_ops.to_numpy_scalar if self.scalar else numpy_graph_ops.to_ndarray)
        cg.load(self.tensor)
        cg.call(1)

    def as_python_constant(self) -> Any:
        unsupported("reading a numpy array's values as a Python value (data-dependent)", BreakCode.DATA_DEPENDENT)

    def as_node_arg(self) -> Any:
        unsupported("a numpy array passed to a torch op (eager torch does not take ndarrays)", BreakCode.GRAPH_ARG)

    as_fake = as_node_arg

    def truth(self, tx: Tracer) -> bool:
        unsupported("bool() of a numpy array reads its values (data-dependent)", BreakCode.DATA_DEPENDENT)

    def unpack(self, tx: Tracer) -> list[Variable]:
        if self.example.dim() == 0 or has_symbolic(self.example.shape[0]):
            unsupported("iterating over a 0-d numpy array, or one of a dynamic length", BreakCode.ITER)
        rows = int(self.example.shape[0])
        return [numpy_operator_call(tx, operator.getitem, [self, ConstantVariable(i)]) for i in range(rows)]

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        numpy = _numpy()
        shape = self.example.shape
        if name in ("nbytes", "strides") and (has_symbolic(shape) or has_symbolic(self.example.stride())):
            unsupported(f"ndarray.{name} of an array of dynamic shape", BreakCode.NUMPY)
        if name in ("shape", "size") and has_symbolic(shape):
            sizes = self.tensor.call_method(tx, "size", [], {}).unpack(tx)
            if name == "shape":
                return TupleVariable(sizes)
            return self.tensor.call_method(tx, "numel", [], {})
        static = {
            "shape": lambda: tuple(int(s) for s in shape),
            "ndim": lambda: len(shape),
            "size": lambda: int(self.example.numel()),
            "itemsize": lambda: self.example.element_size(),
            "nbytes": lambda: int(self.example.numel()) * self.example.element_size(),
            "strides": lambda: tuple(int(s) * self.example.element_size() for s in self.example.stride()),
            "dtype": lambda: numpy.dtype(_scalar_type(self.example.dtype)),
        }
        if name in static:
            return tx.wrap_constant(static[name]())
        if name in ("T", "real", "imag"):
            result = tx.output.call_graph_op(
                tx, "call_function", numpy_graph_ops.numpy_attribute, [self.tensor, ConstantVariable(name)], {}
            )
            return _wrap_results(result, name)
        if name == "__class__":
            return tx.wrap(self.python_type(), None)
        tnp_ndarray = _tnp().ndarray
        if callable(getattr(tnp_ndarray, name, None)) or name in _DATA_METHODS:
            return BoundMethod(self, name)
        if hasattr(numpy.ndarray, name):
            unsupported(f"ndarray.{name} is not modelled by torch._numpy", BreakCode.NUMPY)
        unsupported(f"'numpy.ndarray' object has no attribute {name!r}", BreakCode.MISSING_ATTR)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name in _DATA_METHODS:
            unsupported(f"ndarray.{name}() reads the array's values (data-dependent)", BreakCode.DATA_DEPENDENT)
        if name in _REFUSED_WRITES:
            unsupported(f"ndarray.{name}() changes the array in a way torch._numpy does not model", BreakCode.NUMPY)
        if name in _WRITING_METHODS:
            _write(tx, self, name, args, kwargs)
            return ConstantVariable(None)
        if name == "__len__" and not args and not kwargs:
            if self.example.dim() == 0:
                unsupported("len() of a 0-d numpy array", BreakCode.BUILTIN)
            return self.tensor.call_method(tx, "size", [ConstantVariable(0)], {})
        if name in ("__getitem__", "__setitem__"):
            return numpy_operator_call(tx, getattr(operator, name.strip("_")), [self, *args])
        if name == "astype":
            dtype = args[0] if args else kwargs.get("dtype")
            if dtype is not None and dtype.is_python_constant() and dtype.as_python_constant() in (object, "O"):
                unsupported("ndarray.astype(object): torch has no object dtype", BreakCode.NUMPY)
        numpy_fn = lambda obj, *rest, **kw: getattr(obj, name)(*rest, **kw)  # noqa: E731
        result = _graph_op(tx, ("method", name), f"ndarray.{name}", [self, *args], kwargs, numpy_fn)
        return _wrap_results(result, "" if self.scalar else name)  # a numpy scalar's methods give scalars

    def __repr__(self) -> str:
        return f"NumpyArrayVariable({self.tensor})"


def _tnp() -> Any:
    import torch._numpy as tnp

    return tnp


def _graph_arg(tx: Tracer, value: Variable, what: str) -> Variable:
    """An argument of a numpy graph op: arrays as their tensors; a numpy scalar as a 0-d tensor of its dtype (a
    Python number would be a weak scalar under numpy's promotion); numpy dtypes and scalar types by name."""
    numpy = _numpy()
    if isinstance(value, NumpyArrayVariable):
        return value.tensor
    if isinstance(value, TensorVariable):
        unsupported(
            f"{what} given a torch tensor: eager numpy converts it through __array__ (and may give a tensor "
            "back); call .numpy() on it first",
            BreakCode.NUMPY,
        )
    if isinstance(value, ListVariable):
        return ListVariable([_graph_arg(tx, v, what) for v in value.items])
    if isinstance(value, TupleVariable):
        return TupleVariable([_graph_arg(tx, v, what) for v in value.items], py_type=value.python_type())
    if isinstance(value, SymbolicVariable) and value.numpy_type is not None:  # a numpy integer argument
        dtype = torch.from_numpy(numpy.asarray(value.numpy_type(0))).dtype
        return tx.output.call_graph_op(
            tx, "call_function", torch.scalar_tensor, [value], {"dtype": ConstantVariable(dtype)}
        )
    if not value.is_python_constant():
        return value
    const = value.as_python_constant()
    if isinstance(const, numpy.generic):
        dtype = torch.from_numpy(numpy.asarray(const)).dtype
        return tx.output.call_graph_op(
            tx,
            "call_function",
            torch.scalar_tensor,
            [ConstantVariable(const.item())],
            {"dtype": ConstantVariable(dtype)},
        )
    if isinstance(const, numpy.dtype):
        return ConstantVariable(const.name)
    if isinstance(const, type) and issubclass(const, numpy.generic):
        try:
            return ConstantVariable(numpy.dtype(const).name)
        except TypeError:  # an abstract type (np.floating): no dtype of its own
            unsupported(f"{what} given numpy's abstract type {const.__name__}", BreakCode.NUMPY)
    return value


def _graph_op(
    tx: Tracer,
    op: Any,
    what: str,
    args: Sequence[Variable],
    kwargs: dict[str, Variable],
    numpy_fn: Callable[..., Any] | None = None,
) -> Variable:
    """One graph op on the tensors, refused if it wrote into one. `op`: a numpy_graph_ops callable, or (kind, key)
    of `numpy_graph_ops.numpy_op`, made to give numpy's dtype where torch._numpy's differs (`numpy_fn`: numpy's
    own function, asked on stand-ins: numpy_dtypes)."""
    if "out" in kwargs:
        unsupported(f"{what} with out=: it writes into an array (it may share memory with a tensor)", BreakCode.NUMPY)
    graph_args = [_graph_arg(tx, a, what) for a in args]
    graph_kwargs = {k: _graph_arg(tx, v, what) for k, v in kwargs.items()}
    answer = NumpyAnswer()
    if isinstance(op, tuple):
        if numpy_fn is not None:
            answer = numpy_answer(*op, numpy_fn, what, args, kwargs, graph_args, graph_kwargs)
        if answer.dtype_answer is not None:
            return tx.wrap_constant(answer.dtype_answer)
        op = numpy_graph_ops.numpy_op(*op, *answer.fixes)
    tensors = [a.example for a in [*graph_args, *graph_kwargs.values()] if isinstance(a, TensorVariable)]
    versions = [t._version for t in tensors]
    result = tx.output.call_graph_op(tx, "call_function", op, graph_args, graph_kwargs)
    if [t._version for t in tensors] != versions:
        unsupported(f"{what} writes into an array (it may share memory with a tensor)", BreakCode.NUMPY)
    if answer.container is not None and isinstance(result, (ListVariable, TupleVariable)):
        items = result.items  # numpy's sequence type: a tuple where torch._numpy gives a list, a named tuple
        return ListVariable(items) if answer.container is list else TupleVariable(items, py_type=answer.container)
    return result


def _wrap_results(result: Variable, name: str) -> Variable:
    """A graph op's tensors as numpy arrays (scalars where numpy gives one for a 0-d result)."""
    if isinstance(result, TensorVariable):
        return NumpyArrayVariable(result, scalar=name not in _ARRAY_RESULTS)
    if isinstance(result, ListVariable):
        return ListVariable([_wrap_results(v, name) for v in result.items])
    if isinstance(result, TupleVariable):
        return TupleVariable([_wrap_results(v, name) for v in result.items], py_type=result.python_type())
    return result


class NumpyFunctionVariable(KnownValueVariable):
    """A numpy function: called on arrays it is a graph op of torch._numpy's counterpart; on constants alone it is
    folded when it gives a number (np.sqrt(2.0), np.prod(shape)), else its array is made in the graph."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        entry = _counterparts().get(id(self.value))
        name = entry[2] if entry is not None and entry[0] is self.value else _name(self.value)
        if name.startswith("numpy.random."):
            unsupported(
                f"{name} draws from numpy's random state, which a graph would not advance: not traced",
                BreakCode.NUMPY,
            )
        if entry is None or entry[0] is not self.value:
            folded = None
            pure = isinstance(self.value, _numpy().ufunc) or name.rsplit(".", 1)[1] in _DTYPE_QUERIES
            if pure and _all_constant(args, kwargs):
                folded = _fold(tx, self.value, name, args, kwargs)  # computed now
            if folded is not None:
                return folded
            unsupported(f"{name} has no counterpart in torch._numpy: it runs as Python", BreakCode.NUMPY)
        tnp_fn = entry[1]
        short = name.rsplit(".", 1)[1]
        if short == "min_scalar_type" and not _all_constant(args, kwargs):
            unsupported(f"{name} of an array: its answer for a 0-d array depends on the value", BreakCode.NUMPY)
        if short in _WRITING_FUNCTIONS:
            unsupported(f"{name} writes into an array (it may share memory with a tensor)", BreakCode.NUMPY)
        if short in ("asarray", "array", "asanyarray") and args and isinstance(args[0], TensorVariable):
            array = tensor_to_array(tx, args[0], force=False)  # np.asarray(t) is t.numpy(); np.array(t) a copy
            args = [array, *args[1:]]
            if short == "asarray" and len(args) == 1 and not kwargs:
                return array
        if _all_constant(args, kwargs) and (short in _DTYPE_QUERIES or _gives_a_number(tnp_fn, args, kwargs)):
            folded = _fold(tx, self.value, name, args, kwargs)
            if folded is not None:
                return folded  # (else a 0-d array of constants, np.array(5.0): made in the graph)
        result = _graph_op(tx, ("call", (tnp_fn, name)), name, args, kwargs, self.value)
        return _wrap_results(result, short)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "__name__":
            return ConstantVariable(self.value.__name__)
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"NumpyFunctionVariable({_name(self.value)})"


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "numpy"
    return f"{module}.{getattr(fn, '__name__', fn)}"


def _all_constant(args: Sequence[Variable], kwargs: dict[str, Variable]) -> bool:
    return all(a.is_python_constant() for a in [*args, *kwargs.values()])


def _gives_a_number(tnp_fn: Any, args: Sequence[Variable], kwargs: dict[str, Variable]) -> bool:
    """Whether torch._numpy's function, on these constants, gives a number or a 0-d array: run on the meta device
    (no memory, no values). Then numpy itself computes it now, from constants."""
    consts = [a.as_python_constant() for a in args]
    kw = {k: v.as_python_constant() for k, v in kwargs.items()}
    try:
        with torch.device("meta"):
            result = tnp_fn(*consts, **kw)
    except Exception:  # noqa: BLE001 - numpy decides, in the graph op or at the call
        return False
    return not isinstance(result, (_tnp().ndarray, tuple, list)) or (
        isinstance(result, _tnp().ndarray) and result.ndim == 0
    )


def _fold(tx: Tracer, fn: Any, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable | None:
    """numpy's own answer on constants, as a constant: a number, a dtype or a scalar type, finfo/iinfo; None for an
    array (which the graph makes)."""
    from framejit.variables.constant import is_literal

    numpy = _numpy()
    consts = [a.as_python_constant() for a in args]
    kw = {k: v.as_python_constant() for k, v in kwargs.items()}
    try:
        result = fn(*consts, **kw)
    except Exception as e:  # the same call raises in eager
        unsupported(f"{name} on constants raised {type(e).__name__}: {e}", BreakCode.CONSTANT_ERROR)
    kinds = (numpy.dtype, numpy.finfo, numpy.iinfo)
    if (
        is_literal(result)
        or isinstance(result, kinds)
        or isinstance(result, type)
        and issubclass(result, numpy.generic)
    ):
        return tx.wrap_constant(result)
    return None


def tensor_to_array(tx: Tracer, tensor: TensorVariable, force: bool) -> NumpyArrayVariable:
    """Tensor.numpy(): an array sharing the tensor's memory (a view in the graph). Where eager refuses (a tensor
    that requires grad, not on the CPU, of a dtype numpy lacks), the call runs as Python and raises there."""
    example = tensor.example
    if example.requires_grad and not force:
        unsupported("Tensor.numpy() of a tensor that requires grad (eager raises; use .detach())", BreakCode.NUMPY)
    if example.device.type != "cpu" or example.layout != torch.strided:
        unsupported("Tensor.numpy() of a tensor not strided on the CPU", BreakCode.NUMPY)
    try:
        _scalar_type(example.dtype)
    except TypeError:
        unsupported(f"Tensor.numpy() of a {example.dtype} tensor: numpy has no such dtype", BreakCode.NUMPY)
    base = tensor.call_method(tx, "detach", [], {}) if force else tensor
    view = base.call_method(tx, "view_as", [base], {})
    assert isinstance(view, TensorVariable)
    return NumpyArrayVariable(view)


def scalar_type_call(tx: Tracer, cls: type, array: NumpyArrayVariable) -> Variable:
    """np.float32(a): a cast; a numpy scalar of that type for a 0-d array, as numpy gives it."""
    cast = array.call_method(tx, "astype", [ConstantVariable(cls)], {})
    assert isinstance(cast, NumpyArrayVariable)
    return NumpyArrayVariable(cast.tensor, scalar=True)


def is_ndarray(value: Any) -> bool:
    numpy = _numpy()
    return numpy is not None and type(value) is numpy.ndarray


def wrap_array_input(tx: Tracer, value: Any, source: Source) -> Variable:
    """An ndarray from outside the frame: the graph takes `torch.from_numpy(array)`, sharing its memory (a torch
    op writing it writes the array, as in eager), on the storage of the tensor it came from if any (`x.numpy()`
    live at a break: the graph sees the two alias); the array itself is reloaded from its source after the graph.
    An array torch cannot share (object or string dtypes, negative strides, read-only) is refused."""
    if not value.flags.writeable:
        unsupported(f"{source.name()} is a read-only numpy array, which torch cannot share", BreakCode.NUMPY)
    try:
        tensor = numpy_graph_ops.tensor_of_array(value)
    except (TypeError, ValueError) as e:
        unsupported(f"{source.name()} is a numpy array torch cannot share: {e}", BreakCode.NUMPY)
    for other in tx.output.inputs:  # type: ignore[attr-defined]
        if isinstance(other.value, torch.Tensor) and _overlap_unseen(tensor, other.value):
            named = other.source.base if isinstance(other.source, FromNumpySource) else other.source
            unsupported(
                f"{source.name()} shares memory with {named.name()} in a way torch cannot see (two numpy "
                "views of one buffer): a write through one would be missed through the other",
                BreakCode.NUMPY,
            )
    graph_input = tx.output.add_graph_input(FromNumpySource(source), tensor)
    assert isinstance(graph_input, TensorVariable)
    return NumpyArrayVariable(graph_input, source=source)


def _write(tx: Tracer, array: Variable, op: Callable[..., Any] | str, args: Sequence[Variable], kwargs: dict) -> None:
    """A write into an array: torch._numpy's op on a copy gives what the array then holds, copied into its tensor
    by a torch write (a view of the tensor `.numpy()` was called on: that tensor changes, as in eager)."""
    what = f"ndarray.{op}" if isinstance(op, str) else f"operator.{op.__name__}"
    if not isinstance(array, NumpyArrayVariable):
        unsupported(f"{what} writing into a value that is not a numpy array, with one", BreakCode.NUMPY)
    result = _graph_op(tx, numpy_graph_ops.numpy_write(op), what, [array, *args], kwargs)
    array.tensor.call_method(tx, "copy_", [result], {})


def _overlap_unseen(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' memory overlaps though their storages are distinct (torch sees no alias)."""
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa._cdata == sb._cdata or b.device != a.device or not sa.nbytes() or not sb.nbytes():
        return False
    return sa.data_ptr() < sb.data_ptr() + sb.nbytes() and sb.data_ptr() < sa.data_ptr() + sa.nbytes()


def numpy_operator_call(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable:
    """An `operator` function with a numpy array among its operands, with numpy's rules."""
    if fn in _IN_PLACE_OPERATORS:
        target = args[0]
        if fn is not operator.setitem and not (isinstance(target, NumpyArrayVariable) and not target.scalar):
            # a numpy scalar (or a number) is immutable: `s += a` is `s = s + a`
            return numpy_operator_call(tx, OUT_OF_PLACE[fn], args)
        if any(isinstance(a, TensorVariable) for a in args):
            unsupported(f"operator.{fn.__name__} between a numpy array and a torch tensor", BreakCode.NUMPY)
        if fn is operator.delitem:
            unsupported("del of an item of a numpy array (eager raises)", BreakCode.NUMPY)
        _write(tx, target, fn, args[1:], {})
        return ConstantVariable(None) if fn is operator.setitem else target
    if fn in (operator.is_, operator.is_not, operator.contains, operator.not_, operator.truth):
        if fn in (operator.is_, operator.is_not):
            same = args[0] is args[1]
            return ConstantVariable(same if fn is operator.is_ else not same)
        unsupported(f"operator.{fn.__name__} of a numpy array reads its values (data-dependent)", BreakCode.NUMPY)
    if any(isinstance(a, TensorVariable) for a in args):
        unsupported(
            f"operator.{fn.__name__} between a numpy array and a torch tensor (eager gives a tensor, or raises)",
            BreakCode.NUMPY,
        )
    result = _graph_op(tx, ("operator", fn), f"operator.{fn.__name__}", args, {}, fn)
    # a[...] and a[()] on a 0-d array are arrays; an element a[i] is a scalar
    return _wrap_results(result, "view" if fn is operator.getitem and _keeps_array(args[1]) else fn.__name__)


def _keeps_array(index: Variable) -> bool:
    return index.is_python_constant() and index.as_python_constant() is Ellipsis


def torch_function_on_arrays(tx: Tracer, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """A torch function given a numpy array: torch.from_numpy and torch.as_tensor share its memory (the tensor
    behind it), torch.tensor copies it; any other is refused (eager torch does not take ndarrays)."""
    name = getattr(fn, "__name__", repr(fn))
    array = args[0] if args else None
    if fn in (torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor) and isinstance(array, NumpyArrayVariable):
        if fn is torch.from_numpy and (array.scalar or kwargs or len(args) > 1):
            unsupported("torch.from_numpy of a numpy scalar (eager raises)", BreakCode.NUMPY)
        tensor = array.tensor.call_method(tx, "view_as", [array.tensor], {})
        if fn is torch.tensor:
            tensor = tensor.call_method(tx, "clone", [], {})
        extra = dict(zip(("dtype", "device"), args[1:])) | kwargs
        if extra:
            if set(extra) - {"dtype", "device"}:
                unsupported(f"torch.{name} of a numpy array with {sorted(extra)}", BreakCode.NUMPY)
            tensor = tensor.call_method(tx, "to", [], extra)
        return tensor
    unsupported(f"torch.{name} given a numpy array (eager torch does not take ndarrays)", BreakCode.NUMPY)


def holds_array(values: Sequence[Variable]) -> bool:
    return any(isinstance(v, NumpyArrayVariable) for v in values)
