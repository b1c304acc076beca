"""Whether a captured graph writes in place into one of its inputs where autograd is watching."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from framejit.op_effects import (
    BATCH_NORM_STATS,
    batch_norm_stats_written,
    grad_modes,
    is_view,
    node_storage,
    requires_grad,
    shared_storage,
    writes_into_first_argument,
)


def statistics_read_then_written(graph: torch.fx.Graph) -> bool:
    """Whether a batch_norm in eval mode saves running statistics that a later train-mode batch_norm of the graph
    writes (without moving their versions): eager's backward of the first then reads the written values."""
    read: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if read.intersection(batch_norm_stats_written(node)):
            return True
        stats = BATCH_NORM_STATS.get(node.target) if node.op == "call_function" else None
        if stats is not None and len(node.args) > 5 and node.args[5] is False:
            read.update(a for a in node.args[stats] if isinstance(a, torch.fx.Node))
    return False


EAGER_HISTORY = (
    "AOTAutograd would record another history than eager for a write in place (into an input autograd "
    "tracks, or under no_grad into a value that requires grad)"
)


VIEW_OF_ALIASED_WRITTEN_INPUTS = (
    "an output is a view of inputs that share memory, one of them written in place: "
    "AOTAutograd makes such a view again from the wrong base (torch.compile returns "
    "wrong values there)"
)


def view_of_aliased_written_inputs(gm: torch.fx.GraphModule) -> bool:
    """True when an output shares memory with two or more graph inputs (`x` and `x[:]`), and the graph writes into
    that memory. AOTAutograd merges such inputs into one base and makes the output view again from it, with the
    strides of another tensor: wrong values for a transposed or strided `x`, an assertion for others (fuzz 2009 of
    seed 6400000)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sharing = Counter(s for p in placeholders if (s := node_storage(p)) is not None)
    aliased = {s for s, count in sharing.items() if count > 1}
    if not aliased:
        return False
    written = {
        node_storage(n.args[0])
        for n in gm.graph.nodes
        if writes_into_first_argument(n) and isinstance(n.args[0], torch.fx.Node)
    } & aliased
    outputs = [n for n in gm.graph.output_node().args[0] if isinstance(n, torch.fx.Node)]
    return any(node_storage(n) in written for n in outputs if n.op != "placeholder")


SUBCLASS_WITH_SHARED_INNER_TENSORS = (
    "it writes in place while a tensor subclass input has inner tensors that share memory (TwoTensor(x, x)): "
    "AOTAutograd asserts on the second write"
)


def writes_subclass_with_shared_inner_tensors(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """True when an input is a wrapper subclass two of whose inner tensors share memory and the graph writes in
    place (into anything: a write into the subclass reaches each inner tensor)."""
    shared = any(
        is_traceable_wrapper_subclass(x) and shared_storage([getattr(x, a) for a in x.__tensor_flatten__()[0]])
        for x in example_inputs
    )
    return shared and any(writes_into_first_argument(n) for n in gm.graph.nodes)


def why_aot_cannot(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """Why a graph must run as its torch ops rather than through AOTAutograd (the fate's reason), or None."""
    if autograd_needs_eager_ops(gm, example_inputs):
        return EAGER_HISTORY
    if view_of_aliased_written_inputs(gm):
        return VIEW_OF_ALIASED_WRITTEN_INPUTS
    if writes_subclass_with_shared_inner_tensors(gm, example_inputs):
        return SUBCLASS_WITH_SHARED_INNER_TENSORS
    return None


def autograd_needs_eager_ops(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """True when AOTAutograd would record another autograd history than eager's ops do, so that a training graph
    must run as its torch ops: it writes into an input autograd tracks (`mutates_input_under_autograd`), or writes,
    with grad mode off, into a computed value that requires grad (`writes_tracked_value_without_grad`)."""
    return mutates_input_under_autograd(gm, example_inputs) or writes_tracked_value_without_grad(gm)


def writes_tracked_value_without_grad(gm: torch.fx.GraphModule) -> bool:
    """True when grad mode is on and the graph writes in place, inside a `no_grad` block, into a value it computed
    that requires grad. Eager's write keeps the value's history (`grad_fn` stays); AOTAutograd's functional
    graph computes the new value without grad, so the output comes back detached (fuzz 6674 of seed 2100000:
    `r7 = y / y * 0.5` then `r7 += ...` under `set_grad_enabled(False)`; torch.compile loses `y.grad` too)."""
    if not torch.is_grad_enabled():
        return False
    modes = grad_modes(gm.graph)
    return any(
        not modes[node]
        and writes_into_first_argument(node)
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].op != "placeholder"
        and requires_grad(node.args[0].meta.get("example_value"))
        for node in gm.graph.nodes
    )


def mutates_input_under_autograd(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """True when grad mode is on and the graph writes in place into an input (or a view of one) that requires
    grad, writes a value that requires grad into any input, or writes into an input that a computation requiring
    grad also reads, directly or through values computed from it (AOTAutograd's partitioner may recompute that
    read in backward, after the write: wrong gradients; pytorch/pytorch#197039)."""
    if not torch.is_grad_enabled():
        return False
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    real = dict(zip(placeholders, example_inputs))
    # which input each value shares memory with: views, and ops that may return their input (`.to()` of the
    # dtype it has, `contiguous()`), as the trace's fake tensors share storage like the real ones
    owner = {s: p for p in reversed(placeholders) if (s := node_storage(p)) is not None}
    base: dict[torch.fx.Node, torch.fx.Node] = {p: p for p in placeholders}
    written_inputs: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if (s := node_storage(node)) in owner:
            base[node] = owner[s]
        elif is_view(node) and node.args and node.args[0] in base:
            base[node] = base[node.args[0]]
        first = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if first is None or first not in base or not writes_into_first_argument(node):
            continue
        written = [a for a in (*node.args[1:], *node.kwargs.values()) if isinstance(a, torch.fx.Node)]
        if requires_grad(real.get(base[first])) or any(
            requires_grad(a.meta.get("example_value")) or requires_grad(real.get(a)) for a in written
        ):
            return True
        written_inputs.add(base[first])
    # values computed from a written input (its views, `g[None].cos()`): the partitioner may recompute any of
    # them in backward, so one read by a computation requiring grad is as much at risk as the input itself
    tainted = set(written_inputs)
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output") or writes_into_first_argument(node):
            continue
        if any(base.get(a, a) in tainted for a in node.all_input_nodes):
            if not is_view(node) and requires_grad(node.meta.get("example_value")):
                return True
            tainted.add(node)
    return False
