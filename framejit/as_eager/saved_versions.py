"""Eager's check that a tensor saved for backward was not written in place before the backward ran."""

from __future__ import annotations

import inspect
import weakref
from collections import Counter
from typing import Any, Callable

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from framejit.as_eager.rerun import inputs_written_in_place, unversioned_inputs
from framejit.op_effects import (
    batch_norm_stats_written,
    grad_fn_of,
    node_storage,
    requires_grad,
    storage_of as _storage,
    writes_into_first_argument,
)

_MODIFIED = "modified by an inplace operation"

# what one output's backward checks: ("input" | "output", position) watched for a version change, or
# ("raise", message) for a tensor the graph wrote after an op saved it
Check = tuple[str, Any]


def _saved_tensors(node: Any) -> list[tuple[str, torch.Tensor | BaseException]]:
    """The tensors `node` (a fake autograd node) saved, unpacked, by attribute name; the exception where unpacking
    fails."""
    names = _SAVED_NAMES.get(type(node))
    if names is None:
        names = _SAVED_NAMES[type(node)] = [a for a in dir(node) if a.startswith("_saved_")] + (
            ["saved_tensors"] if hasattr(node, "saved_tensors") else []
        )
    found: list[tuple[str, torch.Tensor | BaseException]] = []
    for name in names:
        try:
            value = getattr(node, name)
        except RuntimeError as e:
            if _MODIFIED in str(e):
                found.append((name, e))
            continue
        except Exception:  # noqa: BLE001 - an attribute that is not a saved tensor here
            continue
        values = value if isinstance(value, (tuple, list)) else (value,)
        found.extend((name, v) for v in values if isinstance(v, torch.Tensor))
    return found


_SAVED_NAMES: dict[type, list[str]] = {}


def saves_behind_copy_slices(
    call: Callable[[list[Any]], Any], args: list[Any], result: Any
) -> tuple[Any, list[tuple[str, torch.Tensor]]] | None:
    """For an in-place op on a view that requires grad (`t.view(...).exp_()`, run by `call(args)`, on fakes):
    autograd wraps the op's node in a CopySlices node of the view's base, and Python cannot read what the wrapped
    node saved. The op run again on a copy of the view that is no view shows it: (the base's CopySlices node, the
    saved tensors by name, the view standing for the copy)."""
    view = args[0] if args else None
    if (
        not (isinstance(view, torch.Tensor) and view._is_view() and requires_grad(result))
        or not torch.is_grad_enabled()
    ):
        return None
    copy = view.detach().clone().requires_grad_(True).clone()  # (not a leaf: an in-place op may write into it)
    try:
        out = call([copy, *args[1:]])
    except Exception:  # noqa: BLE001 - nothing to learn: the checks stay as they were
        return None
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return None
    copied = _storage(copy)
    saved = [
        (name, view if copied is not None and _storage(t) is not None and _storage(t) == copied else t)
        for name, t in _saved_tensors(out.grad_fn)
        if isinstance(t, torch.Tensor)
    ]
    return grad_fn_of(view._base), saved


def saved_checks(gm: torch.fx.GraphModule) -> dict[int, list[Check]]:
    """For each output position, the checks eager's backward would make on the way from that output: the inputs
    and outputs sharing storage with a tensor an op saved, and the saved tensors already written in the graph.
    (Kept in the module's meta: the backend's split and the wrappers around what it compiled each ask.)"""
    if "framejit_saved_checks" not in gm.meta:
        gm.meta["framejit_saved_checks"] = _saved_checks(gm)
    return gm.meta["framejit_saved_checks"]


