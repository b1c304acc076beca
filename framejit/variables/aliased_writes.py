"""In-place writes whose inputs share memory with the written tensor."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true as known
from torch.utils import _pytree as pytree

from framejit.exc import BreakCode, unsupported
from framejit.op_effects import writes_first_argument


def check_aliased_write(name: str, target: Any, fake_args: list[Any], fake_kwargs: dict[str, Any]) -> None:
    """Break the graph before an in-place op (method `x.add_`, `x += y`, `x[i] = y`, `out=`) that eager might
    refuse or compute in memory order because its written tensor overlaps itself or another tensor argument."""
    out = fake_kwargs.get("out")
    if isinstance(out, torch.Tensor):
        written, others = out, [fake_args, {k: v for k, v in fake_kwargs.items() if k != "out"}]
    elif fake_args and isinstance(fake_args[0], torch.Tensor) and writes_first_argument(target, name, fake_kwargs):
        written, others = fake_args[0], [fake_args[1:], fake_kwargs]
    else:
        return
    if torch._debug_has_internal_overlap(written) == 1:
        unsupported(
            f"{name} writes into a tensor whose elements share memory (eager refuses it)", BreakCode.ALIASED_WRITE
        )
    aliases = [
        t
        for t in pytree.tree_leaves(others)
        if isinstance(t, torch.Tensor) and t is not written and torch._C._is_alias_of(t, written)
    ]
    if not aliases:
        return
    indexed = target is operator.setitem
    if indexed and _basic_index(fake_args[1]):
        with torch.no_grad():
            part = written[fake_args[1]]
        written, indexed = part, False  # x[i] = y writes into the view x[i]
    if any(_may_partly_overlap(written, other, indexed=indexed) for other in aliases):
        unsupported(
            f"{name} writes into a tensor that shares memory with one of its inputs: eager checks the "
            f"overlap when it runs",
            BreakCode.ALIASED_WRITE,
        )


def _basic_index(index: Any) -> bool:
    """Indexing that makes a view (ints, slices, None, ...), not a copy (lists, tensors)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, torch.SymInt, slice, type(None), type(Ellipsis))) for i in items)


def _may_partly_overlap(written: torch.Tensor, other: torch.Tensor, *, indexed: bool) -> bool:
    """False only where both cover one and the same memory (`x.mul_(x)`, which eager allows) or provably
    disjoint memory; `indexed` (x[mask] = y: index_put_ writes some elements of `written`) keeps only the
    disjoint case."""
    if written.numel() == 0 or other.numel() == 0:
        return False
    start_w, end_w = _byte_range(written)
    start_o, end_o = _byte_range(other)
    if known(end_w <= start_o) or known(end_o <= start_w):  # disjoint spans, whatever the strides (no guards:
        return False  # unknown counts as overlapping)
    if (
        not indexed
        and written.dim() == other.dim()
        and known(start_w == start_o)
        and all(known(a == b) for a, b in zip((*written.shape, *written.stride()), (*other.shape, *other.stride())))
    ):
        return False  # the same elements in the same places (`t[..., 0] /= w` writes t[..., 0] back into itself)
    return True  # dense or not: eager refuses a partial overlap, or cannot tell and computes in memory order


def _byte_range(t: torch.Tensor) -> tuple[Any, Any]:
    size = t.element_size()
    start = t.storage_offset() * size
    extent = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
    return start, start + extent * size
