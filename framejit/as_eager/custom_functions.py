"""Training graphs calling a torch.autograd.Function that AOTAutograd must not trace through: such a call runs as
its torch ops (the real apply, the user's forward and backward, as in eager), with what comes before it, and the
rest of the graph compiles where it may be cut."""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch

from framejit import fate
from framejit.contracts import (
    AUTOGRAD_FUNCTION_LIVE_WRITES_META,
    AUTOGRAD_FUNCTION_REFUSAL_META,
    OPAQUE_EFFECTS_META,
)
from framejit.op_effects import AUTOCAST_STATE_TARGETS, RANDOM_OP, node_storage, op_name, writes_into_first_argument

Compile = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]
Part = set[torch.fx.Node]


def custom_function_refusal(gm: torch.fx.GraphModule) -> str | None:
    """Why AOTAutograd must not trace through a torch.autograd.Function this training graph calls (its backward
    has Python side effects, gives None gradients...: variables/autograd_speculation.py, the node's meta), or
    None."""
    for node in gm.graph.nodes:  # (only calls: a part's input copies the meta of the value it stands for)
        if node.op == "call_function" and AUTOGRAD_FUNCTION_LIVE_WRITES_META in node.meta:
            return str(node.meta[AUTOGRAD_FUNCTION_LIVE_WRITES_META])  # (in any grad mode)
    if not torch.is_grad_enabled():
        return None
    for node in gm.graph.nodes:
        if node.op == "call_function" and AUTOGRAD_FUNCTION_REFUSAL_META in node.meta:
            return str(node.meta[AUTOGRAD_FUNCTION_REFUSAL_META])
    return None


def eager_ops_for_refused_functions(compile_one: Compile) -> Compile:
    """`compile_one`, except for a graph (or part) holding such a call: that one runs as its torch ops."""

    def compile_or_run_ops(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        why = custom_function_refusal(gm)
        if why is not None:
            fate.ran_as_torch_ops(why)
            return gm
        return compile_one(gm, example_inputs)

    return compile_or_run_ops


def parts_around_refused_functions(graph: torch.fx.Graph, parts: list[Part] | None, computed: list) -> list[Part]:
    """The graph's nodes up to the last such call (and the items taken from its result), as one part run as its
    torch ops, then the rest: `parts` (or the whole graph's `computed` nodes as one part), each without those.

    The graph's order is its data flow's, so the rest reads only what comes before it. Whatever feeds such a call
    runs as torch ops with it: the call's backward may give None for an argument (eager then runs none of the
    ops that computed it), where a compiled node computing that argument would give its inputs zeros. A graph
    that must stay whole (autocast state, random numbers, a write into an input or with `out=`) is one part."""
    if not _cuttable(graph):
        return [set(computed)]
    whole = [set(computed)] if parts is None else parts
    order = {node: i for i, node in enumerate(graph.nodes)}
    calls = [n for n in computed if n.op == "call_function" and AUTOGRAD_FUNCTION_REFUSAL_META in n.meta]
    taken = [n for c in calls for n in c.users if n.target is operator.getitem]
    cut = max(order[n] for n in (*calls, *taken))
    eager = {n for n in computed if order[n] <= cut}
    rest = [part - eager for part in whole]
    return [eager, *(part for part in rest if part)]


def _cuttable(graph: torch.fx.Graph) -> bool:
    inputs = {node_storage(n) for n in graph.nodes if n.op == "placeholder"} - {None}
    for node in graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        if node.target in AUTOCAST_STATE_TARGETS or RANDOM_OP.fullmatch(op_name(node.target)):
            return False
        if OPAQUE_EFFECTS_META in node.meta:
            return False
        if writes_into_first_argument(node) and (
            "out" in node.kwargs or not isinstance(node.args[0], torch.fx.Node) or node_storage(node.args[0]) in inputs
        ):
            return False
    return True
