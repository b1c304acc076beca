"""Python numbers that depend on symbolic sizes: `x.shape[0]`, `x.size(-1) // heads`, `x.numel()` of a tensor whose
dims are dynamic. Each is an FX node whose example value is a torch.SymInt (SymFloat, SymBool) of the graph's shape
environment, so size arithmetic goes into the graph and the compiled code works for every size its guards admit.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import torch
import torch.fx

from framejit.contracts import Tracer
from framejit.shapes import SYMBOLIC_TYPES, is_symbolic
from framejit.variables.base import Variable

_PY_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}  # converting to one specialises


def plain_number(value: Any) -> Any:
    """A symbolic value whose expression is a number, as that Python number; anything else unchanged."""
    if isinstance(value, SYMBOLIC_TYPES) and value.node.expr.is_number:
        return _PY_TYPES[type(value)](value)
    return value


def has_symbolic(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(has_symbolic(v) for v in value)
    return is_symbolic(value)


class SymbolicVariable(Variable):
    def __init__(self, node: torch.fx.Node, value: Any, source: Any = None, numpy_type: type | None = None) -> None:
        self.node = node
        self.value = value
        self.source = source  # an int argument made symbolic is reloaded from where it was read
        # the numpy scalar type the program holds (an np.int64 argument, `n / 2` of one: np.float64); the graph
        # computes with the Python number, and the Python side gets it back as this type
        self.numpy_type = numpy_type

    def python_type(self) -> type:
        return self.numpy_type or _PY_TYPES[type(self.value)]

    def as_node_arg(self) -> Any:
        return self.node

    def as_fake(self) -> Any:
        return self.value

    def as_python_constant(self) -> Any:
        return self._as_held(self.value)  # specialises: the shape environment guards the value

    def example(self) -> Any:
        """The number this value has in the call being traced (without a guard), as the program holds it; None
        where its symbols have no hint."""
        hint = self.value.node.hint
        return None if hint is None else self._as_held(hint)

    def _as_held(self, number: Any) -> Any:
        """`number` as the Python type of this value, or as its numpy type where the program holds one."""
        number = _PY_TYPES[type(self.value)](number)
        return number if self.numpy_type is None else self.numpy_type(number)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)  # guards the comparison (or, for an int, that it is nonzero)

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        """A Python number's attributes: `real`, an int's `numerator` and `conjugate()` are the number itself,
        `imag` 0 and an int's `denominator` 1, for every value; another public attribute or method
        (`is_integer()`, `as_integer_ratio()`, `bit_length()`, `hex()`) is read on the value, which specialises
        (the shape environment guards it)."""
        from framejit.variables.constant import ConstantVariable
        from framejit.variables.containers import BoundMethod

        py_type = self.python_type()
        if self.numpy_type is not None or py_type not in (int, float) or not _public_attr(py_type, name):
            return super().var_getattr(tx, name)
        if name == "real" or (name == "numerator" and py_type is int):
            return self
        if name in ("imag", "denominator"):
            return ConstantVariable(py_type(0) if name == "imag" else 1)
        if callable(getattr(py_type, name)):
            return BoundMethod(self, name)
        return tx.wrap_constant(getattr(self.as_python_constant(), name))

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        op = getattr(operator, name.strip("_"), None) if name.startswith("__") else None
        if op is not None and not kwargs:
            from framejit.variables.operators import call_operator

            return call_operator(tx, op, [self, *args])
        if name == "conjugate" and not args and not kwargs and self.numpy_type is None:
            return self
        if self.numpy_type is None and _public_attr(self.python_type(), name):  # specialised: int/float's are pure
            values = [a.as_python_constant() for a in args]
            named = {k: v.as_python_constant() for k, v in kwargs.items()}
            return tx.wrap_constant(getattr(self.as_python_constant(), name)(*values, **named))
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self) -> str:
        return f"SymbolicVariable({self.node.name}: {self.value})"


def _public_attr(py_type: type, name: str) -> bool:
    """Whether `name` is a public attribute of int or float (their methods compute, with no effect)."""
    return py_type in (int, float) and not name.startswith("_") and hasattr(py_type, name)


def numpy_result_type(fn: Any, args: Sequence[Variable]) -> type | None:
    """The numpy scalar type of `fn(*args)` in eager, where an operand is a numpy number the trace made symbolic
    (np.int64 / 2 is np.float64, np.int64 + 1 np.int64, np.int64 > 2 np.bool_); numpy decides it, on the
    operands' values in this call. None for a result that is no numpy scalar (one of the operands is a tensor)."""
    if not any(isinstance(a, SymbolicVariable) and a.numpy_type is not None for a in args):
        return None
    examples = []
    for a in args:
        example = (
            a.example()
            if isinstance(a, SymbolicVariable)
            else a.as_python_constant()
            if a.is_python_constant()
            else None
        )
        if example is None:
            return None
        examples.append(example)
    import numpy

    with numpy.errstate(all="ignore"):
        try:
            result = fn(*examples)
        except Exception:  # noqa: BLE001 - the graph's op raises it (or not) as it will
            return None
    return type(result) if isinstance(result, numpy.generic) else None
