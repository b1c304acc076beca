"""Gradients eager leaves None: an input whose every dependent graph output gets no gradient."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._C._autograd import CreationMeta
from torch.multiprocessing.reductions import StorageWeakRef

from framejit.as_eager.input_writes import autograd_needs_eager_ops
from framejit.contracts import AUTOGRAD_FUNCTION_APPLY_META, AUTOGRAD_FUNCTION_INPUTS_META
from framejit.op_effects import (
    AUTOCAST_STATE_TARGETS,
    creation_meta,
    grad_modes,
    is_view,
    node_storage,
    requires_grad,
    writes_into_first_argument,
)


def output_dependencies(graph: torch.fx.Graph) -> tuple[list[frozenset[int]], frozenset[int]]:
    """For each output of `graph`, the positions of the inputs it may depend on; and the inputs that what the
    graph writes into its inputs may depend on (an input written in place carries gradients out too)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    deps: dict[torch.fx.Node, frozenset[int]] = {p: frozenset([i]) for i, p in enumerate(placeholders)}
    written: dict[StorageWeakRef, frozenset[int]] = {}  # storage -> inputs written into it in place so far
    grad_on = True  # (graphs are gated only when compiled with grad on)
    for node in graph.nodes:
        if node.target is torch._C._set_grad_enabled:
            grad_on = node.args[0]
        if node.op in ("placeholder", "output"):
            continue
        if not grad_on or _detaches(node) or _no_grad_value(node):  # no gradient flows through what it makes
            found = frozenset()
        elif AUTOGRAD_FUNCTION_APPLY_META in node.meta:  # a Function's inputs are its tensor arguments alone
            inputs = [node.args[i] for i in node.meta.get(AUTOGRAD_FUNCTION_INPUTS_META, range(len(node.args)))]
            found = frozenset().union(
                *(deps.get(a, frozenset()) for a in (*inputs, *node.kwargs.values()) if isinstance(a, torch.fx.Node))
            )
        else:
            # what it reads, and the writes made before it into the memory it reads (a value computed before a
            # write does not depend on it; a view made before it does, when read after it: the output's line)
            found = frozenset().union(
                *(deps.get(a, frozenset()) for a in node.all_input_nodes),
                *(written.get(node_storage(n), frozenset()) for n in (node, *node.all_input_nodes)),
            )
        deps[node] = found
        if writes_into_first_argument(node) and isinstance(node.args[0], torch.fx.Node):
            target = node_storage(node.args[0])
            if target is not None:
                written[target] = written.get(target, frozenset()) | found
    out = graph.output_node()
    result = [
        deps.get(value, frozenset()) | written.get(node_storage(value), frozenset())
        if isinstance(value, torch.fx.Node)
        else frozenset()
        for value in out.args[0]
    ]
    into_inputs = {node_storage(p) for p in placeholders} - {None}
    return result, frozenset().union(*(deps for storage, deps in written.items() if storage in into_inputs))


def _detaches(node: torch.fx.Node) -> bool:
    return node.target in ("detach", torch.detach)


def _no_grad_value(node: torch.fx.Node) -> bool:
    """A tensor that does not require grad carries no gradient back (`t.new_ones(4)`, a comparison), even where
    the data flow passes through it."""
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor) and not value.requires_grad


class _Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, received: set[int], outputs: frozenset[int]) -> torch.Tensor:
        ctx.received, ctx.outputs = received, outputs
        # no gradient at all reaches it where the graph's node gives none (a torch.autograd.Function's backward
        # returning None, run as its torch ops): it passes None on, not zeros
        ctx.set_materialize_grads(False)
        # the same storage and version counter, and not a view: a view made in a custom Function may not be
        # written in place (nor may its base), where eager's input may
        return x.detach()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor | None) -> tuple[torch.Tensor | None, None, None]:
        return (grad if grad is not None and not ctx.received.isdisjoint(ctx.outputs) else None), None, None


