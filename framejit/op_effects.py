"""What an op does besides its result: writes in place (and into which argument), makes a view, draws random
numbers, switches grad mode or autocast; and a tensor's storage and autograd node.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch
from torch._C._autograd import CreationMeta, _get_creation_meta
from torch.amp.autocast_mode import _enter_autocast, _exit_autocast
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

# each in-place operator (`a += b`) and the operator it falls back to where the left side has no in-place form
OUT_OF_PLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}


def op_name(target: Any) -> str:
    """The name of a call's target: a method's name, a function's `__name__` ("" for what has none)."""
    return target if isinstance(target, str) else getattr(target, "__name__", "")


# -- writes in place ------------------------------------------------------------------------------------------
IN_PLACE_OPERATORS = frozenset(
    {
        operator.setitem,
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
        operator.imatmul,
    }
)


def in_place_name(target: Any, name: str) -> bool:
    """torch's naming of in-place ops (`add_`), which the operator module's `and_`/`or_` only look like."""
    return name.endswith("_") and not name.endswith("__") and getattr(target, "__module__", None) != "_operator"


def writes_first_argument(target: Any, name: str, kwargs: dict[str, Any]) -> bool:
    """Whether a call writes in place into its first argument: `x.add_(y)`, `x += y`, `x[i] = y`,
    `F.relu(x, inplace=True)` (an `out=` argument is written instead)."""
    return target in IN_PLACE_OPERATORS or kwargs.get("inplace") is True or in_place_name(target, name)


def writes_into_first_argument(node: torch.fx.Node) -> bool:
    """Whether a graph node writes in place into its first argument, or (a function with `out=`) into `out`."""
    if node.op not in ("call_method", "call_function") or not node.args:
        return False
    return (node.op == "call_function" and "out" in node.kwargs) or writes_first_argument(
        node.target, op_name(node.target), node.kwargs
    )


# where each batch_norm signature takes (running_mean, running_var); argument 5 is `training` in both
BATCH_NORM_STATS: dict[Any, slice] = {torch.nn.functional.batch_norm: slice(1, 3), torch.batch_norm: slice(3, 5)}


