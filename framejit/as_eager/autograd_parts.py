"""A training graph compiles as several autograd nodes where one node would run a backward eager's ops do not."""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch

from framejit import fate
from framejit.as_eager.custom_functions import (
    custom_function_refusal,
    eager_ops_for_refused_functions,
    parts_around_refused_functions,
)
from framejit.as_eager.input_writes import EAGER_HISTORY, autograd_needs_eager_ops
from framejit.as_eager.saves import saves_no_tensor, saving_nodes, surely_saves
from framejit.as_eager.unused_grads import output_dependencies
from framejit.contracts import OPAQUE_EFFECTS_META
from framejit.op_effects import (
    AUTOCAST_STATE_TARGETS,
    RANDOM_OP,
    batch_norm_stats_written,
    grad_fn_of,
    grad_modes,
    node_storage,
    op_name,
    requires_grad,
    writes_into_first_argument,
)

log = logging.getLogger("framejit.backends")  # (the backends' logger: it reports how a backend compiles a graph)

Compile = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]
Part = set[torch.fx.Node]  # a part's computed nodes; the parts of a graph run in their list's order
SET_GRAD = torch._C._set_grad_enabled


def compile_per_autograd_part(
    gm: torch.fx.GraphModule, example_inputs: list[Any], compile_one: Compile, ops_when_nothing_saved: bool = False
) -> Callable[..., Any]:
    """`compile_one(gm, example_inputs)`, or, for a training graph that needs several autograd nodes, each part
    compiled alone and run in turn (the graph's outputs in its order). With `ops_when_nothing_saved`, a graph
    or part that saves no tensor for backward runs as its torch ops (`_eager_ops_where_nothing_saved`); a call
    of a torch.autograd.Function AOTAutograd must not trace through is a part of its own, run as its torch ops
    (`custom_functions.py`)."""
    if torch.is_grad_enabled() and ops_when_nothing_saved:
        compile_one = _eager_ops_where_nothing_saved(compile_one)
    parts = _parts(gm, example_inputs) if torch.is_grad_enabled() else None
    if custom_function_refusal(gm) is not None:  # (a training graph): such a call runs as its torch ops
        compile_one = eager_ops_for_refused_functions(compile_one)
        parts = parts_around_refused_functions(gm.graph, parts, _computed(gm.graph))
        parts = parts if len(parts) > 1 else None
    if parts is None:
        return compile_one(gm, example_inputs)
    log.info("a training graph compiles as %d autograd nodes", len(parts))
    return _compile_parts(gm, example_inputs, parts, compile_one)


