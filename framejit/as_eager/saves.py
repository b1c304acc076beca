"""Which ops of a training graph save tensors for backward, found by running it on fake tensors under a pack hook."""

from __future__ import annotations

from typing import Any

import torch

from framejit.op_effects import (
    AUTOCAST_STATE_TARGETS,
    batch_norm_stats_written,
    node_storage,
    op_name,
    requires_grad,
    writes_into_first_argument,
)

# ops whose result requires grad only if an operand does, and that then save another operand (a product's
# backward needs the other factor; an embedding's, the indices): found without a run
_SAVING_FUNCTIONS = frozenset({"matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "conv1d", "conv2d", "conv3d"})
_SAVING_MODULES = (torch.nn.Linear, torch.nn.modules.conv._ConvNd, torch.nn.Bilinear, torch.nn.Embedding)
# ...and these when two operands are tensors (`x * 2` keeps only the number)
_PRODUCTS = frozenset({"mul", "__mul__", "__rmul__", "div", "__truediv__", "__rtruediv__", "true_divide"})


class _Saves(Exception):
    """Raised by the pack hook at the first tensor a live op saves, when only whether any does is asked."""


class _FindingSaves(torch.fx.Interpreter):
    """Runs a graph, noting the ops whose result the graph's differentiable outputs or its writes need that save a
    tensor (a dead op's save, `torch.sin(y)` passed to a function that ignores it, never reaches a backward; nor
    does that of a `matmul` feeding only a comparison the graph returns: fuzz 123 of seed 1900000). With
    `stop_at_first`, the first such save raises _Saves."""

    def __init__(self, gm: torch.fx.GraphModule, stop_at_first: bool) -> None:
        super().__init__(gm)
        graph = gm.graph
        results = graph.output_node().args[0]
        results = [
            r
            for r in (results if isinstance(results, (tuple, list)) else [results])  # (a user's graph)
            if isinstance(r, torch.fx.Node)
        ]
        needed = _needed_writes(graph, results)
        roots = [n for n in graph.nodes if n.op == "call_module" or n in needed or batch_norm_stats_written(n)]
        roots += [r for r in results if requires_grad(r.meta.get("example_value"))]
        self.live: set[torch.fx.Node] = set()
        while roots:
            node = roots.pop()
            if node not in self.live:
                self.live.add(node)
                roots.extend(node.all_input_nodes)
        self.stop_at_first = stop_at_first
        self.saving: set[torch.fx.Node] = set()
        self.current: torch.fx.Node | None = None

    def run_node(self, n: torch.fx.Node) -> Any:
        self.current = n
        return super().run_node(n)

    def pack(self, t: torch.Tensor) -> Any:
        if self.current in self.live:
            if self.stop_at_first:
                raise _Saves
            self.saving.add(self.current)
        return t


def _needed_writes(graph: torch.fx.Graph, results: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """The in-place writes a later op or the program may see: all but those into memory the graph computed that no
    output holds and nothing touches after the write (`r = lin(x); r.add_(y)`, `r` never used again: fuzz 5889
    of seed 2900000, whose graph otherwise saves nothing, and as one node freed what a later call's backward
    went through again)."""
    kept = {node_storage(n) for n in (*(n for n in graph.nodes if n.op == "placeholder"), *results)} - {None}
    last_touch: dict[Any, int] = {}
    for i, node in enumerate(graph.nodes):
        for n in (node, *node.all_input_nodes):
            if (storage := node_storage(n)) is not None:
                last_touch[storage] = i
    needed = set()
    for i, node in enumerate(graph.nodes):
        if writes_into_first_argument(node):
            storage = node_storage(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
            if storage is None or storage in kept or last_touch.get(storage, -1) > i:
                needed.add(node)
    return needed


def _run_finding_saves(gm: torch.fx.GraphModule, example_inputs: list[Any], finder: _FindingSaves) -> bool:
    """Run `gm` on fakes of `example_inputs` with `finder`'s pack hook; False where the run did not finish (a
    save with `stop_at_first`, a graph the fake run rejects, saved-tensor hooks disabled)."""
    if any(n.target in AUTOCAST_STATE_TARGETS for n in gm.graph.nodes):
        return False  # (a run stopped at a save would leave autocast switched)
    from torch._subclasses.fake_tensor import FakeTensorMode

    context = torch._guards.TracingContext.try_get()
    mode = (
        context.fake_mode
        if context is not None and context.fake_mode is not None
        else FakeTensorMode(allow_non_fake_inputs=True)
    )
    try:
        fakes = [
            x if getattr(x, "fake_mode", None) is mode else mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
            for x in example_inputs
        ]
        # (enable_grad puts grad mode back as it was: a graph may switch it, and stop before switching back)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(finder.pack, lambda t: t), mode:
            finder.run(*fakes)
    except Exception:  # noqa: BLE001 - _Saves, or a run that cannot tell
        return False
    return True


def saves_no_tensor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Whether autograd records `gm`'s ops on inputs requiring grad, and saves no tensor for the backward of its
    outputs. False where that cannot be found. Costs the run of the graph's ops up to the first save."""
    if not any(requires_grad(x) for x in example_inputs):
        return False  # (no autograd node at all: AOTAutograd compiles it for inference)
    return _run_finding_saves(gm, example_inputs, _FindingSaves(gm, stop_at_first=True))


def saving_nodes(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> set[torch.fx.Node] | None:
    """The nodes of `gm` whose ops save a tensor that a backward of its outputs unpacks; None where that cannot
    be found. Costs a run of the whole graph on fake tensors."""
    finder = _FindingSaves(gm, stop_at_first=False)
    return finder.saving if _run_finding_saves(gm, example_inputs, finder) else None


def surely_saves(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Whether `node` is a product (matmul, linear, convolution, a product of two tensors) or an embedding whose
    result requires grad: it saves an operand for another's gradient. Known without a run; False says nothing."""
    if not requires_grad(node.meta.get("example_value")):
        return False
    if node.op == "call_module":
        return isinstance(gm.get_submodule(node.target), _SAVING_MODULES)
    if node.op not in ("call_function", "call_method"):
        return False
    name = op_name(node.target)
    return (
        name in _SAVING_FUNCTIONS
        or name in _PRODUCTS
        and sum(
            isinstance(a, torch.fx.Node) and isinstance(a.meta.get("example_value"), torch.Tensor) for a in node.args
        )
        >= 2
    )
