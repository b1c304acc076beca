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


class NumpyCall(_GraphCallable):
    """numpy.<fn>(...) as torch._numpy's fn: its array-likes may be tensors (its normalizations take them)."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn = fn
        self.__name__ = name.replace(".", "_")
        self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _to_tensors(self.fn(*args, **kwargs))


class NumpyMethod(_GraphCallable):
    """ndarray.<name>(...) on the array that wraps the first argument."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = "ndarray_" + name.strip("_")
        self.__qualname__ = f"ndarray.{name}"

    def __call__(self, obj: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return _to_tensors(getattr(_tnp().ndarray(obj), self.name)(*_as_arrays(args), **kwargs))


class NumpyOperator(_GraphCallable):
    """An `operator` function (add, lt, getitem, neg...) on arrays: numpy's dtype promotion and broadcasting."""

    def __init__(self, op: Callable[..., Any]) -> None:
        self.op = op
        self.__name__ = "ndarray_op_" + op.__name__.strip("_")
        self.__qualname__ = f"operator.{op.__name__} on arrays"

    def __call__(self, *args: Any) -> Any:
        return _to_tensors(self.op(*_as_arrays(args)))


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


def numpy_call(fn: Callable[..., Any], name: str) -> NumpyCall:
    """One callable per function (graphs of two compiles name the same object)."""
    made = _CALLABLES.setdefault(fn, NumpyCall(fn, name))
    assert isinstance(made, NumpyCall)
    return made


def numpy_method(name: str) -> NumpyMethod:
    made = _CALLABLES.setdefault(("method", name), NumpyMethod(name))
    assert isinstance(made, NumpyMethod)
    return made


def numpy_operator(op: Callable[..., Any]) -> NumpyOperator:
    made = _CALLABLES.setdefault(("operator", op), NumpyOperator(op))
    assert isinstance(made, NumpyOperator)
    return made


def numpy_write(op: Callable[..., Any] | str) -> NumpyWrite:
    made = _CALLABLES.setdefault(("write", op), NumpyWrite(op))
    assert isinstance(made, NumpyWrite)
    return made


def to_ndarray(tensor: torch.Tensor) -> Any:
    """A graph's tensor as the numpy array the program holds: it shares the tensor's memory (as Tensor.numpy())."""
    return tensor.detach().numpy()


def to_numpy_scalar(tensor: torch.Tensor) -> Any:
    """A 0-d result as numpy gives it: a numpy scalar (np.float64), not a 0-d array."""
    return tensor.detach().numpy()[()]