def _saved_checks(gm: torch.fx.GraphModule) -> dict[int, list[Check]]:
    placeholders = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    outputs = _output_fakes(gm)
    owners: dict[StorageWeakRef, Check] = {}
    for kind, values in (("output", outputs), ("input", placeholders)):  # an input wins: it is there first
        for i, value in enumerate(values):
            storage = _storage(value)
            if storage is not None:
                owners[storage] = (kind, i)
    stop = {v.grad_fn for v in placeholders if isinstance(v, torch.Tensor) and v.grad_fn is not None}
    later_writes = _LaterWrites(gm.graph)
    behind: dict[Any, list[torch.Tensor]] = {}  # a CopySlices node -> what the op it wraps saved
    for n in gm.graph.nodes:
        if (found := n.meta.get("saves_behind_copy_slices")) is not None:
            behind.setdefault(found[0], []).extend(t for _, t in found[1])
    checks_of_node: dict[Any, list[Check]] = gm.meta.setdefault("framejit_checks_of_node", {})
    result: dict[int, list[Check]] = {}
    for o, value in enumerate(outputs):
        grad_fn = grad_fn_of(value) if requires_grad(value) else None
        if grad_fn is None:
            continue
        found: dict[Check, None] = {}
        todo, seen = [grad_fn], set()
        while todo:
            node = todo.pop()
            if node is None or node in seen or node in stop:
                continue
            seen.add(node)
            if node not in checks_of_node:
                checks_of_node[node] = _node_checks(node, owners, later_writes) + [
                    owner for t in behind.get(node, ()) if (owner := owners.get(_storage(t))) is not None
                ]
            found.update(dict.fromkeys(checks_of_node[node]))
            todo.extend(f for f, _ in node.next_functions)
        if found:
            result[o] = list(found)
    return result


class _LaterWrites:
    """Which saved tensors of the fake autograd nodes a later op of the graph writes in place. A fake whose
    unpacking raises may have seen the op's own write, which eager's kernel makes without moving the version
    (batch_norm's running statistics, under symbolic sizes): its raise stands only where a later op writes the
    argument the saved attribute is named after (`_saved_running_mean`: `running_mean`), or, where the name says
    nothing, any memory the op touched."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.node_of: dict[Any, tuple[torch.fx.Node, int]] = {}  # fake autograd node -> graph node, its position
        self.last_write: dict[StorageWeakRef | None, int] = {}  # memory -> position of the last op writing it
        for position, node in enumerate(graph.nodes):
            if node.op not in ("call_function", "call_method", "call_module"):
                continue
            if writes_into_first_argument(node) and isinstance(node.args[0], torch.fx.Node):
                self.last_write[node_storage(node.args[0])] = position
            grad_fn = node.meta["grad_fn"] if "grad_fn" in node.meta else grad_fn_of(node.meta.get("example_value"))
            if grad_fn is not None:
                self.node_of.setdefault(grad_fn, (node, position))

    def written(self, grad_fn: Any, attribute: str) -> bool:
        if grad_fn not in self.node_of:
            return True  # (an inner node of a composite op: its raise stands)
        node, position = self.node_of[grad_fn]
        argument = _bound_arguments(node).get(attribute.removeprefix("_saved_"))
        touched = [argument] if isinstance(argument, torch.fx.Node) else [node, *node.all_input_nodes]
        # (at the op's own position too: an in-place op's own write moves the version of what it saved, in eager,
        # `t.mul_(t.detach())`)
        return any(self.last_write.get(node_storage(n), -1) >= position for n in touched)

    def unversioned(self, grad_fn: Any, attribute: str) -> bool:
        """Whether the saved attribute is memory the op writes without moving its version (a batch_norm's running
        statistics in train mode): eager's check never fires on the op's own writes, nor on a later batch_norm's,
        where a compiled graph's copy into the statistics moves the version. (Its backward does not read them.)"""
        if grad_fn not in self.node_of:
            return False
        node, _ = self.node_of[grad_fn]
        argument = _bound_arguments(node).get(attribute.removeprefix("_saved_"))
        return argument is not None and argument in batch_norm_stats_written(node)


def _bound_arguments(node: torch.fx.Node) -> dict[str, Any]:
    try:
        return dict(inspect.signature(node.target).bind(*node.args, **node.kwargs).arguments)
    except (TypeError, ValueError):  # a method, a builtin without a signature
        return {}


def _node_checks(node: Any, owners: dict[StorageWeakRef, Check], later_writes: _LaterWrites) -> list[Check]:
    checks: list[Check] = []
    for name, saved in _saved_tensors(node):
        if later_writes.unversioned(node, name):
            continue
        if isinstance(saved, BaseException):
            if later_writes.written(node, name):
                checks.append(("raise", str(saved)))
        elif (owner := owners.get(_storage(saved))) is not None:
            checks.append(owner)
    return checks


# the most elements of a tensor eager's ops save on some outputs' paths only that is copied (64 KiB of float32): a
# decoder's key/value cache is one such tensor per layer, which a training step should not copy
_SMALL = 16384