def gating_unused_grads(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn`, giving None as the gradient of each input whose dependent outputs all got none (eager's
    answer), or `graph_fn` itself where no input could need it."""
    if (
        not torch.is_grad_enabled()
        or not any(requires_grad(v) for v in example_inputs)
        or autograd_needs_eager_ops(gm, example_inputs)
    ):
        return graph_fn  # an inference graph; or one run as eager ops (input_writes.py), exact already
    graph = gm.graph
    deps, feed_input_writes = output_dependencies(graph)
    out = graph.output_node()
    differentiable = frozenset(
        o
        for o, node in enumerate(out.args[0])
        if isinstance(node, torch.fx.Node) and requires_grad(node.meta.get("example_value"))
    )
    if not differentiable:
        return graph_fn
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    # an output that is a view of an input is made again from the input outside the graph's node (AOTAutograd),
    # and an input written in place carries gradients out of the graph: the gradients of the inputs they depend
    # on pass no node the hooks watch, so those inputs are not gated, unless their views can be made again from
    # the input as it was before the gate (`_input_views`): the views' gradients then bypass the gate, as
    # eager's views' bypass the ops computing the other outputs (fuzz 3334 of seed 2100000)
    views = _input_views(graph, out, placeholders, example_inputs, feed_input_writes)
    aliased = {
        node_storage(n) for o, n in enumerate(out.args[0]) if isinstance(n, torch.fx.Node) and o not in views
    } - {None}
    gates = {}
    for i, value in enumerate(example_inputs):
        if requires_grad(value) and node_storage(placeholders[i]) not in aliased and i not in feed_input_writes:
            feeds = frozenset(o for o in differentiable if i in deps[o] and o not in views)
            # an input that feeds every output needs a gate too: a gate of a later graph, giving None, makes
            # autograd call this graph's backward with no gradient at all, and that gives zeros. Module
            # parameters (the many inputs of a training graph) skip it, for speed: a graph whose outputs all
            # reach the loss only through a later graph's gate still gives them zeros. An input feeding no
            # output the graph's node computes is gated too: AOTAutograd may give it zeros.
            if feeds != differentiable or not isinstance(value, torch.nn.Parameter):
                gates[i] = feeds
    views = {o: view for o, view in views.items() if view[0] in gates}
    if not gates:
        return graph_fn
    watched = sorted(frozenset().union(*gates.values()))
    # autocast caches its casts of leaf tensors (weights) across ops: a gated leaf is no leaf, its casts are
    # made again per op, and the gradients of those casts add up in float32 where eager's add up in the cast's
    # dtype. Under autocast leaves pass ungated.
    autocast_inside = any(n.target in AUTOCAST_STATE_TARGETS for n in graph.nodes)

    def run(*args: Any) -> Any:
        if not torch.is_grad_enabled():
            return graph_fn(*args)
        received: set[int] = set()
        originals, args = args, list(args)
        leaves_too = not autocast_inside and not torch._C._is_any_autocast_enabled()
        for i, feeds in gates.items():
            if args[i].requires_grad and (leaves_too or not args[i].is_leaf):
                args[i] = _Gate.apply(args[i], received, feeds)
        outputs = graph_fn(*args)
        if views:
            outputs = _views_of_ungated_inputs(outputs, views, args, originals)
        for o in watched:
            output = outputs[o]
            node = getattr(output, "grad_fn", None)  # (a backend may return other values)
            if node is not None:
                # on the node that made the output, not the tensor: a later in-place write gives the tensor another
                # node, and the gradient still reaches this one (the node calls it with None for outputs that got
                # no gradient)
                node.register_prehook(_noting(received, o, output.output_nr))
                # ... except for a view: a write into it rebases it on its base, whose node the gradient then
                # reaches instead of the view's (fuzz 7275: `t = cat(...).T`, `t[i] = ...` after a break)
                base = output._base
                if base is not None and base.grad_fn is not None:
                    base.grad_fn.register_prehook(_noting(received, o, base.output_nr))
        return outputs

    return run


def _noting(received: set[int], o: int, nr: int) -> Callable[[tuple], None]:
    def note(grads: tuple) -> None:
        if grads[nr] is not None:
            received.add(o)

    return note


# (input position, the view ops from the input to the output, or None to make it with `as_strided`)
_InputView = tuple[int, "list[torch.fx.Node] | None"]


def _input_views(
    graph: torch.fx.Graph,
    out: torch.fx.Node,
    placeholders: list[torch.fx.Node],
    example_inputs: list[Any],
    written_inputs: frozenset[int],
) -> dict[int, _InputView]:
    """The outputs that are views of an input (one no other input shares memory with, and that the graph does
    not write), made by view ops run with grad on, each of which autograd lets the program write in place:
    output position -> how to make it again from the input."""
    storages = [node_storage(p) for p in placeholders]
    found: dict[int, _InputView] = {}
    modes = grad_modes(graph)
    for o, node in enumerate(out.args[0]):
        if not isinstance(node, torch.fx.Node) or (storage := node_storage(node)) is None:
            continue
        sharing = [i for i, s in enumerate(storages) if s is not None and s == storage]
        if len(sharing) != 1:
            continue
        i = sharing[0]
        if i in written_inputs or not requires_grad(example_inputs[i]):
            continue
        chain: list[torch.fx.Node] = []
        while node is not placeholders[i]:
            fake = node.meta.get("example_value")
            if not (
                is_view(node)
                and modes[node]
                and isinstance(node.args[0], torch.fx.Node)
                and isinstance(fake, torch.Tensor)
                and fake._is_view()
                and fake.requires_grad
                and creation_meta(fake) == CreationMeta.DEFAULT
            ):
                break
            chain.append(node)
            node = node.args[0]
        else:
            if chain:
                found[o] = (i, None if _takes_nodes(chain) else chain[::-1])
    return found


def _takes_nodes(chain: list[torch.fx.Node]) -> bool:
    """Whether a view op of `chain` takes a graph value besides the view's base (a symbolic size)."""
    return any(arg is not n.args[0] for n in chain for arg in n.all_input_nodes)


def _views_of_ungated_inputs(
    outputs: Any, views: dict[int, _InputView], args: list[Any], originals: tuple[Any, ...]
) -> Any:
    """`outputs`, with each view of a gated input made again from the input the program passed, in grad mode as
    the graph made it (the graph may end inside a `no_grad` block: a view made there refuses a later write with
    grad on, fuzz 2117 of seed 2300000)."""
    outputs = list(outputs)
    with torch.enable_grad():
        for o, (i, chain) in views.items():
            got = outputs[o]
            if args[i] is originals[i] or not isinstance(got, torch.Tensor):
                continue  # (not gated in this call: a leaf under autocast)
            if chain is None:
                outputs[o] = originals[i].as_strided(got.size(), got.stride(), got.storage_offset())
                continue
            view = originals[i]
            for node in chain:
                view = (
                    getattr(view, node.target)(*node.args[1:], **node.kwargs)
                    if node.op == "call_method"
                    else node.target(view, *node.args[1:], **node.kwargs)
                )
            outputs[o] = view
    return outputs
