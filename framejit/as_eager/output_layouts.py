"""Outputs laid out in memory as eager's ops lay them out."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from framejit.op_effects import storage_of
from framejit.shapes import hint


def _strides_in_order(sizes: Sequence[int], order: Sequence[int]) -> list[int]:
    """The strides of a dense tensor of `sizes` whose dims lie in memory in `order`, outermost first."""
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(sizes[d], 1)
    return strides


def _same_where_sized(sizes: Sequence[int], strides: Sequence[int], others: Sequence[int]) -> bool:
    """Whether two layouts agree on every dim of more than one element (a dim of one has no real stride)."""
    return all(n <= 1 or s == o for n, s, o in zip(sizes, strides, others))


def dim_order(fake: torch.Tensor) -> tuple[int, ...] | None:
    """The order of `fake`'s dims in memory, outermost first, where it is dense but not contiguous; else None."""
    sizes = [hint(n) for n in fake.shape]
    strides = [hint(s) for s in fake.stride()]
    if None in sizes or None in strides or fake.layout != torch.strided:
        return None
    order = sorted(range(len(sizes)), key=lambda d: -strides[d])  # (stable: dims of one stay in dim order)
    if not _same_where_sized(sizes, strides, _strides_in_order(sizes, order)):
        return None  # not dense: no copy of eager's layout to make
    if _same_where_sized(sizes, strides, _strides_in_order(sizes, range(len(sizes)))):
        return None
    return tuple(order)


def eager_output_layouts(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn` (a backend's compilation), with the outputs above laid out as eager's; `graph_fn` itself where
    eager lays out each output contiguously (checking costs nothing then)."""
    fakes = [
        n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None for n in gm.graph.output_node().args[0]
    ]
    storages = [s for v in [*example_inputs, *fakes] if (s := storage_of(v)) is not None]
    orders = [
        (i, order)
        for i, v in enumerate(fakes)
        if isinstance(v, torch.Tensor)
        and not v._is_view()
        and storages.count(storage_of(v)) == 1
        and (order := dim_order(v)) is not None
    ]
    if not orders:
        return graph_fn

    def run_in_eager_layouts(*args: Any) -> Any:
        results = graph_fn(*args)
        for i, order in orders:
            out = results[i]
            if isinstance(out, torch.Tensor) and not _same_where_sized(
                out.shape, out.stride(), _strides_in_order(out.shape, order)
            ):
                results = list(results)
                # (differentiable: the copy's gradient goes to the output as it came)
                results[i] = torch.empty_permuted(out.shape, order, dtype=out.dtype, device=out.device).copy_(out)
        return results

    return run_in_eager_layouts