def holding_saved_tensors(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn` (a training graph's node) made to save what eager's ops would let the program write after it.

    - While the program's own saved-tensor hooks are on with grad enabled, the graph's own ops run: the hooks see
      each tensor autograd saves, and a compiled graph saves other tensors than eager's ops; non-reentrant
      activation checkpointing recomputes the forward in backward (as eager ops, or through this same entry)
      and refuses tensors that differ from what the forward saved.
    - A graph input or output the backend's partitioner saved where none of eager's ops saved any of it (it saves
      `x` and recomputes `y = x + x` in backward, where eager's op saved `y`) is copied before the graph returns
      (no program code ran since the save): the program may write into `x` after the graph, as eager allows.
      The first call finds out, under saved-tensor hooks of our own, whether the node saves any; a graph whose
      node saves none runs without them from then on, and one whose node saves only inputs that the graph does not
      write and nothing else shares (a causal mask buffer, a convolution's bias the partitioner keeps) is given
      copies of those inputs instead (a copy per call, as under the hooks, without their cost per saved tensor).
      Under the hooks AOTAutograd's own version check is off, and their unpack makes it for every saved tensor not
      copied.
    - A graph output eager's ops save on the way from some outputs only (`t` and `t.logsumexp(0)` returned:
      logsumexp saves `t`) reaches the program as a clone, if small and nothing else shares its memory: the
      program may write into `t` after the graph and backward from `t` alone, which never runs logsumexp's
      backward in eager, while the node unpacks all it saved. Such an input (a tensor with a history of its own,
      a global outside autograd) is copied under the hooks, if small. Letting the node read the written tensor
      instead would be wrong: it may need the value, say to recompute `max`'s indices from an input, for the
      outputs that do get a gradient. A large one (a decoder's key/value cache) is not copied, at the cost of the
      raise torch.compile makes too then."""
    if not torch.is_grad_enabled() or not any(requires_grad(v) for v in example_inputs):
        return graph_fn
    eager_saved = {c for cs in saved_checks(gm).values() for c in cs if c[0] != "raise"}
    # (inputs: not the leaves that require grad, nor index tensors. A module's parameters, which eager's ops save on
    # the way from the outputs they feed, and a model's token ids, which its embedding saves, are written between
    # a forward and its backward by no training loop, and copying them would keep the hooks on for most models)
    some_paths = {
        c
        for c in eager_saved - _saved_on_every_path(gm)
        if c[0] == "output" or _is_floating(example_inputs[c[1]]) and not _is_parameter_like(example_inputs[c[1]])
    }
    cloned = _outputs_to_clone(gm, some_paths)
    cloned_keys = {("output", o) for o in cloned}
    top_hooks = torch._C._autograd._top_saved_tensors_default_hooks
    # unknown until the first call in grad mode; then False (the node saves nothing the program may write), the
    # inputs it saves passed as copies from then on (a tuple of positions), or True (held under the hooks)
    hooked: list[bool | tuple[int, ...] | None] = [None]
    copyable = _inputs_passable_as_copies(gm)

    def cloning(results: Any) -> Any:
        if not cloned:
            return results
        results = list(results)
        with torch.enable_grad():  # (a graph may end inside a no_grad block it switched into)
            for o in cloned:
                if isinstance(results[o], torch.Tensor) and results[o].numel() <= _SMALL:
                    results[o] = _clone_alike(results[o])
        return results

    def run(*args: Any) -> Any:
        if not torch.is_grad_enabled():
            return graph_fn(*args)
        if top_hooks(True) is not None:
            return gm(*args)
        if hooked[0] is False:
            return cloning(graph_fn(*args))
        if type(hooked[0]) is tuple:
            args = list(args)
            for i in hooked[0]:
                args[i] = _clone_alike(args[i])
            return cloning(graph_fn(*args))
        held: list[list] = []

        def pack(tensor: torch.Tensor) -> list:
            held.append([tensor, tensor._version])
            return held[-1]

        with torch.autograd.graph.saved_tensors_hooks(pack, _unpack_held):
            results = graph_fn(*args)
        values = {("input", i): a for i, a in enumerate(args)} | {("output", o): r for o, r in enumerate(results)}
        copied = {
            _storage(v): key
            for key, v in values.items()
            if key not in cloned_keys and (key not in eager_saved or key in some_paths and v.numel() <= _SMALL)
        }
        copied.pop(None, None)
        found: set[Check] = set()
        for entry in held:
            # a counter the graph's call set back (inductor restores batch norm statistics' versions after writing
            # them, as eager's kernel never moves them) is noted as the program receives it
            entry[1] = min(entry[1], entry[0]._version)
            if (key := copied.get(_storage(entry[0]))) is not None:
                # (in its layout: the backward was compiled for it, and inductor's asserts its strides)
                entry[0] = _clone_alike(entry[0].detach())
                entry[1] = entry[0]._version
                found.add(key)
        if hooked[0] is None:
            inputs = tuple(sorted(i for kind, i in found if kind == "input"))
            hooked[0] = bool(found) and (
                inputs if found == {("input", i) for i in inputs} and copyable.issuperset(inputs) else True
            )
        return cloning(results)

    return run


def _inputs_passable_as_copies(gm: torch.fx.GraphModule) -> set[int]:
    """The graph inputs a call may pass as copies, so that what the node saves of them is out of the program's reach:
    no op of the graph writes into them, and no other input or output shares their memory (the storage-sharing
    guard keeps it so). A gradient flows through the copy to the input, as autograd records the copy."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = [n for n in gm.graph.output_node().args[0] if isinstance(n, torch.fx.Node)]
    sharing = Counter(s for n in (*placeholders, *out) if (s := node_storage(n)) is not None)
    written = inputs_written_in_place(gm.graph) | unversioned_inputs(gm.graph)
    return {
        i
        for i, p in enumerate(placeholders)
        if i not in written and (s := node_storage(p)) is not None and sharing[s] == 1
    }


def _clone_alike(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` laid out as it is: expanded where it is (stride 0), so that eager's refusal to write into
    it stands ("more than one element of the written-to tensor refers to a single memory location": fuzz 7947 of
    seed 2700000), and with its gaps (a slice `t[:, ::2]`), so that `view` refuses it as eager's does. (clone()
    makes both dense.)"""
    if tensor.is_contiguous():
        return tensor.clone()
    compact = tensor
    for d in range(tensor.dim()):
        if tensor.stride(d) == 0:
            compact = compact.narrow(d, 0, 1)
    copy = torch.empty_strided(compact.size(), compact.stride(), dtype=tensor.dtype, device=tensor.device)
    copy.copy_(compact)
    return copy if compact is tensor else copy.expand(tensor.shape)


def _is_floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _is_parameter_like(value: Any) -> bool:
    """A leaf that requires grad: a module's parameter (or a tensor made one)."""
    return requires_grad(value) and grad_fn_of(value) is None


