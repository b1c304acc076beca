"""A training graph whose differentiable outputs come from unrelated computations compiles as one autograd node
per computation.

AOTAutograd (and inductor, which runs it) makes one autograd node of a whole graph. Its backward runs when any of
the graph's outputs gets a gradient, and it then unpacks everything the graph saved for every output. Eager's
nodes are per op: a backward that never reaches an output's ops never reads what they saved. So a graph that
computes `t = x.sigmoid()` (kept, then written in place: `t += 1`) and `p = w * g` (the loss) next to each other
raised "modified by an inplace operation" in `p`'s backward where eager does not; and a second backward through
an output of an unrelated earlier computation raised "backward through the graph a second time". Splitting the
graph where its computations do not meet gives each its own node, as eager's separate ops would. The split is
rare in practice: a model's forward is one computation (everything reaches its outputs through shared values).

Parts meet through any value computed in the graph; reading the same input does not join them (eager, too,
gives that input one gradient per use). Parts without a differentiable output ride with the first part that has
one. Graphs that switch grad mode or autocast, write in place into an input, draw random numbers (the order of
draws), or take symbolic sizes are left whole. A write into a value the graph computed stays in its part: its
views, and the ops that write it, are joined to it.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.backends.common import log
from framejit.backends.mutation import node_storage, op_name, requires_grad, writes_into_first_argument
from framejit.rerun import RANDOM_OP
from framejit.variables.autocast import STATE_TARGETS as AUTOCAST_STATE_TARGETS

Compile = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def compile_per_autograd_part(gm: torch.fx.GraphModule, example_inputs: list[Any],
                              compile_one: Compile) -> Callable[..., Any]:
    """`compile_one(gm, example_inputs)`, or, for a training graph of unrelated computations, each computation
    compiled alone and run in turn (outputs in the graph's order)."""
    parts = _differentiable_parts(gm) if torch.is_grad_enabled() else None
    if parts is None:
        return compile_one(gm, example_inputs)
    log.info("a training graph of %d unrelated computations compiles as one autograd node each", len(parts))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    runs = []
    for nodes, out_positions in parts:
        sub, used = _subgraph(gm, placeholders, nodes, out_positions)
        runs.append((compile_one(sub, [example_inputs[i] for i in used]), used, out_positions))
    n_out = sum(len(p) for _, p in parts)

    def run(*args: Any) -> tuple[Any, ...]:
        outputs: list[Any] = [None] * n_out
        for fn, used, positions in runs:
            for position, value in zip(positions, fn(*[args[i] for i in used])):
                outputs[position] = value
        return tuple(outputs)
    return run


def _differentiable_parts(gm: torch.fx.GraphModule) -> list[tuple[set[torch.fx.Node], list[int]]] | None:
    """The graph's unrelated computations (their nodes, and the positions of their outputs), or None where it
    is one (or is left whole)."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    results = output.args[0]
    if not isinstance(results, (tuple, list)) or len(results) < 2:
        return None
    parent: dict[torch.fx.Node, torch.fx.Node] = {}

    def find(n: torch.fx.Node) -> torch.fx.Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    inputs_memory = set()  # the inputs' storages: a view of one, or `.to()` giving it back, writes into it
    for node in graph.nodes:
        if node.op == "placeholder":
            if not isinstance(node.meta.get("example_value"), torch.Tensor):
                return None  # a symbolic size: left whole
            inputs_memory.add(node_storage(node))
            continue
        if node.op == "output":
            continue
        if node.target is torch._C._set_grad_enabled or node.target in AUTOCAST_STATE_TARGETS \
                or RANDOM_OP.fullmatch(op_name(node)):
            return None
        first = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if writes_into_first_argument(node) and (
                "out" in node.kwargs or first is None or node_storage(first) in inputs_memory):
            return None  # a write into an input: another part may read it, before or after
        parent[node] = node
        for arg in node.all_input_nodes:
            if arg.op != "placeholder":
                parent[find(arg)] = find(node)
    if any(not isinstance(r, torch.fx.Node) or r.op == "placeholder" for r in results):
        return None
    groups: dict[torch.fx.Node, list[int]] = {}
    for position, result in enumerate(results):
        groups.setdefault(find(result), []).append(position)
    differentiable = [root for root, positions in groups.items()
                      if any(requires_grad(results[p].meta.get("example_value")) for p in positions)]
    if len(differentiable) < 2:
        return None
    members: dict[torch.fx.Node, set[torch.fx.Node]] = {root: set() for root in differentiable}
    home = differentiable[0]  # parts without a differentiable output, and nodes no output needs, go here
    for node in parent:
        root = find(node)
        members[root if root in members else home].add(node)
    positions = {root: [] for root in differentiable}
    for root, found in groups.items():
        positions[root if root in positions else home].extend(found)
    return [(members[root], sorted(positions[root])) for root in differentiable]


def _subgraph(gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node], nodes: set[torch.fx.Node],
              out_positions: list[int]) -> tuple[torch.fx.GraphModule, list[int]]:
    """A module of `nodes` (in the graph's order) returning the outputs at `out_positions`, and the positions of
    the graph inputs it takes."""
    read = {a for n in nodes for a in n.all_input_nodes if a.op == "placeholder"}
    used = [i for i, p in enumerate(placeholders) if p in read]
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i in used:
        env[placeholders[i]] = graph.node_copy(placeholders[i])
    for node in gm.graph.nodes:
        if node in nodes:
            env[node] = graph.node_copy(node, lambda n: env[n])
    results = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    graph.output(tuple(env[results[p]] for p in out_positions))
    return torch.fx.GraphModule(gm, graph), used
