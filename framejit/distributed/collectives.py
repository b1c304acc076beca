"""torch.distributed's collectives in the graph: polyfills the trace inlines in place of the c10d calls.

Each polyfill issues the functional collective (`torch.ops._c10d_functional.*`, an op with a fake kernel and, for
the reductions and gathers, a registered backward) and waits for it at once; the in-place c10d API (`dist.all_reduce(t)`)
then copies the result into its argument, so the in-place meaning holds and the graph keeps the call. The process
group and the reduce op are resolved at trace time (`_lookup`, `_op_name` are called there, their answers
constants); rank and world size are constants, guarded by a query. What cannot be in a graph (`async_op=True`, whose
Work handle the program waits on; ops with no functional form) is a graph break naming the call: the program's own
call then runs as Python.

This file is traced, never captured (capture_policy._TRACED_OWN_FILES).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from framejit.policy import assume_constant_result, mark_refusal, substitute_in_graph

_ops = torch.ops._c10d_functional


@mark_refusal
def refuse(reason: str) -> None:
    """In a polyfill: a graph break whose reason is `reason` (the trace recognises a call; eagerly nothing)."""


@assume_constant_result
def _lookup(group: Any, tag: str) -> tuple[str, int] | None:
    """(registered name, size) of a process group given the way the c10d and functional APIs take it (None: the
    default group; a ProcessGroup; a list of ranks; a DeviceMesh of one dimension; a (mesh, dim) pair; a name), or
    None where there is none (no default group yet)."""
    if group is None and not dist.is_initialized():
        return None
    name = funcol._resolve_group_name(dist.group.WORLD if group is None else group, tag)
    return name, dist.get_world_size(dist.distributed_c10d._resolve_process_group(name))


def _group(group: Any, call: str, tag: str = "") -> tuple[str, int]:
    found = _lookup(group, tag)
    if found is None:
        refuse(f"torch.distributed.{call} with no process group (init_process_group was not called)")
    return found


_OP_NAMES = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.AVG: "avg",
    dist.ReduceOp.PRODUCT: "product",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
}


@assume_constant_result
def _op_name(op: Any) -> str | None:
    """The functional collectives' name of a c10d reduce op (None where there is none: BAND, premul_sum...)."""
    if isinstance(op, str):
        return op.lower()
    for known, name in _OP_NAMES.items():
        if op == known:
            return name
    return None


def _synchronous(async_op: bool, call: str) -> None:
    if async_op:
        refuse(f"torch.distributed.{call} with async_op=True: its Work handle is waited on outside the graph")


def _checked(op: Any, async_op: bool, call: str) -> str:
    _synchronous(async_op, call)
    name = _op_name(op)
    if name is None:
        refuse(f"torch.distributed.{call} with reduce op {op}: no functional collective for it")
    return name


def _all_gather_dim(gathered: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    """The functional all-gather stacks ranks along dim 0; gather along `dim` instead."""
    return gathered if dim == 0 else torch.cat(torch.chunk(gathered, size, dim=0), dim=dim)


# ---- the in-place c10d API --------------------------------------------------------------------------------------


@substitute_in_graph(dist.all_reduce)
def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):  # type: ignore[no-untyped-def]
    name, _ = _group(group, "all_reduce")
    reduced = _ops.wait_tensor(_ops.all_reduce(tensor, _checked(op, async_op, "all_reduce"), name))
    tensor.copy_(reduced)


@substitute_in_graph(dist.broadcast)
def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):  # type: ignore[no-untyped-def]
    if async_op or group_src is not None or src is None:
        refuse("torch.distributed.broadcast with async_op=True, group_src or no src")
    tensor.copy_(_ops.wait_tensor(_ops.broadcast(tensor, src, _group(group, "broadcast")[0])))


@substitute_in_graph(dist.all_gather_into_tensor)
def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):  # type: ignore[no-untyped-def]
    _synchronous(async_op, "all_gather_into_tensor")
    name, size = _group(group, "all_gather_into_tensor")
    gathered = _ops.all_gather_into_tensor(input_tensor, size, name)
    output_tensor.copy_(_ops.wait_tensor(gathered).view(output_tensor.shape))


@substitute_in_graph(dist.all_gather)
def all_gather(tensor_list, tensor, group=None, async_op=False):  # type: ignore[no-untyped-def]
    _synchronous(async_op, "all_gather")
    name, size = _group(group, "all_gather")
    gathered = _ops.wait_tensor(_ops.all_gather_into_tensor(tensor.contiguous(), size, name))
    for out, part in zip(tensor_list, gathered.view(size, *tensor.shape).unbind(0)):
        out.copy_(part)


@substitute_in_graph(dist.reduce_scatter_tensor)
def reduce_scatter_tensor(output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):  # type: ignore[no-untyped-def]
    name = _checked(op, async_op, "reduce_scatter_tensor")
    group_name, size = _group(group, "reduce_scatter_tensor")
    scattered = _ops.reduce_scatter_tensor(input, name, size, group_name)
    output.copy_(_ops.wait_tensor(scattered).view(output.shape))


@substitute_in_graph(dist.reduce_scatter)
def reduce_scatter(output, input_list, op=dist.ReduceOp.SUM, group=None, async_op=False):  # type: ignore[no-untyped-def]
    name = _checked(op, async_op, "reduce_scatter")
    joined = torch.cat([t.reshape(-1) for t in input_list])
    group_name, size = _group(group, "reduce_scatter")
    scattered = _ops.reduce_scatter_tensor(joined, name, size, group_name)
    output.copy_(_ops.wait_tensor(scattered).view(output.shape))


@substitute_in_graph(dist.all_to_all_single)
def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):  # type: ignore[no-untyped-def]
    _synchronous(async_op, "all_to_all_single")
    name, size = _group(group, "all_to_all_single")
    exchanged = _exchange(input, output_split_sizes, input_split_sizes, name, size)
    output.copy_(exchanged.view(output.shape))


@substitute_in_graph(dist.get_rank, can_constant_fold_through=True)
def get_rank(group=None):  # type: ignore[no-untyped-def]
    return _rank(group)


@substitute_in_graph(dist.get_world_size, can_constant_fold_through=True)
def get_world_size(group=None):  # type: ignore[no-untyped-def]
    return _world_size(group)


@assume_constant_result
def _rank(group: Any) -> int:
    return dist.get_rank(group)


@assume_constant_result
def _world_size(group: Any) -> int:
    return dist.get_world_size(group)


# ---- the functional collectives ---------------------------------------------------------------------------------


@substitute_in_graph(funcol.all_reduce)
def functional_all_reduce(self, reduceOp, group, tag=""):  # type: ignore[no-untyped-def]
    return _ops.wait_tensor(_ops.all_reduce(self, _op_name(reduceOp), _group(group, "all_reduce", tag)[0]))


def all_gather_single(self, gather_dim, group, tag=""):  # type: ignore[no-untyped-def]
    name, size = _group(group, "all_gather_tensor", tag)
    gathered = _ops.wait_tensor(_ops.all_gather_into_tensor(self.contiguous(), size, name))
    return _all_gather_dim(gathered, size, gather_dim)


def reduce_scatter_single(self, reduceOp, scatter_dim, group, tag=""):  # type: ignore[no-untyped-def]
    name, size = _group(group, "reduce_scatter_tensor", tag)
    if scatter_dim != 0:  # the functional op scatters along dim 0: bring the chunks of `scatter_dim` there
        self = torch.cat(torch.chunk(self, size, dim=scatter_dim), dim=0)
    scattered = _ops.reduce_scatter_tensor(self.contiguous(), _op_name(reduceOp), size, name)
    return _ops.wait_tensor(scattered)


# each name the functional API has had for these (the "_tensor" ones are deprecated; the backward is registered on
# the ops, so the "_autograd" ones are the same)
for _name in ("all_gather_single", "all_gather_single_autograd", "all_gather_tensor", "all_gather_tensor_autograd"):
    substitute_in_graph(getattr(funcol, _name))(all_gather_single)
for _name in (
    "reduce_scatter_single",
    "reduce_scatter_single_autograd",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_autograd",
):
    substitute_in_graph(getattr(funcol, _name))(reduce_scatter_single)


def _exchange(input, output_split_sizes, input_split_sizes, name, size):  # type: ignore[no-untyped-def]
    """all_to_all_single: split sizes the program left None are equal shares of dim 0 (the op takes lists)."""
    even = [input.size(0) // size] * size
    sizes_out = even if output_split_sizes is None else list(output_split_sizes)
    sizes_in = even if input_split_sizes is None else list(input_split_sizes)
    return _ops.wait_tensor(_ops.all_to_all_single(input.contiguous(), sizes_out, sizes_in, name))


def functional_all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):  # type: ignore[no-untyped-def]
    name, size = _group(group, "all_to_all_single", tag)
    return _exchange(self, output_split_sizes, input_split_sizes, name, size)


for _name in ("all_to_all_single", "all_to_all_single_autograd"):
    substitute_in_graph(getattr(funcol, _name))(functional_all_to_all_single)


@substitute_in_graph(funcol.all_reduce_coalesced)
def all_reduce_coalesced(self, reduceOp, group, tag=""):  # type: ignore[no-untyped-def]
    reduced = _ops.all_reduce_coalesced(self, _op_name(reduceOp), _group(group, "all_reduce_coalesced", tag)[0])
    return [_ops.wait_tensor(t) for t in reduced]


@substitute_in_graph(funcol.broadcast)
def functional_broadcast(self, src, group, tag=""):  # type: ignore[no-untyped-def]
    return _ops.wait_tensor(_ops.broadcast(self, src, _group(group, "broadcast", tag)[0]))


@substitute_in_graph(funcol.wait_tensor)
def wait_tensor(tensor):  # type: ignore[no-untyped-def]
    return _ops.wait_tensor(tensor)  # (the polyfills wait where they issue: a second wait does nothing)
