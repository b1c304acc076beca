"""Whether a captured graph writes in place into one of its inputs where autograd is watching.

AOTAutograd turns such a write into a functional graph plus a `copy_` into the input after it runs. Autograd then
sees other history than eager's: a gradient of zeros where eager leaves None (the input's new value is an output
of the whole compiled function, so every input of it gets a gradient), a saved tensor "modified by an inplace
operation" where eager's was not, an output that requires grad where eager's does not. The fuzzer found each of
these. A training graph that does this runs its own torch ops instead (the backends' fallback), so autograd
records exactly what eager records; inference graphs and graphs that write only into their own intermediates
(in-place activations) or into inputs outside autograd (a BatchNorm's running statistics) still compile.
"""
from __future__ import annotations

import operator
from collections import Counter
from typing import Any

import torch
from torch._C._autograd import CreationMeta, _get_creation_meta
from torch.multiprocessing.reductions import StorageWeakRef

from framejit.variables.aliased_writes import writes_first_argument

# ops whose result shares storage with their first argument: a write into it is a write into that argument
_VIEW_METHODS = frozenset({"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "unsqueeze",
                           "squeeze", "expand", "expand_as", "narrow", "select", "flatten", "unflatten", "as_strided",
                           "detach", "unfold", "movedim", "swapaxes", "split", "chunk", "unbind", "diagonal",
                           "__getitem__", "contiguous", "T", "mT", "real", "imag", "data"})
_VIEW_FUNCTIONS = {operator.getitem, torch.transpose, torch.reshape, torch.squeeze, torch.unsqueeze, torch.flatten,
                   torch.narrow, torch.select, torch.permute, torch.split, torch.chunk, torch.unbind, torch.detach,
                   torch.t, torch.movedim, torch.swapaxes, torch.diagonal, torch.as_strided, getattr}


def op_name(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


def writes_into_first_argument(node: torch.fx.Node) -> bool:
    if node.op not in ("call_method", "call_function") or not node.args:
        return False
    return (node.op == "call_function" and "out" in node.kwargs) or \
        writes_first_argument(node.target, op_name(node), node.kwargs)


# where each batch_norm signature takes (running_mean, running_var); argument 5 is `training` in both
_BATCH_NORM_STATS: dict[Any, slice] = {torch.nn.functional.batch_norm: slice(1, 3), torch.batch_norm: slice(3, 5)}


def batch_norm_stats_written(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The running statistics a batch_norm in train mode writes in place (its kernel does not move their version
    counters, and writes_into_first_argument does not see them)."""
    stats = _BATCH_NORM_STATS.get(node.target) if node.op == "call_function" else None
    if stats is None or len(node.args) <= 5 or node.args[5] is not True:
        return []
    return [a for a in node.args[stats] if isinstance(a, torch.fx.Node)]


def statistics_read_then_written(graph: torch.fx.Graph) -> bool:
    """Whether a batch_norm in eval mode saves running statistics that a later train-mode batch_norm of the graph
    writes (without moving their versions): eager's backward of the first then reads the written values."""
    read: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if read.intersection(batch_norm_stats_written(node)):
            return True
        stats = _BATCH_NORM_STATS.get(node.target) if node.op == "call_function" else None
        if stats is not None and len(node.args) > 5 and node.args[5] is False:
            read.update(a for a in node.args[stats] if isinstance(a, torch.fx.Node))
    return False


def is_view(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target in _VIEW_METHODS) or \
        (node.op == "call_function" and node.target in _VIEW_FUNCTIONS)


def grad_modes(graph: torch.fx.Graph) -> dict[torch.fx.Node, bool]:
    """The grad mode each node of `graph` runs in (a graph starts with grad on: callers look at training graphs)."""
    modes, mode = {}, True
    for node in graph.nodes:
        if node.target is torch._C._set_grad_enabled:
            mode = node.args[0]
        modes[node] = mode
    return modes


def creation_meta(view: torch.Tensor) -> CreationMeta:
    """How autograd lets `view` be written in place (DEFAULT for a view without autograd metadata)."""
    try:
        return _get_creation_meta(view)
    except RuntimeError:
        return CreationMeta.DEFAULT


def storage_of(value: Any) -> StorageWeakRef | None:
    """The storage of a (fake) tensor, comparable across tensors: views and aliases share it."""
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return StorageWeakRef(value.untyped_storage())
    return None


def inputs_share_storage(example_inputs: list[Any]) -> bool:
    """Whether two of the inputs are one tensor or share memory (views of one another)."""
    storages = [s for s in map(storage_of, example_inputs) if s is not None]
    return len(set(storages)) != len(storages)


def node_storage(node: torch.fx.Node) -> StorageWeakRef | None:
    """storage_of the value a graph node computes (its fake)."""
    return storage_of(node.meta.get("example_value"))


def grad_fn_of(value: Any) -> Any:
    """`value.grad_fn`, or None for what is no tensor, and for a view autograd refuses to give the history of
    (an output of `unbind` after a write into its base)."""
    try:
        return value.grad_fn if isinstance(value, torch.Tensor) else None
    except RuntimeError:
        return None


def requires_grad(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


EAGER_HISTORY = ("AOTAutograd would record another history than eager for a write in place (into an input autograd "
                 "tracks, or under no_grad into a value that requires grad)")


VIEW_OF_ALIASED_WRITTEN_INPUTS = ("an output is a view of inputs that share memory, one of them written in place: "
                                  "AOTAutograd makes such a view again from the wrong base (torch.compile returns "
                                  "wrong values there)")


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
    written = {node_storage(n.args[0]) for n in gm.graph.nodes
               if writes_into_first_argument(n) and isinstance(n.args[0], torch.fx.Node)} & aliased
    outputs = [n for n in gm.graph.output_node().args[0] if isinstance(n, torch.fx.Node)]
    return any(node_storage(n) in written for n in outputs if n.op != "placeholder")


def why_aot_cannot(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """Why a graph must run as its torch ops rather than through AOTAutograd (the fate's reason), or None."""
    if autograd_needs_eager_ops(gm, example_inputs):
        return EAGER_HISTORY
    if view_of_aliased_written_inputs(gm):
        return VIEW_OF_ALIASED_WRITTEN_INPUTS
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
    return any(not modes[node] and writes_into_first_argument(node) and isinstance(node.args[0], torch.fx.Node)
               and node.args[0].op != "placeholder" and requires_grad(node.args[0].meta.get("example_value"))
               for node in gm.graph.nodes)


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
                requires_grad(a.meta.get("example_value")) or requires_grad(real.get(a)) for a in written):
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
