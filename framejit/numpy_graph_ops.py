"""The callables a graph holds for numpy code traced on tensors: each runs one torch._numpy function, method,
attribute or operator on tensors and gives tensors back (torch._numpy's ndarray wraps a tensor), so the graph
is torch ops on tensors. Also the conversions after the graph, from a graph's tensor to what numpy gives: an
ndarray sharing the tensor's memory, or a numpy scalar.

A numpy value with no tensor (a dtype) comes back as numpy's own. Imports only torch and numpy (lazily)."""

from __future__ import annotations

from typing import Any, Callable

import torch


def _tnp() -> Any:
    import torch._numpy as tnp

    return tnp


def _to_tensors(value: Any) -> Any:
    """torch._numpy's results as the graph carries them: arrays as their tensors, dtypes as numpy's."""
    tnp = _tnp()
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, (tuple, list)):
        return type(value)(_to_tensors(v) for v in value)
    if isinstance(value, tnp.DType):
        import numpy

        return numpy.dtype(value.name)
    return value


def _as_arrays(value: Any) -> Any:
    """Tensors as torch._numpy arrays (an operator or a method must act on arrays, with numpy's rules)."""
    tnp = _tnp()
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_as_arrays(v) for v in value)
    return value


class _GraphCallable:
    """A named callable: the FX code names it by `__name__` (never ending in `_`, torch's mark of in-place)."""

    __name__: str  # an identifier, for the graph's code
    __qualname__: str  # what the program called (numpy.sin, ndarray.sum), for messages
    pure_tensor_code = True  # its result depends on its arguments alone; it writes nothing (the trace checks)

    def __repr__(self) -> str:
        return f"<{self.__qualname__} on tensors>"


class _NumpyOp(_GraphCallable):
    """Where torch._numpy's dtype differs from numpy's (int / int is float32 under torch's default dtype, not
    float64), the trace asks for numpy's: integer and bool tensor arguments cast to `cast_inputs` first (the op
    then computes in numpy's dtype), or the result cast to `result_dtype`; a result of numpy's size but another
    shape (np.median's) is reshaped to `result_shape`."""

    def __init__(
        self,
        name: str,
        qualname: str,
        cast_inputs: torch.dtype | None = None,
        result_dtype: torch.dtype | None = None,
        result_shape: tuple[int, ...] | None = None,
    ):
        self.cast_inputs, self.result_dtype, self.result_shape = cast_inputs, result_dtype, result_shape
        fixes = (("in", cast_inputs), ("as", result_dtype))
        suffix = "".join(f"_{k}_{str(d).removeprefix('torch.')}" for k, d in fixes if d)
        self.__name__ = name + suffix + ("_reshaped" if result_shape is not None else "")
        self.__qualname__ = qualname

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.cast_inputs is not None:
            args = tuple(_cast_integral(a, self.cast_inputs) for a in args)
        result = _to_tensors(self.run(*args, **kwargs))
        if self.result_dtype is not None and isinstance(result, torch.Tensor):
            result = result.to(self.result_dtype)
        if self.result_shape is not None and isinstance(result, torch.Tensor):
            result = result.reshape(self.result_shape)
        return result


def _cast_integral(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex()):
        return value.to(dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_integral(v, dtype) for v in value)
    return value