def batch_norm_stats_written(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The running statistics a batch_norm in train mode writes in place (its kernel does not move their version
    counters, and writes_into_first_argument does not see them)."""
    stats = BATCH_NORM_STATS.get(node.target) if node.op == "call_function" else None
    if stats is None or len(node.args) <= 5 or node.args[5] is not True:
        return []
    return [a for a in node.args[stats] if isinstance(a, torch.fx.Node)]


# -- views ----------------------------------------------------------------------------------------------------
# ops whose result shares storage with their first argument: a write into it is a write into that argument
_VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "transpose",
        "t",
        "permute",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "flatten",
        "unflatten",
        "as_strided",
        "detach",
        "unfold",
        "movedim",
        "swapaxes",
        "split",
        "chunk",
        "unbind",
        "diagonal",
        "__getitem__",
        "contiguous",
        "T",
        "mT",
        "real",
        "imag",
        "data",
    }
)
_VIEW_FUNCTIONS = {
    operator.getitem,
    torch.transpose,
    torch.reshape,
    torch.squeeze,
    torch.unsqueeze,
    torch.flatten,
    torch.narrow,
    torch.select,
    torch.permute,
    torch.split,
    torch.chunk,
    torch.unbind,
    torch.detach,
    torch.t,
    torch.movedim,
    torch.swapaxes,
    torch.diagonal,
    torch.as_strided,
    getattr,
}


def is_view(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target in _VIEW_METHODS) or (
        node.op == "call_function" and node.target in _VIEW_FUNCTIONS
    )


def creation_meta(view: torch.Tensor) -> CreationMeta:
    """How autograd lets `view` be written in place (DEFAULT for a view without autograd metadata)."""
    try:
        return _get_creation_meta(view)
    except RuntimeError:
        return CreationMeta.DEFAULT


# -- random numbers -------------------------------------------------------------------------------------------
# names of the ops that draw random numbers: a second run would draw others (dropout, rand*, normal_, bernoulli...)
RANDOM_OP = re.compile(
    r"(rand\w*|\w*dropout\w*|normal_?|log_normal_|bernoulli_?|multinomial|uniform_|exponential_"
    r"|cauchy_|geometric_|random_|poisson|rrelu_?|gumbel_softmax)"
)


# -- communication --------------------------------------------------------------------------------------------
_COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d"})


def communicates(node: torch.fx.Node) -> bool:
    """Whether `node` may talk to other ranks: a collective op, or a wrapper subclass value (a DTensor: the ops
    that take it dispatch through it, and may redistribute). A second run would communicate again, where the other
    ranks do not."""
    target = node.target
    namespace = getattr(target, "namespace", None) or getattr(target, "_qualified_op_name", "").partition("::")[0]
    return namespace in _COLLECTIVE_NAMESPACES or is_traceable_wrapper_subclass(node.meta.get("example_value"))


# -- grad mode and autocast -----------------------------------------------------------------------------------
def leave_entered_autocast(device: str, prev: bool, prev_dtype: torch.dtype, prev_cache_enabled: bool) -> None:
    """What `autocast.__exit__` does, given the state it restores: the node where a continuation leaves a block it
    was handed already entered (the real object stays outside the graph; the state it saved is guarded)."""
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, prev)
    torch.set_autocast_dtype(device, prev_dtype)
    torch.set_autocast_cache_enabled(prev_cache_enabled)


def reenter_autocast(device: str, dtype: torch.dtype, enabled: bool, cache_enabled: bool) -> None:
    """The last node of a graph that left such a block: back inside it, so that the graph as a whole changes no
    autocast state (AOTAutograd keeps no state change at run time); the real `__exit__` runs after the graph."""
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache_enabled)


# graph nodes that change autocast state (not ops: they are not counted as such)
AUTOCAST_STATE_TARGETS = (_enter_autocast, _exit_autocast, leave_entered_autocast, reenter_autocast)


def grad_modes(graph: torch.fx.Graph) -> dict[torch.fx.Node, bool]:
    """The grad mode each node of `graph` runs in (a graph starts with grad on: callers look at training graphs)."""
    modes, mode = {}, True
    for node in graph.nodes:
        if node.target is torch._C._set_grad_enabled:
            mode = node.args[0]
        modes[node] = mode
    return modes


# -- storage and autograd node --------------------------------------------------------------------------------
def storage_of(value: Any) -> StorageWeakRef | None:
    """The storage of a (fake) tensor, comparable across tensors: views and aliases share it."""
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return StorageWeakRef(value.untyped_storage())
    return None


def node_storage(node: torch.fx.Node) -> StorageWeakRef | None:
    """storage_of the value a graph node computes (its fake)."""
    return storage_of(node.meta.get("example_value"))


def shared_storage(values: list[Any]) -> set[StorageWeakRef]:
    """The storages that two or more of `values` (tensors) lie in."""
    seen: set[StorageWeakRef] = set()
    shared: set[StorageWeakRef] = set()
    for storage in map(storage_of, values):
        if storage is not None:
            (shared if storage in seen else seen).add(storage)
    return shared


def inputs_share_storage(example_inputs: list[Any]) -> bool:
    """Whether two of the inputs are one tensor or share memory (views of one another)."""
    storages = [s for s in map(storage_of, example_inputs) if s is not None]
    return len(set(storages)) != len(storages)


def grad_fn_of(value: Any) -> Any:
    """`value.grad_fn`, or None for what is no tensor, and for a view autograd refuses to give the history of
    (an output of `unbind` after a write into its base)."""
    try:
        return value.grad_fn if isinstance(value, torch.Tensor) else None
    except RuntimeError:
        return None


def requires_grad(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad
