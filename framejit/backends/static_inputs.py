"""The graph inputs that live as long as the model (its parameters and buffers), told to AOTAutograd's partitioner."""

from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.contracts import MODULE_STATE_META
from framejit.op_effects import inputs_share_storage


def static_input_indices(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[int]:
    """Positions, among the inputs AOTAutograd flattens (the module's own parameters and buffers, then
    `example_inputs`), of the model's parameters and buffers; none where AOTAutograd would move inputs (two that
    are one tensor or share memory are merged, and the positions would no longer match)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs) or inputs_share_storage(example_inputs):
        return []
    own = len([*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)])
    return [
        *range(own),
        *(
            own + i
            for i, (node, value) in enumerate(zip(placeholders, example_inputs))
            if node.meta.get(MODULE_STATE_META) or isinstance(value, torch.nn.Parameter)
        ),
    ]


def with_static_inputs(partition_fn: Callable[..., Any], indices: list[int]) -> Callable[..., Any]:
    """`partition_fn`, told that the inputs at `indices` live as long as the model."""
    if not indices:
        return partition_fn

    def partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
        given = kwargs.get("static_lifetime_input_indices") or ()
        kwargs["static_lifetime_input_indices"] = sorted({*given, *indices})
        return partition_fn(joint, joint_inputs, **kwargs)

    return partition


def inductor_partitioner(indices: list[int]) -> Any:
    """Inductor's partitioner (the min-cut one, after its joint-graph passes), told the same, as the
    `custom_partitioner_fn` of its config; None where there is nothing to tell."""
    if not indices:
        return None
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    class StaticInputsPartitioner(CustomPartitionerFn):
        def __call__(self, gm: torch.fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
            return with_static_inputs(min_cut_rematerialization_partition, indices)(gm, joint_inputs, **kwargs)

        def uuid(self) -> Any:  # (inductor's caches key on it)
            return ("framejit.static_inputs", tuple(indices))

    return StaticInputsPartitioner()
