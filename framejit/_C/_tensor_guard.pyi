"""Types of the C++ guard extension (tensor_guard.cpp, guard_program.cpp), for the type checker."""

from collections.abc import Sequence
from typing_extensions import CapsuleType  # types.CapsuleType from 3.13
from typing import Any, Callable

import torch

def make_spec(
    examples: list[torch.Tensor],
    dynamic_dims: Sequence[Sequence[int]] | None = None,
    dynamic_strides: Sequence[Sequence[int]] | None = None,
    dynamic_offsets: Sequence[int] | None = None,
    /,
) -> CapsuleType:
    """The TENSOR_MATCH spec of these example tensors (every size, stride and storage offset checked but the
    dynamic ones; `dynamic_offsets`: the indices of the examples whose offset is symbolic)."""

def modules_without_hooks(flags: bytes, /, *modules: Any) -> bool:
    """NO_HOOKS of each module (flags: a byte each, 1: forward hook dicts too, 2: no instance `forward`)."""

def make_value_spec(entries: tuple[tuple[int, Any, int, Any, type | None], ...], /) -> CapsuleType:
    """The spec `values_match` reads: (how, name or key, mode, expected, type) each."""

def values_match(spec: CapsuleType, obj: Any, /) -> bool:
    """The value guards of obj's attributes and items, and keys it must not have."""

def make_guard_program(nargs: int, nregs: int, instructions: tuple[tuple[Any, ...], ...], /) -> Callable[..., bool]:
    """A cache entry's guard: guard(fn, *argument_slots) -> bool."""