def _outputs_to_clone(gm: torch.fx.GraphModule, some_paths: set[Check]) -> list[int]:
    """The outputs eager's ops save on some outputs' paths only that the program can get as a clone: no other input
    or output shares their memory (a view's base is then out of the program's reach, but for `_base`; a mark that
    refuses writes is set again by output_views.py). The node keeps what it saved, the program writes into the
    clone, and no saved-tensor hooks are needed (an input has no such way round: its copy is held under them)."""
    out = gm.graph.output_node().args[0]
    storages = [
        s
        for n in (*(n for n in gm.graph.nodes if n.op == "placeholder"), *out)
        if isinstance(n, torch.fx.Node) and (s := node_storage(n)) is not None
    ]
    return sorted(o for kind, o in some_paths if kind == "output" and storages.count(node_storage(out[o])) == 1)


def _saved_on_every_path(gm: torch.fx.GraphModule) -> set[Check]:
    """The graph inputs and outputs whose memory eager's ops save on the way from every differentiable output: a
    backward that reaches the graph's node reaches one of those ops too, so eager's check is the node's."""
    checks = saved_checks(gm)
    out = gm.graph.output_node().args[0]
    paths = [
        set(checks.get(o, ()))
        for o, n in enumerate(out)
        if isinstance(n, torch.fx.Node) and requires_grad(n.meta.get("example_value"))
    ]
    return {c for c in set.intersection(*paths) if c[0] != "raise"} if paths else set()


