"""Snapshots of what a call produced and left behind (return value, arguments, module globals), taken right
after the call so later mutation cannot change them, and the first difference between two snapshots."""

from __future__ import annotations

import dataclasses
import math
import re
import types
from typing import Any

import torch

_MAX_DEPTH = 8


def snap(value: Any, aliases: dict[int, str] | None = None, depth: int = 0) -> Any:
    """A comparable copy of `value`. Tensors keep dtype, shape, requires_grad and values (detached clones);
    with `aliases` (id -> label of an argument or earlier output), a tensor also records which one it is."""
    if depth > _MAX_DEPTH:
        return ("deep",)
    if isinstance(value, torch.Tensor):
        label = None
        if aliases is not None:
            label = aliases.get(id(value))
            aliases.setdefault(id(value), "an earlier output")
        return ("tensor", value.detach().clone(), value.requires_grad, label)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device)):
        return ("py", type(value).__name__, value)
    if isinstance(value, torch.Size):
        return ("size", tuple(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snap(v, aliases, depth + 1) for v in value])
    if isinstance(value, dict):
        return ("dict", [(repr(k), snap(v, aliases, depth + 1)) for k, v in value.items()])
    if isinstance(value, torch.nn.Module):
        attrs = {k: v for k, v in vars(value).items() if not k.startswith("_")}
        tensors = dict(value.state_dict(keep_vars=True))
        return (
            "module",
            type(value).__name__,
            value.training,
            snap(attrs, None, depth + 1),
            snap(tensors, None, depth + 1),
            [m.training for m in value.modules()],
        )
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)):
        return ("callable", getattr(value, "__qualname__", repr(value)))
    if hasattr(value, "__dict__"):
        return ("object", type(value).__name__, snap(dict(vars(value)), None, depth + 1))
    return ("other", type(value).__name__)


def snap_globals(module: types.ModuleType) -> Any:
    """The program's data globals (not its functions, classes, imports or INPUTS/TRAIN/CALLS/COMPILE)."""
    skip = {"INPUTS", "TRAIN", "CALLS", "COMPILE"}
    data = {
        k: v
        for k, v in vars(module).items()
        if not k.startswith("_")
        and k not in skip
        and not isinstance(v, (types.FunctionType, type, types.ModuleType))
        and not callable(getattr(v, "__wrapped__", None))
    }
    return snap(data)


@dataclasses.dataclass(frozen=True)
class Loosened:
    """Tolerances wider than the defaults, where a backend legitimately computes otherwise: Python floats within
    (rtol, atol) rather than a relative 1e-6 (reordered_tolerance), floating tensors within `tensors` times
    assert_close's tolerances for their dtype or for `at_least` (the call's dtype: a float32 value computed
    from float16 intermediates carries their rounding), whichever are looser, and float16/bfloat16 ones
    `low_precision` times more."""

    floats: tuple[float, float] | None = None
    tensors: float = 1.0
    low_precision: float = 1.0
    at_least: torch.dtype | None = None

    def of(self, dtype: torch.dtype) -> tuple[float, float]:
        """(rtol, atol) for tensors of `dtype`."""
        rtol, atol = max(_TOLERANCES[dtype], _TOLERANCES.get(self.at_least, (0.0, 0.0)))
        scale = self.tensors * (self.low_precision if dtype in _LOW_PRECISION else 1.0)
        return rtol * scale, atol * scale


def diff(a: Any, b: Any, path: str = "", loose: Loosened = Loosened()) -> tuple[str, str] | None:
    """The first difference between two snapshots: (what differs: value/dtype/shape/requires_grad/identity/
    type/length/keys, a description naming the place and both sides), or None when they agree. Python floats
    agree within a relative 1e-6, tensors within assert_close's tolerances for their dtype, unless `loose`."""
    floats = loose.floats
    if a[0] != b[0] or (a[0] in ("py", "object", "module", "other") and a[1] != b[1]):
        return "type", f"{path or 'value'}: eager {_short(a)}, compiled {_short(b)}"
    kind = a[0]
    if kind == "tensor":
        return _diff_tensor(a, b, path, loose)
    if kind == "py":
        if (
            a[2] == b[2]
            or (isinstance(a[2], float) and math.isclose(a[2], b[2], rel_tol=1e-6, abs_tol=1e-9))
            or (isinstance(a[2], float) and math.isnan(a[2]) and math.isnan(b[2]))
        ):
            return None
        if floats and isinstance(a[2], float) and abs(a[2] - b[2]) <= floats[1] + floats[0] * max(abs(a[2]), abs(b[2])):
            return None
        return "value", f"{path or 'value'}: eager {a[2]!r}, compiled {b[2]!r}"
    if kind in ("list", "tuple"):
        if len(a[1]) != len(b[1]):
            return "length", f"{path or 'value'}: eager {kind} of {len(a[1])}, compiled {len(b[1])}"
        return _first(diff(x, y, f"{path}[{i}]", loose) for i, (x, y) in enumerate(zip(a[1], b[1])))
    if kind == "dict":
        if [k for k, _ in a[1]] != [k for k, _ in b[1]]:
            return "keys", f"{path or 'value'}: eager keys {[k for k, _ in a[1]]}, compiled {[k for k, _ in b[1]]}"
        return _first(diff(x, y, f"{path}[{k}]", loose) for (k, x), (_, y) in zip(a[1], b[1]))
    if kind == "module":
        if a[2] != b[2] or a[5] != b[5]:
            return "value", f"{path}.training: eager {a[2]}, compiled {b[2]}"
        return diff(a[3], b[3], path, loose) or diff(a[4], b[4], path + ".state", loose)
    if kind == "object":
        return diff(a[2], b[2], path, loose)
    if a != b:
        return "value", f"{path or 'value'}: eager {a}, compiled {b}"
    return None


