"""A graph that raises at run time: the frame runs again as plain Python, so that what the code did before the
failing op is done, as in eager.
"""

from __future__ import annotations

import inspect
import threading
import types
import weakref
from typing import Any, Callable

import torch
from torch._C._autograd import CreationMeta

from framejit import logs
from framejit._C import _hook, _tensor_state
from framejit.contracts import OPAQUE_EFFECTS_META
from framejit.exc import FramejitError
from framejit.op_effects import (
    RANDOM_OP,
    batch_norm_stats_written,
    communicates,
    creation_meta,
    op_name,
    writes_into_first_argument,
)


def _written(node: torch.fx.Node) -> list[Any]:
    """What `node` may write into in place: its first argument and any `out=` (op_effects.py decides whether it
    writes at all)."""
    if not writes_into_first_argument(node):
        return []
    return [node.args[0], node.kwargs.get("out")]


def _example(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("example_value")
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _example(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def inputs_written(graph: torch.fx.Graph, unversioned: frozenset[int]) -> list[int] | None:
    """The positions of the graph inputs it writes into in place, with the `unversioned` ones
    (`unversioned_inputs`); None if the graph draws random numbers (a second run would draw others), calls what
    may (a torch.autograd.Function's apply, OPAQUE_EFFECTS_META), or talks to other ranks (they would not run
    it again)."""
    if any(
        n.op in ("call_function", "call_method")
        and RANDOM_OP.fullmatch(op_name(n.target))
        or OPAQUE_EFFECTS_META in n.meta
        or communicates(n)
        for n in graph.nodes
    ):
        return None
    return sorted(inputs_written_in_place(graph) | unversioned)


def inputs_written_in_place(graph: torch.fx.Graph) -> set[int]:
    """The positions of the graph inputs its ops write into in place, as eager's version counters see it (the
    fake tensors of the trace share storage as the real ones will)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    written: set[int] = set()
    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            _note(_written(node), placeholders, written)
    return written


def unversioned_inputs(graph: torch.fx.Graph) -> frozenset[int]:
    """The positions of the graph inputs it writes into without moving their version counter, in eager: a
    batch_norm's running statistics."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    found: set[int] = set()
    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            _note(batch_norm_stats_written(node), placeholders, found)
    return frozenset(found)


def _note(targets: list[Any], placeholders: list[torch.fx.Node], into: set[int]) -> None:
    """The positions of the inputs sharing memory with `targets`, added to `into`."""
    for t in (t for target in targets for t in _example(target)):
        into.update(i for i, p in enumerate(placeholders) if any(torch._C._is_alias_of(t, e) for e in _example(p)))


def keeping_versions(graph_fn: Callable[..., Any], positions: frozenset[int]) -> Callable[..., Any]:
    """`graph_fn`, after which the inputs at `positions` (a batch_norm's running statistics) have the versions
    they had before: eager's kernel writes them without moving their version, a compiled graph's copy into them
    moves it. Put around what the backend compiled, so that what notes versions after the graph notes eager's
    (saved_versions.py: an eval-mode batch_norm saved them, a train-mode one wrote them later in the graph, fuzz
    2165 of seed 2900000)."""
    order = sorted(positions)

    def run(*args: Any) -> Any:
        versions = [args[i]._version for i in order]
        results = graph_fn(*args)
        moved = [(args[i], v) for i, v in zip(order, versions) if args[i]._version != v]
        if moved:
            torch._C._autograd._unsafe_set_version_counter(*map(tuple, zip(*moved)))
        return results

    return run


# inputs the graph writes into that are copied before each call (so that a failed call can be undone) when this
# small: a BatchNorm's statistics and `num_batches_tracked`, counters, small state
_SNAPSHOT_NUMEL = 16384
# ...and the most elements all the written inputs may have together: a graph that writes more (an optimizer step
# over a model's parameters and state) is not copied at every call, and an exception it raises is not undone
_SNAPSHOT_TOTAL = 65536


def checking_writes(
    graph_fn: Callable[..., Any], positions: list[int], unversioned: frozenset[int], numel: int = 0
) -> Callable[..., Any]:
    """`graph_fn`, undoing what it wrote into its inputs at `positions` if it raises: small inputs outside
    autograd (buffers; parameters under no_grad) are copied before the call and put back; small inputs autograd
    tracks (written by a graph that runs as eager torch ops) are cloned, history included, and put back by a
    `copy_` autograd records, so that their gradient flows to the clone's history, which is the input's before
    the call. If another was written before the exception (its version counter moved, or it is one of the
    `unversioned` positions, whose writes do not move it), the exception is marked: running the frame again would
    write twice, so it is not rerun. (After a call that returns, `keeping_versions` gave the `unversioned`
    positions back the versions they had.)

    The copies of dense CPU tensors are one C++ call (`_C/tensor_state.cpp`: the bytes of all of them, and every
    input's version); others (another device, a tensor subclass) take `_foreach_copy_` into buffers kept per
    thread. Where the written inputs have more than _SNAPSHOT_TOTAL elements in all (`numel`, when compiled),
    nothing is copied: an exception is marked as having written them."""
    if numel > _SNAPSHOT_TOTAL:
        return _marking_writes(graph_fn)
    kept = threading.local()

    def run(*args: Any) -> Any:
        inputs = [args[i] for i in positions]
        # without grad mode a write records no history: the values are all there is to put back
        grad_mode = torch.is_grad_enabled()
        native = _tensor_state.take(inputs, _SNAPSHOT_NUMEL, grad_mode)
        snapshot = _NativeSnapshot(native, inputs) if native is not None else _TorchSnapshot(inputs, grad_mode, kept)
        tracked = {k: inputs[k].clone() for k in snapshot.tracked()}
        try:
            return graph_fn(*args)
        except Exception as e:
            moved = set(snapshot.moved())
            changed = [k for k, i in enumerate(positions) if k in moved or i in unversioned]
            if any(not snapshot.has(k) and k not in tracked for k in changed) or not _put_back(
                [inputs[k] for k in changed if k in tracked], {id(inputs[k]): c for k, c in tracked.items()}
            ):
                e._framejit_wrote_inputs = True
                raise
            for k in changed:
                if snapshot.has(k):
                    snapshot.put_back(k)
            raise

    return run


def _marking_writes(graph_fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        try:
            return graph_fn(*args)
        except Exception as e:
            e._framejit_wrote_inputs = True
            raise

    return run


class _NativeSnapshot:
    """What `_tensor_state.take` kept: the bytes of the small dense CPU inputs, every input's version."""

    def __init__(self, native: Any, inputs: list[torch.Tensor]) -> None:
        self.native, self.inputs = native, inputs

    def tracked(self) -> list[int]:
        return _tensor_state.tracked(self.native)

    def moved(self) -> list[int]:
        return _tensor_state.moved(self.native, self.inputs)

    def has(self, k: int) -> bool:
        return self.inputs[k].numel() <= _SNAPSHOT_NUMEL and k not in self.tracked()

    def put_back(self, k: int) -> None:
        _tensor_state.restore(self.native, self.inputs, k)


class _TorchSnapshot:
    """The same with torch ops (any device, any tensor subclass)."""

    def __init__(self, inputs: list[torch.Tensor], grad_mode: bool, kept: threading.local) -> None:
        self.inputs = inputs
        self.versions = [t._version for t in inputs]
        self.small = [
            k for k, t in enumerate(inputs) if t.numel() <= _SNAPSHOT_NUMEL and not (grad_mode and t.requires_grad)
        ]
        self._tracked = [
            k for k, t in enumerate(inputs) if t.numel() <= _SNAPSHOT_NUMEL and grad_mode and t.requires_grad
        ]
        small = [inputs[k] for k in self.small]
        if small:
            with torch.no_grad():
                try:  # dtypes and devices are guarded: only a dynamic size, or a first call on this thread, misfits
                    torch._foreach_copy_(kept.buffers, small)
                except (AttributeError, RuntimeError):
                    kept.buffers = [t.clone() for t in small]
        self.buffers = dict(zip(self.small, kept.buffers)) if small else {}

    def tracked(self) -> list[int]:
        return self._tracked

    def moved(self) -> list[int]:
        return [k for k, (t, v) in enumerate(zip(self.inputs, self.versions)) if t._version != v]

    def has(self, k: int) -> bool:
        return k in self.buffers

    def put_back(self, k: int) -> None:
        with torch.no_grad():
            self.inputs[k].copy_(self.buffers[k])


def _put_back(tracked: list[torch.Tensor], clones: dict[int, torch.Tensor]) -> bool:
    """Copy the inputs autograd tracks back from their clones, recorded by autograd; False where it refuses.

    A view autograd refuses to write (a row `unbind` made, a view made under no_grad: fuzz 6196 of seed 2000000;
    its refusal comes after the copy) is put back through a plain view of its base made for the copy."""
    try:
        targets = [
            t._base.as_strided(t.size(), t.stride(), t.storage_offset())
            if t._is_view() and creation_meta(t) != CreationMeta.DEFAULT
            else t
            for t in tracked
        ]
        for t, target in zip(tracked, targets):
            # (a leaf, a parameter written under no_grad inside the graph, has no history to record)
            with torch.set_grad_enabled(target.grad_fn is not None):
                target.copy_(clones[id(t)])
    except RuntimeError:
        return False
    return True


def run_as_python(
    graph_error: BaseException, code_ref: weakref.ref, f_globals: dict, closure: tuple | None, *slots: Any
) -> Any:
    """Run the frame's code with its globals and closure, capture off, its argument slots as the frame had them."""
    if (
        not isinstance(graph_error, Exception)
        or isinstance(graph_error, FramejitError)
        or getattr(graph_error, "_framejit_wrote_inputs", False)
    ):
        # an interrupt, framejit's own error (a backend's wrong outputs), or the graph wrote into its inputs
        raise graph_error
    code = code_ref()
    fn = types.FunctionType(code, f_globals, code.co_name, None, closure)
    n, k = code.co_argcount, code.co_kwonlyargcount
    args, kwargs = list(slots[:n]), dict(zip(code.co_varnames[n : n + k], slots[n : n + k]))
    rest = slots[n + k :]
    if code.co_flags & inspect.CO_VARARGS:
        args.extend(rest[0])
        rest = rest[1:]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(rest[0])
    result = _hook.call_with_callback(None, fn, *args, **kwargs)
    # capture off: the logging handlers' frames are no user code to compile (under fullgraph they would fail)
    _hook.call_with_callback(
        None,
        logs.log.warning,
        "the compiled graph of %s (%s:%d) raised %s: %s; the frame ran as Python and returned",
        code.co_name,
        code.co_filename,
        code.co_firstlineno,
        type(graph_error).__name__,
        graph_error,
    )
    return result


def restoring_grad_mode(graph_fn: Callable, mode: bool, entry_mode: bool | None) -> Callable:
    """`graph_fn`, run in `entry_mode` (if not None), putting grad mode back to `mode`, as the trace started, if
    it raises: a graph that switches grad mode (a no_grad block inside it) and fails within the switch must not
    leave it switched, as eager's `with` block would not."""

    def run(*args: Any) -> Any:
        if entry_mode is not None:
            torch._C._set_grad_enabled(entry_mode)
        try:
            return graph_fn(*args)
        except BaseException:
            torch._C._set_grad_enabled(mode)
            raise

    return run
