"""The as-eager layer: what makes a compiled graph behave as eager's ops under autograd (saved tensors, None
gradients, view metadata, output layouts, where backward runs, what a failing call leaves behind).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from framejit.as_eager.output_layouts import eager_output_layouts
from framejit.as_eager.output_views import eager_view_outputs
from framejit.as_eager.rerun import keeping_versions
from framejit.as_eager.saved_versions import checking_saved_versions, holding_saved_tensors, runs_own_ops
from framejit.as_eager.unused_grads import gating_unused_grads

# a stage wraps what the backend compiled (perhaps wrapped already) for one graph, or returns it unchanged
Stage = Callable[[Callable[..., Any], torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def run_time_stages(unversioned: frozenset[int]) -> list[Stage]:
    """The stages, innermost first: each wraps the ones before it, so that it sees what they return.

    1. `keeping_versions` (only for `unversioned` inputs, a batch_norm's running statistics): right around the
       backend's code, so that every stage after it that notes versions notes eager's.
    2. `holding_saved_tensors`: runs the backend's node under saved-tensor hooks and copies what it saved that
       eager's ops would not have, before the graph returns and any other stage touches the outputs.
    3. `eager_output_layouts`, then 4. `eager_view_outputs`: the stages that replace outputs (a copy into
       eager's layout; a view made again, or marked as eager marks it), the view marks last.
    5. `gating_unused_grads`, then 6. `checking_saved_versions`: the stages that watch outputs (hooks on the
       nodes that made them; the versions noted after each call), so they watch the tensors the program gets.

    (AOTAutograd lists its CompilerWrappers outermost first and applies them reversed in `post_compile`; this
    list reads in the order the stages apply.)"""
    return [
        functools.partial(_keeping_versions_of, unversioned),
        holding_saved_tensors,
        eager_output_layouts,
        eager_view_outputs,
        gating_unused_grads,
        checking_saved_versions,
    ]


def behaving_as_eager(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any], unversioned: frozenset[int]
) -> Callable[..., Any]:
    """`graph_fn` (what the backend compiled of `gm`) with the run-time stages applied; `graph_fn` itself where
    it is the graph's own torch ops, whose autograd nodes are eager's already. Call it in the grad mode the graph
    starts in: the stages look at the graph's training state as they wrap it. `unversioned` are the inputs the
    graph writes without moving their version counter in eager (`rerun.unversioned_inputs`)."""
    if runs_own_ops(graph_fn, gm):
        return graph_fn
    for stage in run_time_stages(unversioned):
        graph_fn = stage(graph_fn, gm, example_inputs)
    return graph_fn


def _keeping_versions_of(
    unversioned: frozenset[int], graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    return keeping_versions(graph_fn, unversioned) if unversioned else graph_fn