def _unpack_held(entry: list) -> torch.Tensor:
    tensor, version = entry
    if tensor._version != version:  # (the check the hooks switched off)
        raise RuntimeError(
            f"one of the variables needed for gradient computation has been {_MODIFIED}: "
            f"[{tensor.type()} {list(tensor.shape)}] is at version {tensor._version}; expected "
            f"version {version} instead"
        )
    return tensor


def runs_own_ops(compiled: Callable[..., Any], gm: torch.fx.GraphModule) -> bool:
    """Whether a backend's `compiled` is the graph's own forward (its ops' autograd nodes make eager's checks)."""
    return compiled is gm or getattr(compiled, "__self__", None) is gm


def checking_saved_versions(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn` (what the backend compiled, perhaps wrapped), whose backward raises where eager's would for a
    saved tensor written in place; `graph_fn` itself where nothing could be written."""
    if not torch.is_grad_enabled() or not any(requires_grad(v) for v in example_inputs):
        return graph_fn
    checks = saved_checks(gm)
    if not checks:
        return graph_fn
    inputs = sorted({i for cs in checks.values() for kind, i in cs if kind == "input"})
    outputs = sorted({i for cs in checks.values() for kind, i in cs if kind == "output"})

    def run(*args: Any) -> Any:
        results = graph_fn(*args)
        # (a backend may return other values than the graph's tensors: such outputs are not checked)
        noted = {("input", i): _noting(args[i]) for i in inputs}
        noted.update({("output", i): _noting(results[i]) for i in outputs if isinstance(results[i], torch.Tensor)})
        freed = _Freed(gm)  # (this call's: each call's node is its own)
        by_node: dict[Any, list[tuple[int, int, list[Check]]]] = {}
        rebased: dict[Any, list[tuple[int, int, list[Check], Any, Any]]] = {}
        with torch.enable_grad():  # (a view the graph returned from inside a no_grad block has its node made)
            for o, cs in checks.items():
                output = results[o]
                node = getattr(output, "grad_fn", None)
                if node is not None and all(key in noted for key in cs if key[0] != "raise"):
                    by_node.setdefault(node, []).append((output.output_nr, o, cs))
                    # a view written in place after the graph is rebased on its base: the gradient then passes the
                    # base's node instead (the hidden base AOTAutograd returns for a view of an intermediate)
                    base = output._base
                    if base is not None and base.grad_fn is not None and not any(base is r for r in results):
                        rebased.setdefault(base.grad_fn, []).append((base.output_nr, o, cs, weakref.ref(output), node))
        for node, reached in by_node.items():
            node.register_prehook(_checking(reached, noted, freed, _weak(node)))
        for node, views in rebased.items():
            node.register_prehook(_checking_rebased_views(views, noted, freed))
        return results

    return run


def _noting(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """What a check holds of `tensor`: the tensor itself if it has no autograd node (a parameter, a tensor without
    grad), else an alias without one (the same version counter): held by a hook on the graph's node, a tensor
    with a node would make a reference cycle through it. Held, not weakly referenced, as eager's node holds what
    it saved: a temporary of the program may be dropped while a view of it, written later, lives on."""
    return (tensor if tensor.grad_fn is None else tensor.detach()), tensor._version


def _checking_rebased_views(
    views: list[tuple[int, int, list[Check], Any, Any]], noted: dict, freed: _Freed
) -> Callable[[tuple], None]:
    """The checks of the view outputs of a base, run at the base's node for each view since rebased (written in
    place: its node is no longer the one the graph made, whose check the gradient now bypasses)."""

    def check(grads: tuple) -> None:
        moved = []
        for nr, o, cs, view, node in views:
            alive = view()
            if alive is not None and alive.grad_fn is not node:
                moved.append((nr, o, cs))
        if moved:
            _checking(moved, noted, freed)(grads)

    return check


def _weak(node: Any) -> Callable[[], Any]:
    """A weak reference to an autograd node where it takes one (a hook holding its own node strongly would make a
    cycle through C++ that Python's collector cannot free)."""
    try:
        return weakref.ref(node)
    except TypeError:
        return lambda: None


def _freed(node: Any) -> bool:
    """Whether a backward already ran through `node` and freed what it saved (a custom Function's node: the
    AOTAutograd node of a graph)."""
    try:
        node.saved_tensors
    except RuntimeError as e:
        return "second time" in str(e)
    except AttributeError:
        pass
    return False


_SECOND_TIME = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


def _output_fakes(gm: torch.fx.GraphModule) -> list[Any]:
    out = gm.graph.output_node().args[0]
    return [n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None for n in out]


class _Freed:
    """What eager's aborted backward freed, for one call's node. Eager's backward runs and frees each op's node on
    the way to the op whose saved tensor was written, then raises there; a later backward through one of those ops
    raises "backward through the graph a second time" (fuzz 8269 of seed 2400000). The graph's check raises before
    the graph's node runs, so it notes the fake nodes that eager's would have freed, and a later check whose output
    leads to one raises eager's error. (Worked out from the fake autograd graph only when a check raises.) A
    backward that passed an output's checks freed the ops on its way too (`passed`)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.nodes: set[Any] = set()
        self.ran: set[int] = set()  # outputs a backward without retain_graph went through: eager freed their ops

    def passed(self, o: int) -> None:
        """A backward from output `o` passed its checks: without retain_graph, eager's ops on the way that saved
        what the checks watch are freed, and a later backward through them raises "second time" (fuzz 5994 of
        seed 3300000, where the graph's node saved nothing and so could not raise it itself)."""
        if not torch._C._autograd._get_current_graph_task_keep_graph():
            self.ran.add(o)

    def _reached(self, o: int) -> dict[Any, list[Any]]:
        """The fake nodes of the graph's ops on the way from output `o`, each with the nodes it leads to."""
        stop = {grad_fn_of(n.meta.get("example_value")) for n in self.gm.graph.nodes if n.op == "placeholder"}
        graph: dict[Any, list[Any]] = {}
        todo = [grad_fn_of(_output_fakes(self.gm)[o])]
        while todo:
            node = todo.pop()
            if node is None or node in graph or node in stop:
                continue
            graph[node] = [f for f, _ in node.next_functions if f is not None]
            todo.extend(graph[node])
        return graph

    def raised(self, o: int, check: Check) -> None:
        """A backward from output `o` raised for `check`: the nodes on the way to a node making that check ran."""
        if torch._C._autograd._get_current_graph_task_keep_graph():
            return  # (retain_graph: eager frees nothing)
        graph = self._reached(o)
        led_from: dict[Any, list[Any]] = {}
        for node, nexts in graph.items():
            for n in nexts:
                led_from.setdefault(n, []).append(node)
        checks_of_node = self.gm.meta["framejit_checks_of_node"]
        making = [node for node in graph if check in checks_of_node.get(node, ())]
        todo, ran = [n for node in making for n in led_from.get(node, ())], set()
        while todo:
            node = todo.pop()
            if node not in ran:
                ran.add(node)
                todo.extend(led_from.get(node, ()))
        self.nodes |= {node for node in ran - set(making) if _saved_tensors(node)}

    def meets(self, o: int) -> bool:
        """Whether a backward from output `o` reaches an op eager freed."""
        return o in self.ran or (bool(self.nodes) and not self.nodes.isdisjoint(self._reached(o)))


def _checking(
    reached: list[tuple[int, int, list[Check]]], noted: dict, freed: _Freed, node: Callable[[], Any] = lambda: None
) -> Callable[[tuple], None]:
    """A prehook raising eager's error for a saved tensor written since. Eager's op, when a backward already ran
    through it, raises "backward through the graph a second time" first: where the graph's node was freed so,
    the check leaves the raise to the node itself (fuzz 1826 of seed 2100000), and where an aborted backward
    would have freed an op on the way, the check raises it."""

    def check(grads: tuple) -> None:
        for nr, o, cs in reached:
            if grads[nr] is None:
                continue
            if freed.meets(o):
                raise RuntimeError(_SECOND_TIME)
            for c in cs:
                kind, what = c
                if kind == "raise":
                    freed.raised(o, c)
                    raise RuntimeError(what)
                tensor, version = noted[c]
                if tensor._version != version:
                    if (alive := node()) is not None and _freed(alive):
                        return
                    freed.raised(o, c)
                    raise RuntimeError(
                        f"one of the variables needed for gradient computation has been {_MODIFIED}: "
                        f"[{tensor.type()} {list(tensor.shape)}], graph {kind} {what}, is at version "
                        f"{tensor._version}; expected version {version} instead (framejit checks the tensors "
                        f"eager's ops saved for backward)"
                    )
            freed.passed(o)

    return check