def _parts(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[Part] | None:
    graph = gm.graph
    results = graph.output_node().args[0]
    if (
        not isinstance(results, (tuple, list))
        or len(results) < 2
        or any(not isinstance(r, torch.fx.Node) or r.op in ("placeholder", "get_attr") for r in results)
    ):
        return None
    inputs_memory = set()  # the inputs' storages: a view of one, or `.to()` giving it back, writes into it
    writes_input = False
    for node in graph.nodes:
        if node.op == "placeholder":
            inputs_memory.add(node_storage(node))
        elif node.op in ("call_function", "call_method", "call_module") and node.target is not SET_GRAD:
            if (
                node.target in AUTOCAST_STATE_TARGETS
                or RANDOM_OP.fullmatch(op_name(node.target))
                or OPAQUE_EFFECTS_META in node.meta
            ):
                return None
            if writes_into_first_argument(node) and (
                "out" in node.kwargs or not isinstance(node.args[0], torch.fx.Node)
            ):
                return None
            written = [node.args[0]] if writes_into_first_argument(node) else batch_norm_stats_written(node)
            writes_input = writes_input or any(node_storage(w) in inputs_memory for w in written)
    differentiable = [i for i, r in enumerate(results) if requires_grad(r.meta.get("example_value"))]
    if len(differentiable) < 2:
        return None
    nodes = _computed(graph)
    joined = _Joined(nodes, inputs_memory)
    reached = _outputs_reached(nodes, results, differentiable, joined)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if _needs_exact_nodes(differentiable, reached, placeholders, example_inputs):
        return _parts_by_outputs_reached(nodes, reached, joined.in_order)
    shared = _parts_for_second_backwards(gm, example_inputs, nodes, reached, len(differentiable), joined.in_order)
    if shared is not None:
        return shared
    # (a graph writing into an input, a module's buffer, stays whole here: splitting one that runs two BatchNorms
    # on shared statistics made backward raise, fuzz 4310)
    return None if writes_input else _unrelated_computations(nodes, results, differentiable, joined)


def _computed(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The nodes a part runs: everything but inputs, constants (each part reads its own), the output and grad mode
    switches (each part switches to the mode of each of its ops: `grad_modes`)."""
    return [n for n in graph.nodes if n.op not in ("placeholder", "get_attr", "output") and n.target is not SET_GRAD]


def _unrelated_computations(
    nodes: list[torch.fx.Node], results: list[torch.fx.Node], differentiable: list[int], joined: _Joined
) -> list[Part] | None:
    """Parts that meet through no value computed in the graph, nor through memory one of them writes in place (an
    input written, a module's buffer: what reads it before and after the write stays with the write)."""
    computations = _Union(nodes)
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg in computations.parent:
                computations.union(arg, node)
    for group in joined.members.values():
        for node in group[1:]:
            computations.union(node, group[0])
    roots = list(dict.fromkeys(computations.find(results[i]) for i in differentiable))
    if len(roots) < 2:
        return None
    members: dict[torch.fx.Node, Part] = {root: set() for root in roots}
    for node in nodes:  # nodes of computations without a differentiable output join the first part
        members.get(computations.find(node), members[roots[0]]).add(node)
    return list(members.values())


def _needs_exact_nodes(
    differentiable: list[int],
    reached: dict[torch.fx.Node, int],
    placeholders: list[torch.fx.Node],
    example_inputs: list[Any],
) -> bool:
    """Whether one node for the graph would run a history eager's ops do not: an input with a history of its own
    feeds only some of the outputs (autograd runs that history whenever the node runs, if only with no gradient,
    and its ops unpack what they saved)."""
    everything = (1 << len(differentiable)) - 1
    return any(
        requires_grad(value)
        and grad_fn_of(value) is not None
        and 0 < _or(reached.get(u, 0) for u in p.users) != everything
        for p, value in zip(placeholders, example_inputs)
    )


def _or(masks: Any) -> int:
    result = 0
    for mask in masks:
        result |= mask
    return result


def _outputs_reached(
    nodes: list[torch.fx.Node], results: list[torch.fx.Node], differentiable: list[int], joined: _Joined
) -> dict[torch.fx.Node, int]:
    """For each computed node, the differentiable outputs it leads to (a bit mask), through what uses its value,
    through the nodes joined to it (a group shares one mask), and, for a node whose value is memory computed in
    the graph and written in place (what made it, a view of it, a write into it), through every later node that
    touches that memory and every output holding it (they read what the node left there)."""
    own: dict[torch.fx.Node, int] = {}
    returned: dict[Any, int] = {}  # written memory an output holds (it reads what the last write left there)
    for bit, position in enumerate(differentiable):
        own[results[position]] = own.get(results[position], 0) | 1 << bit
        if (storage := node_storage(results[position])) is not None:
            returned[storage] = returned.get(storage, 0) | 1 << bit
    for node, storages in joined.holds.items():
        own[node] = own.get(node, 0) | _or(returned.get(storage, 0) for storage in storages)
    reached: dict[torch.fx.Node, int] = {}
    group: dict[torch.fx.Node, int] = {}  # a joined group's root -> what its members lead to so far
    changed = True
    while changed:  # (again only where a group's mask grew after some of its members were visited)
        changed = False
        for node in reversed(nodes):
            root = joined.find(node)
            mask = (
                own.get(node, 0)
                | _or(reached.get(u, 0) for u in (*node.users, *joined.later.get(node, ())))
                | group.get(root, 0)
            )
            group[root] = group.get(root, 0) | mask
            if mask != reached.get(node):
                reached[node], changed = mask, True
    return reached


class _Union:
    """Disjoint sets of nodes (union-find)."""

    def __init__(self, nodes: list[torch.fx.Node]) -> None:
        self.parent = {n: n for n in nodes}

    def find(self, n: torch.fx.Node) -> torch.fx.Node:
        while self.parent[n] is not n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a: torch.fx.Node, b: torch.fx.Node) -> None:
        self.parent[self.find(a)] = self.find(b)


class _Joined(_Union):
    """Nodes that must run in one part: a node with the producer of a value other than a tensor it takes (`split`'s
    tuple: only tensors pass between parts), and those touching an input's memory written in place (a module's
    buffer: BatchNorm's running statistics), in their order. `members` adds the nodes touching any memory written
    in place, for `_unrelated_computations`.

    Memory computed in the graph and written in place may span parts, in the order of the nodes touching it
    (`in_order`: what each node must run after). A reader before the write then gets no gradient path through the
    write, as in eager: `g = (g + g)`, `t.sub_(g)`, `g[:2] = t.std()`, with `t` and `g` returned (a state kept
    across calls), backpropagates from `t` without freeing what `std` saved (fuzz 631 of seed 2400000)."""

    def __init__(self, nodes: list[torch.fx.Node], inputs_memory: set[Any]) -> None:
        super().__init__(nodes)
        # (batch_norm in train mode writes its running statistics: two BatchNorm calls of one module in two
        # parts could run in the other order, fuzz 472 of seed 1800000)
        written = {
            node_storage(n.args[0])
            for n in nodes
            if writes_into_first_argument(n) and isinstance(n.args[0], torch.fx.Node)
        } | {node_storage(stat) for n in nodes for stat in batch_norm_stats_written(n)}
        written.discard(None)
        touchers: dict[Any, list[torch.fx.Node]] = {}
        for node in nodes:
            for storage in dict.fromkeys(node_storage(other) for other in (node, *node.all_input_nodes)):
                if storage in written:
                    touchers.setdefault(storage, []).append(node)
            for arg in node.all_input_nodes:
                if arg in self.parent and not isinstance(arg.meta.get("example_value"), torch.Tensor):
                    self.union(arg, node)
        self.later: dict[torch.fx.Node, list[torch.fx.Node]] = {}  # a node holding written memory -> later touchers
        self.holds: dict[torch.fx.Node, list[Any]] = {}  # such a node -> the written memory it holds
        self.in_order: list[tuple[torch.fx.Node, torch.fx.Node]] = []  # (earlier, later): see _write_order
        everything = _Union(nodes)
        for storage, group in touchers.items():
            for node in group[1:]:
                everything.union(group[0], node)
            if storage in inputs_memory:
                for node in group[1:]:
                    self.union(group[0], node)
                continue
            self.in_order.extend(_write_order(group, storage))
            for i, node in enumerate(group):
                holds = [node, node.args[0]] if writes_into_first_argument(node) else [node]
                if any(
                    s is not None and s == storage
                    for n in holds
                    if isinstance(n, torch.fx.Node)
                    for s in [node_storage(n)]
                ):
                    self.later.setdefault(node, []).extend(group[i + 1 :])
                    self.holds.setdefault(node, []).append(storage)
        for node in nodes:
            everything.union(self.find(node), node)
        self.members: dict[torch.fx.Node, list[torch.fx.Node]] = {}
        for node in nodes:
            self.members.setdefault(everything.find(node), []).append(node)


def _write_order(touchers: list[torch.fx.Node], storage: Any) -> list[tuple[torch.fx.Node, torch.fx.Node]]:
    """Pairs (earlier, later) of the nodes touching one memory (in graph order, the first made it) whose order
    must stay: each node after the last write before it, each write after every node since the write before.
    Reads between two writes keep no order among themselves (they may fall in different parts)."""
    pairs = []
    last_write, since = touchers[0], []
    for node in touchers[1:]:
        written = (
            node_storage(node.args[0])
            if writes_into_first_argument(node) and isinstance(node.args[0], torch.fx.Node)
            else None
        )
        writes = written is not None and written == storage  # (StorageWeakRef == None raises)
        pairs.append((last_write, node))
        if writes:
            pairs.extend((read, node) for read in since)
            last_write, since = node, []
        else:
            since.append(node)
    return pairs


def _parts_for_second_backwards(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    nodes: list[torch.fx.Node],
    reached: dict[torch.fx.Node, int],
    n_outputs: int,
    in_order: list[tuple[torch.fx.Node, torch.fx.Node]],
) -> list[Part] | None:
    """Parts so that a backward from one output after a backward from another fails only where eager's would.

    Two backwards pass one node when it leads to both outputs; the second raises if the node saved a tensor.
    Eager's second backward raises only if one of its ops leading to both outputs saved one: a graph keeping
    `g = g + x[0]` in a global (an add, saving nothing) beside a `maximum` that saves, both leading to the loss,
    backpropagates again through `g` in the next step (fuzz 1028 of seed 1800000, 5788 of seed 1700000). Such
    a graph splits by the outputs each op leads to, then neighbouring parts join again wherever the joint node
    fails only where eager does too. A model's graph (a loss, its logits, a key/value cache) has a matmul
    leading to every output: it stays whole, found without a run."""
    everything = (1 << n_outputs) - 1
    if len({reached[n] for n in nodes}) < 2 or any(reached[n] == everything and surely_saves(gm, n) for n in nodes):
        return None
    saving = saving_nodes(gm, example_inputs)
    if not saving:
        return None  # (nothing saved: no node fails a second backward; or unknown: left whole)
    shared = [1 << bit for bit in range(n_outputs)]  # per output: the outputs a saving op leads to with it
    for node in saving:
        mask = reached.get(node, 0)
        for bit in range(n_outputs):
            if mask >> bit & 1:
                shared[bit] |= mask

    def one_node_is_exact(part: Part) -> bool:
        mask = _or(reached[n] for n in part)
        return not (part & saving) or all(shared[bit] & mask == mask for bit in range(n_outputs) if mask >> bit & 1)

    if one_node_is_exact(set(nodes)):
        return None
    parts = _parts_by_outputs_reached(nodes, reached, in_order)
    if parts is None:
        return None
    joined = [parts[0]]
    for part in parts[1:]:  # (neighbours in the run's order: joining them keeps an order the data flow allows)
        if one_node_is_exact(joined[-1] | part):
            joined[-1] = joined[-1] | part
        else:
            joined.append(part)
    return joined if len(joined) > 1 else None


def _parts_by_outputs_reached(
    nodes: list[torch.fx.Node], reached: dict[torch.fx.Node, int], in_order: list[tuple[torch.fx.Node, torch.fx.Node]]
) -> list[Part] | None:
    """The computed nodes grouped by the outputs each leads to, the groups in an order their data flow (and
    `in_order`: pairs of nodes touching one memory, the first to run first) allows; None for a single group."""
    groups: dict[int, Part] = {}
    for node in nodes:
        groups.setdefault(reached[node], set()).add(node)
    if len(groups) < 2:
        return None
    part_of = {node: key for key, part in groups.items() for node in part}
    after: dict[int, set[int]] = {key: set() for key in groups}
    edges = [(arg, node) for node in nodes for arg in node.all_input_nodes if arg in part_of]
    for earlier, later in (*edges, *in_order):
        if part_of[earlier] != part_of[later]:
            after[part_of[later]].add(part_of[earlier])
    order: list[int] = []
    while len(order) < len(groups):
        ready = [k for k in groups if k not in order and after[k] <= set(order)]
        if not ready:  # groups that feed each other (through a write between two reads): finer parts
            return _parts_in_graph_order(nodes, reached, in_order)
        order.append(ready[0])
    return [groups[k] for k in order]


def _parts_in_graph_order(
    nodes: list[torch.fx.Node], reached: dict[torch.fx.Node, int], in_order: list[tuple[torch.fx.Node, torch.fx.Node]]
) -> list[Part]:
    """Parts of nodes that lead to the same outputs, possibly several per output set, run in the graph's order:
    each node joins the last part of its set unless something it must run after is in a later part. For groups
    that would feed each other: `p9 = mm(x.t(), x)`, `g = g + (y - p9)`, `p9.mul_(2)`, `g = g + (y - p9)`, with
    `g` a state kept across calls, puts the reads of `p9` before and after the write in two parts leading to `g`
    (fuzz 468 of seed 2900000: left whole, the backward from `p9` ran the freed history of the `g` passed in)."""
    must_follow: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for earlier, later in in_order:
        must_follow.setdefault(later, []).append(earlier)
    parts: list[Part] = []
    masks: list[int] = []
    index: dict[torch.fx.Node, int] = {}
    for node in nodes:
        after = max((index[n] for n in (*node.all_input_nodes, *must_follow.get(node, ())) if n in index), default=-1)
        last = next((i for i in range(len(parts) - 1, -1, -1) if masks[i] == reached[node]), -1)
        if last < after or last < 0:
            parts.append(set())
            masks.append(reached[node])
            last = len(parts) - 1
        parts[last].add(node)
        index[node] = last
    return parts


def _compile_parts(
    gm: torch.fx.GraphModule, example_inputs: list[Any], parts: list[Part], compile_one: Compile
) -> Callable[..., Any]:
    """Each part as a module of its own, compiled; the run passes values between them by slot: the graph's inputs
    first, then each value a part computes that a later part or the graph's output reads."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    results = graph.output_node().args[0]
    slot = {p: i for i, p in enumerate(placeholders)}
    modes = grad_modes(graph)
    final_mode = modes[graph.output_node()]  # (a graph may end inside a no_grad block)
    examples = list(example_inputs)
    owner = {node: i for i, part in enumerate(parts) for node in part}
    read_later = {a for n in owner for a in n.all_input_nodes if a in owner and owner[a] != owner[n]}
    needed = set(results) | read_later
    runs = []
    for i, part in enumerate(parts):
        ordered = [n for n in graph.nodes if n in part]
        sub = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        reads = [a for n in ordered for a in n.all_input_nodes if a not in part]
        in_slots = []
        for value in dict.fromkeys(reads):
            if value.op == "get_attr":
                env[value] = sub.node_copy(value)
                continue
            if value.op != "placeholder" and examples[slot[value]] is None:  # (made when an earlier part ran it)
                return compile_one(gm, example_inputs)  # (a part reads a value not passed as one: left whole)
            env[value] = sub.placeholder(value.name)
            env[value].meta = dict(value.meta)
            in_slots.append(slot[value])
        mode = True  # (each part starts with grad on, as the graph does, and ends so)
        for node in ordered:
            if modes[node] != mode:
                mode = modes[node]
                sub.call_function(SET_GRAD, (mode,)).meta["example_value"] = None
            env[node] = sub.node_copy(node, lambda n: env[n])
        if not mode:
            sub.call_function(SET_GRAD, (True,)).meta["example_value"] = None
        out_nodes = [n for n in ordered if n in needed]
        for node in out_nodes:
            slot[node] = len(examples)
            examples.append(_example(node) if node in read_later else None)
        sub.output(tuple(env[n] for n in out_nodes))
        module = torch.fx.GraphModule(gm, sub)
        # a value no output of the part depends on for its gradient passes detached: autograd would otherwise run
        # its history whenever the part's backward runs, where eager's ops never reach it (fuzz 274 of seed
        # 400000: a write kept `x - 0.25` and its reader, computing no output from it, in two parts)
        # (none where the part writes into an input: the write is an output of its own, which the caller holds)
        deps, _ = output_dependencies(sub)
        written = {
            node_storage(n.args[0])
            for n in sub.nodes
            if writes_into_first_argument(n) and isinstance(n.args[0], torch.fx.Node)
        }
        writes_input = any(node_storage(p) in written for p in sub.find_nodes(op="placeholder"))
        detached = [] if writes_input else [k for k in range(len(in_slots)) if not any(k in d for d in deps)]
        # (the examples stay as they are: under symbolic sizes the backend fakes a real example by its source,
        # which a detached copy has not; the compiled part then has an input without a gradient edge)
        part_examples = [examples[s] for s in in_slots]
        # (a part may write into a value an earlier part computed: an input of its own, which AOTAutograd would
        # give another history than eager's ops, as for a whole graph)
        if autograd_needs_eager_ops(module, part_examples):
            fate.ran_as_torch_ops(EAGER_HISTORY)
            fn = module
        else:
            fn = compile_one(module, part_examples)
        runs.append((fn, in_slots, [slot[n] for n in out_nodes], detached))
    result_slots = [slot[r] for r in results]
    n_slots = len(examples)

    def run(*args: Any) -> tuple[Any, ...]:
        values: list[Any] = list(args) + [None] * (n_slots - len(args))
        for fn, in_slots, out_slots, detached in runs:
            inputs = [values[s] for s in in_slots]
            for k in detached:
                inputs[k] = _detached(inputs[k])
            for s, value in zip(out_slots, fn(*inputs)):
                values[s] = value
        if not final_mode:
            SET_GRAD(False)
        return tuple(values[s] for s in result_slots)

    return run


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) and value.requires_grad else value


def _example(node: torch.fx.Node) -> torch.Tensor | None:
    """A tensor like the one a node computes, for compiling a part that reads it: the trace's fake where the
    backend compiles in the trace's fake mode (a graph with symbolic sizes: the mode takes its own fakes as they
    are, their sizes in the graph inputs' symbols, where it would give a real tensor symbols of its own, which no
    guard source names); else a real tensor like it. None where neither can stand in for it."""
    fake = node.meta.get("example_value")
    if not isinstance(fake, torch.Tensor) or fake.layout != torch.strided:
        return None
    context = torch._guards.TracingContext.try_get()
    if context is not None:
        return fake if getattr(fake, "fake_mode", None) is context.fake_mode else None
    if any(isinstance(d, torch.SymInt) for d in (*fake.shape, *fake.stride())):
        return None
    return (
        torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device=fake.device)
        .zero_()
        .requires_grad_(fake.requires_grad)
    )


def _eager_ops_where_nothing_saved(compile_one: Compile) -> Compile:
    """`compile_one`, except for a training graph whose eager ops save no tensor for backward (adds, views,
    sums, a subtraction of a constant): that graph runs as its torch ops. Eager's backward then runs through
    it again after `backward()` freed what it saved (a program keeping outputs across steps and summing them
    all), where AOTAutograd's node reads its saved tensors in every backward, even when there are none, and
    raises "backward through the graph a second time" (fuzz 934, 6253). Such a graph is a few cheap ops, and
    real models' graphs save (a matmul saves its inputs), so they compile as before; finding that costs the
    run of the graph's ops up to the first save, on fake tensors."""

    def compile_or_run_ops(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        if saves_no_tensor(gm, example_inputs):
            fate.ran_as_torch_ops(
                "a training graph that saves no tensor for backward: its torch ops' backward "
                "runs again after a first backward freed the graph, as eager's does"
            )
            return gm
        return compile_one(gm, example_inputs)

    return compile_or_run_ops
