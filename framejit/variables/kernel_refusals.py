"""Dtypes eager's kernels refuse where the trace's meta kernels accept them."""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from framejit.exc import BreakCode, unsupported
from framejit.shapes import SYMBOLIC_TYPES, hint

_FLOATING = frozenset({torch.float32, torch.float64})
_SMALL = 1 << 14  # elements in all, up to which an op is checked (its kernel runs once more on them)
# what runs here: torch's tensor ops (never collectives, nor anything else with effects outside its tensors)
_TORCH_MODULES = frozenset(
    {
        "torch",
        "torch.functional",
        "torch.nn.functional",
        "torch._C._nn",
        "torch._C._linalg",
        "torch._C._special",
        "torch._C._fft",
        "torch.special",
        "torch.linalg",
        "torch.fft",
        "torch._C._VariableFunctions",
    }
)
_OPERATORS = frozenset(f for f in vars(operator).values() if callable(f))
_UNKNOWN = object()


def check_eager_accepts_dtypes(
    name: str, op: str, target: Any, fake_args: list[Any], fake_kwargs: dict[str, Any], leaves: list[Any]
) -> None:
    """Break the graph before an op whose (fake-accepted) dtypes eager's kernel refuses (see the module);
    `leaves` are those of (fake_args, fake_kwargs)."""
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    one_floating = {t.dtype for t in tensors} <= _FLOATING and len({t.dtype for t in tensors}) == 1
    if not tensors or one_floating and not any(type(a) is bool for a in fake_args):  # (flags are mostly keywords)
        return
    if not _plain_torch_op(op, target) or any(t.device.type != "cpu" or t.layout != torch.strided for t in tensors):
        return
    # symbolic sizes and numbers at this call's values (their hints: reading one adds no guard, where a real op on
    # a symbol would pin it to its value); an unbacked one has none
    shapes = [[_concrete(n) for n in t.shape] for t in tensors]
    args, kwargs = pytree.tree_map(
        lambda x: x if isinstance(x, torch.Tensor) else _concrete(x), (fake_args, fake_kwargs)
    )
    if (
        any(x is _UNKNOWN for x in pytree.tree_leaves((shapes, args, kwargs)))
        or sum(math.prod(shape) for shape in shapes) > _SMALL
    ):
        return
    sizes = {id(t): shape for t, shape in zip(tensors, shapes)}
    error = _run(op, target, args, kwargs, sizes, _own_dtype)
    if error is None or "ZeroDivisionError" in str(error):  # (an integer divided by the sample's 0)
        return
    if (
        _run(op, target, args, kwargs, sizes, _float) is None
        or _run(op, target, args, kwargs, sizes, _float_but_indices) is None
    ):
        unsupported(
            f"{name}: eager's kernel refuses these dtypes ({type(error).__name__}: {error})", BreakCode.OP_ERROR
        )


def _concrete(value: Any) -> Any:
    """This call's value of a symbolic number (also inside a slice), _UNKNOWN for an unbacked one."""
    if isinstance(value, SYMBOLIC_TYPES):
        number = hint(value)
        return _UNKNOWN if number is None else number
    if isinstance(value, slice):
        parts = [_concrete(x) for x in (value.start, value.stop, value.step)]
        return _UNKNOWN if any(x is _UNKNOWN for x in parts) else slice(*parts)
    return value


def _plain_torch_op(op: str, target: Any) -> bool:
    if op == "call_method":
        return isinstance(target, str)
    return getattr(target, "__module__", None) in _TORCH_MODULES or target in _OPERATORS


def _own_dtype(t: torch.Tensor) -> torch.dtype:
    return t.dtype


def _float(t: torch.Tensor) -> torch.dtype:
    return torch.float32


def _float_but_indices(t: torch.Tensor) -> torch.dtype:
    return t.dtype if not t.dtype.is_floating_point and t.dtype is not torch.bool else torch.float32


def _run(
    op: str,
    target: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    sizes: dict[int, list[int]],
    dtype: Callable[[torch.Tensor], torch.dtype],
) -> Exception | None:
    """The error the op raises on fresh real tensors in the dtypes `dtype` gives, if any."""

    def sample(t: torch.Tensor) -> torch.Tensor:
        # (integers 0: an index, within any dim; floats and bools 1)
        fill = torch.zeros if not (t.dtype.is_floating_point or t.dtype is torch.bool) else torch.ones
        return fill(sizes[id(t)], dtype=dtype(t))

    real_args, real_kwargs = pytree.tree_map_only(torch.Tensor, sample, (args, kwargs))
    if dtype is not _own_dtype:
        real_args, real_kwargs = pytree.tree_map_only(bool, int, (real_args, real_kwargs))
    rng = torch.random.get_rng_state()  # (an op may draw random numbers: dropout in scaled_dot_product_attention)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if op == "call_method":
                getattr(real_args[0], target)(*real_args[1:], **real_kwargs)
            else:
                target(*real_args, **real_kwargs)
    except Exception as e:  # noqa: BLE001 - whatever eager's kernel raises
        return e
    finally:
        torch.random.set_rng_state(rng)
    return None
