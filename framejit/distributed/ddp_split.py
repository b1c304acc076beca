"""A graph traced inside DistributedDataParallel's forward, split at DDP's gradient buckets.

DDP all-reduces a bucket of gradients as soon as every gradient in it is ready. A graph compiled whole is one
autograd node: every parameter's gradient appears when its backward ends, so every bucket's all-reduce waits for the
whole backward. Split into pieces, one per bucket, the backward is one node per piece, and the gradients of the last
layers (DDP's first bucket) are ready, and reduced, while the backward of the earlier layers still runs.

The buckets are made as DDP makes them: parameters in reverse order of use, DDP's first bucket capped smaller (its
`first_bucket_bytes_cap`), the others at `bucket_bytes_cap` (or the per-bucket caps the user gave). Each piece is
compiled by the user's backend; a piece's inputs that earlier pieces compute are handed to it as the trace's fake
tensors (symbolic where the trace's were), its other inputs as the graph's own example inputs.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from framejit import config

Backend = Callable[[torch.fx.GraphModule, list[Any]], Any]


@functools.cache
def _ddp_class() -> Any:
    """DistributedDataParallel, or None where torch.distributed is not built (looked up once: the guard below
    asks at every call)."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel


def active_ddp_module() -> Any:
    """The DistributedDataParallel whose forward is running (it marks itself while it calls its module), or None."""
    ddp_class = _ddp_class()
    return None if ddp_class is None else ddp_class._get_active_ddp_module()


def active_bucket_caps() -> tuple[int, tuple[int, ...]] | None:
    """The bucket caps a graph traced now is split at, or None (not inside DDP's forward, or config.optimize_ddp
    off): what the cache entries of a process with a process group are guarded on, so that a graph compiled whole
    is not reused inside DDP, nor one split at other caps."""
    ddp = active_ddp_module() if config.optimize_ddp else None
    if ddp is None:
        return None
    first, caps = bucket_caps(ddp)
    return first, tuple(caps)


@dataclasses.dataclass
class Bucket:
    """Graph nodes of one piece (in reverse order while it is built) and the parameters whose bytes fill it."""

    nodes: list[torch.fx.Node] = dataclasses.field(default_factory=list)
    params: list[str] = dataclasses.field(default_factory=list)
    size: int = 0


def bucket_caps(ddp: Any) -> tuple[int, list[int]]:
    """(the first bucket's cap, the caps of the next buckets: the last one repeats) of a DDP module."""
    config = getattr(ddp, "_bucket_config", None)
    cap = int(getattr(config, "bucket_bytes_cap", getattr(ddp, "bucket_bytes_cap", 25 * 1024 * 1024)))
    first = int(getattr(config, "first_bucket_bytes_cap", cap))
    per_bucket = [int(c) for c in getattr(config, "per_bucket_bytes_caps", ())]
    if per_bucket:
        return per_bucket[0], per_bucket[1:] or [per_bucket[0]]
    return first, [cap]


def _is_bucketed(value: Any) -> bool:
    """A parameter DDP reduces: it needs grad and DDP was not told to ignore it."""
    return isinstance(value, torch.nn.Parameter) and value.requires_grad and not getattr(value, "_ddp_ignored", False)


def buckets_of(gm: torch.fx.GraphModule, example_inputs: list[Any], first_cap: int, caps: list[int]) -> list[Bucket]:
    """The graph's nodes in pieces, in forward order: walking back from the output, a bucket is closed once its
    parameters' bytes reach its cap, and a piece that holds no parameter joins the next one."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {node: value for node, value in zip(placeholders, example_inputs) if _is_bucketed(value)}
    counted: set[torch.fx.Node] = set()
    buckets = [Bucket()]  # buckets[0] is the one being filled (the earliest in forward order so far)
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        cap = first_cap if len(buckets) == 1 else caps[min(len(buckets) - 2, len(caps) - 1)]
        if buckets[0].size >= cap:
            buckets.insert(0, Bucket())
        for arg in node.all_input_nodes:
            if arg in params and arg not in counted:
                counted.add(arg)
                buckets[0].size += params[arg].untyped_storage().nbytes()
                buckets[0].params.append(arg.name)
        buckets[0].nodes.append(node)
    merged: list[Bucket] = []
    for bucket in buckets:  # forward order; a piece without parameters goes with the piece after it
        if merged and not merged[-1].params:
            bucket.nodes.extend(merged.pop().nodes)
        merged.append(bucket)
    if len(merged) > 1 and not merged[-1].params:
        merged[-2].nodes.extend(merged.pop().nodes)
    return merged


def compile_split(
    gm: torch.fx.GraphModule, example_inputs: list[Any], backend: Backend, ddp: Any
) -> tuple[Callable[..., Any] | None, list[Bucket]]:
    """Compile `gm` as one piece per DDP bucket with `backend`; (the callable running the pieces in order, the
    buckets). With one bucket, (None, buckets): the caller compiles the graph whole."""
    first_cap, caps = bucket_caps(ddp)
    buckets = buckets_of(gm, example_inputs, first_cap, caps)
    if len(buckets) <= 1:
        return None, buckets
    piece_of = {node: i for i, bucket in enumerate(buckets) for node in bucket.nodes}
    known = {node.name: value for node, value in zip(gm.graph.find_nodes(op="placeholder"), example_inputs)}
    faked = {node.name: node.meta.pop("example_value", None) for node in gm.graph.nodes}
    try:  # (without example values: split_module would look for graph inputs that are the sizes' symbols, which
        # framejit's graphs do not have: they compute sizes from the tensors)
        split = split_module(
            gm,
            None,
            lambda node: piece_of[node],
            keep_original_order=True,
            keep_original_node_name=True,
            tuple_return=True,
        )
    finally:
        for node in gm.graph.nodes:
            node.meta["example_value"] = faked[node.name]
    for node in split.graph.find_nodes(op="call_module"):
        piece = split.get_submodule(node.target)
        assert isinstance(piece, torch.fx.GraphModule)
        for inner in piece.graph.nodes:
            if inner.name in faked:
                inner.meta["example_value"] = faked[inner.name]
        inputs = [known[p.name] if p.name in known else faked[p.name] for p in piece.graph.find_nodes(op="placeholder")]
        compiled = backend(piece, inputs)
        delattr(split, node.target)
        setattr(split, node.target, piece.forward if compiled is None else compiled)
    return split, buckets