# assert_close's default (rtol, atol) per dtype
_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _close_at_the_tensors_scale(ta: torch.Tensor, tb: torch.Tensor, loose: Loosened = Loosened()) -> bool:
    """Equal within assert_close's tolerances relative to the tensor's largest finite magnitude rather than each
    element's: an element that is a small difference of large terms (a gradient summing products near 1e20)
    carries the rounding of those terms, which a backend that orders the sum differently (AOTAutograd's
    decompositions, a fused kernel) rounds differently. Non-finite elements must match exactly."""
    if ta.is_complex() or ta.dtype not in _TOLERANCES:
        return False
    finite = torch.isfinite(ta)
    if (
        not torch.equal(finite, torch.isfinite(tb))
        or not torch.equal(ta[~finite].nan_to_num(0.0), tb[~finite].nan_to_num(0.0))
        or not torch.equal(ta[~finite].isnan(), tb[~finite].isnan())
    ):
        return False
    if not finite.any():
        return True
    rtol, atol = loose.of(ta.dtype)
    a, b = ta[finite].double(), tb[finite].double()
    return bool((a - b).abs().max() <= atol + rtol * a.abs().max())


def _diff_tensor(a: Any, b: Any, path: str, loose: Loosened) -> tuple[str, str] | None:
    ta, tb = a[1], b[1]
    where = path or "tensor"
    if ta.dtype != tb.dtype:
        return "dtype", f"{where}: eager dtype {ta.dtype}, compiled {tb.dtype}"
    if ta.shape != tb.shape:
        return "shape", f"{where}: eager shape {tuple(ta.shape)}, compiled {tuple(tb.shape)}"
    if a[2] != b[2]:
        return "requires_grad", f"{where}: eager requires_grad={a[2]}, compiled requires_grad={b[2]}"
    if ta.is_floating_point() or ta.is_complex():
        try:
            if ta.dtype in _TOLERANCES and loose.of(ta.dtype) != _TOLERANCES[ta.dtype]:
                rtol, atol = loose.of(ta.dtype)
                torch.testing.assert_close(tb, ta, equal_nan=True, check_stride=False, rtol=rtol, atol=atol)
            else:
                torch.testing.assert_close(tb, ta, equal_nan=True, check_stride=False)
        except AssertionError as e:
            if _close_at_the_tensors_scale(ta, tb, loose):
                return None
            return "value", (
                f"{where}: values differ ({_mismatch_summary(str(e))}); eager {_brief(ta)}, compiled {_brief(tb)}"
            )
    elif not torch.equal(ta, tb):
        return "value", f"{where}: eager {_brief(ta)}, compiled {_brief(tb)}"
    if a[3] != b[3]:
        return "identity", f"{where}: eager is {a[3] or 'a new tensor'}, compiled is {b[3] or 'a new tensor'}"
    return None


def _first(items: Any) -> Any:
    for item in items:
        if item is not None:
            return item
    return None


def _brief(t: torch.Tensor) -> str:
    flat = t.reshape(-1)[:6].tolist()
    return f"{flat}{'...' if t.numel() > 6 else ''}"


def _mismatch_summary(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if "Greatest absolute" in line or "Mismatched" in line]
    return "; ".join(lines) or message.splitlines()[0]


def _short(s: Any) -> str:
    if s[0] == "py":
        return f"{s[1]} {s[2]!r}"
    if s[0] == "tensor":
        return "a tensor"
    return f"{s[0]} {s[1]!r}" if len(s) > 1 and isinstance(s[1], str) else str(s[0])


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


# how much wider than assert_close's defaults values may be under a backend with its own kernels (inductor):
# its vectorised exp/log and reordered sums and products differ from eager's by a few units in the last place,
# which chains amplify (`g.exp_()` each call, then a product of rows: 1.9e-6 relative in float32)
REORDERED_SCALE = 4.0


def reordered_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for Python numbers computed in `dtype` by a backend that sums floats in another order
    (inductor): REORDERED_SCALE times assert_close's defaults for the dtype, at least float32's. A `.item()` of
    a float32 sum of terms near 1 moves by about 1e-7 absolute, far more than 1e-6 relative when the terms
    cancel."""
    rtol, atol = max(_TOLERANCES.get(dtype, _TOLERANCES[torch.float32]), _TOLERANCES[torch.float32])
    return rtol * REORDERED_SCALE, atol * REORDERED_SCALE


def printed_alike(a: str, b: str, dtype: torch.dtype) -> bool:
    """Printed output equal but for floating numbers, each within reordered_tolerance(dtype) plus one unit of
    its last printed digit (a value a hair away rounds to the next digit); integers, and all the text between
    numbers, must be equal. For backends that reorder float sums (inductor)."""
    if a == b:
        return True
    if _NUMBER.split(a) != _NUMBER.split(b):
        return False
    rtol, atol = reordered_tolerance(dtype)
    for p, q in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        if p == q:
            continue
        if not any(c in p + q for c in ".eE"):
            return False  # integers (sizes, counts) must be equal
        mantissa, _, exponent = p.lower().partition("e")
        digits = len(mantissa.partition(".")[2])
        unit = 10.0 ** (int(exponent or 0) - digits)
        x, y = float(p), float(q)
        if abs(x - y) > unit + atol + rtol * max(abs(x), abs(y)):
            return False
    return True