class NumpyCall(_NumpyOp):
    """numpy.<fn>(...) as torch._numpy's fn: its array-likes may be tensors (its normalizations take them)."""

    def __init__(self, fn: Callable[..., Any], name: str, *fixes: Any) -> None:
        self.fn = fn
        super().__init__(name.replace(".", "_"), name, *fixes)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class NumpyMethod(_NumpyOp):
    """ndarray.<name>(...) on the array that wraps the first argument."""

    def __init__(self, name: str, *fixes: Any) -> None:
        self.name = name
        super().__init__("ndarray_" + name.strip("_"), f"ndarray.{name}", *fixes)

    def run(self, obj: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(_tnp().ndarray(obj), self.name)(*_as_arrays(args), **kwargs)


class NumpyOperator(_NumpyOp):
    """An `operator` function (add, lt, getitem, neg...) on arrays: numpy's dtype promotion and broadcasting."""

    def __init__(self, op: Callable[..., Any], *fixes: Any) -> None:
        self.op = op
        super().__init__("ndarray_op_" + op.__name__.strip("_"), f"operator.{op.__name__} on arrays", *fixes)

    def run(self, *args: Any) -> Any:
        return self.op(*_as_arrays(args))


class NumpyWrite(_GraphCallable):
    """A write into an array (a[i] = v, a += b, a.fill(v)) done on a copy of its tensor: the result is what the
    array holds after it, which the graph then copies into the array's tensor (a torch write, tracked as any)."""

    def __init__(self, op: Callable[..., Any] | str) -> None:
        self.op = op
        label = op if isinstance(op, str) else op.__name__
        self.__name__ = "ndarray_write_" + label.strip("_")
        self.__qualname__ = f"ndarray.{label}" if isinstance(op, str) else f"operator.{label} on arrays"

    def __call__(self, obj: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        copy = _tnp().ndarray(obj.clone())
        if isinstance(self.op, str):
            getattr(copy, self.op)(*_as_arrays(args), **kwargs)
        else:
            self.op(copy, *_as_arrays(args), **kwargs)
        return copy.tensor


def numpy_attribute(obj: torch.Tensor, name: str) -> Any:
    """ndarray.<name> (T, real, imag) of the array that wraps obj."""
    return _to_tensors(getattr(_tnp().ndarray(obj), name))


_CALLABLES: dict[Any, _GraphCallable] = {}


def numpy_op(kind: str, what: Any, *fixes: Any) -> Any:
    """One callable per (kind, function, fixes): graphs of two compiles name the same object. kind "call": `what`
    is (torch._numpy's function, "numpy.name"); "method": the method's name; "operator": the operator function.
    `fixes`: _NumpyOp's cast_inputs, result_dtype, result_shape."""
    key = (kind, what, *fixes)
    if key not in _CALLABLES:
        if kind == "call":
            _CALLABLES[key] = NumpyCall(what[0], what[1], *fixes)
        else:
            _CALLABLES[key] = (NumpyMethod if kind == "method" else NumpyOperator)(what, *fixes)
    return _CALLABLES[key]


def numpy_write(op: Callable[..., Any] | str) -> NumpyWrite:
    made = _CALLABLES.setdefault(("write", op), NumpyWrite(op))
    assert isinstance(made, NumpyWrite)
    return made


def tensor_of_array(array: Any) -> torch.Tensor:
    """The tensor a graph takes for an ndarray: torch.from_numpy's, but on the storage of the tensor the array's
    memory belongs to where there is one (an array from Tensor.numpy(), or a view of one), so that torch sees
    the two alias (a write through one is seen through the other, whatever the backend)."""
    tensor = torch.from_numpy(array)
    owner = array
    while not isinstance(owner, torch.Tensor) and getattr(owner, "base", None) is not None:
        owner = owner.base
    if not isinstance(owner, torch.Tensor) or owner.device.type != "cpu":
        return tensor
    storage = owner.untyped_storage()
    offset = array.__array_interface__["data"][0] - storage.data_ptr()
    if offset < 0 or offset % array.itemsize or offset + tensor.untyped_storage().nbytes() > storage.nbytes():
        return tensor
    return torch.empty(0, dtype=tensor.dtype).set_(storage, offset // array.itemsize, tensor.shape, tensor.stride())


def to_ndarray(tensor: torch.Tensor) -> Any:
    """A graph's tensor as the numpy array the program holds: it shares the tensor's memory (as Tensor.numpy())."""
    return tensor.detach().numpy()


def to_numpy_scalar(tensor: torch.Tensor) -> Any:
    """A 0-d result as numpy gives it: a numpy scalar (np.float64), not a 0-d array."""
    return tensor.detach().numpy()[()]
