"""framejit.export: capture a function for given inputs as one standalone graph module."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo
from torch.utils import _pytree as pytree

from framejit import eval_frame, shapes
from framejit.portable import DYNAMIC_DIMS
from framejit.contracts import Guard, GuardKind
from framejit.exc import BreakCode, UserError


class _AtenOptionWithoutAtenGraph(UserError, AssertionError):
    """An ATen-graph option without `aten_graph=True`: a UserError, and the AssertionError TorchDynamo's export
    raises for it (code written against TorchDynamo's export catches that)."""


def export(
    fn: Callable[..., Any],
    *args: Any,
    dynamic_shapes: Any = None,
    aten_graph: bool = False,
    decomposition_table: dict | None = None,
    tracing_mode: str | None = None,
    **kwargs: Any,
) -> tuple[torch.fx.GraphModule, list[Guard]]:
    """`gm, guards = export(fn, *args, **kwargs)`: `fn` for these inputs as one graph; a graph break raises
    `framejit.exc.Unsupported` (or `UserError`) naming where. `dynamic_shapes` (as torch.export takes it, with
    framejit.Dim objects) makes those sizes symbolic: the graph then works for every size its guards admit, and
    the guards (SHAPE_ENV) say what it assumes of them.

    `aten_graph=True` (TorchDynamo's export option) gives the graph as ATen ops, traced by `make_fx` with
    `decomposition_table` and `tracing_mode` ("real", or "symbolic", the default where `dynamic_shapes` is
    given); each node keeps the stack trace of the user's line it came from."""
    if not aten_graph and (decomposition_table is not None or tracing_mode is not None):
        raise _AtenOptionWithoutAtenGraph(
            "export: decomposition_table and tracing_mode apply to an ATen graph; pass aten_graph=True",
            code=BreakCode.EXPORT,
        )
    fn = _unoptimized(fn)
    if not (inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, torch.nn.Module)):
        raise UserError(
            f"export: {_name(fn)} is not a Python function, method or nn.Module, so there is no Python "
            f"code to capture (wrap the call in a function)",
            code=BreakCode.EXPORT,
        )
    captured: list[tuple[torch.fx.GraphModule, list[Any]]] = []
    outputs: list[tuple[Any, ...]] = []
    guards: list[Guard] = []

    def record(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        captured.append((gm, list(example_inputs)))

        def run_and_keep_outputs(*inputs: Any) -> Any:
            out = tuple(map(_marked, gm.forward(*inputs)))
            outputs.append(out)
            return out

        return run_and_keep_outputs

    ctx = eval_frame.make_context(record, "export", nopython=True, dynamic=False, guard_export_fn=guards.extend)
    saved = eval_frame.snapshot_state()
    marked = shapes.mark_from_spec(args, kwargs, dynamic_shapes, _argument_names(fn, args, kwargs))
    try:
        result = ctx(fn)(*args, **kwargs)
    finally:
        shapes.unmark(marked)
        eval_frame.restore_state(saved)
    if len(captured) > 1:
        raise UserError(f"export: {_name(fn)} was captured as {len(captured)} graphs, not one", code=BreakCode.EXPORT)
    # An argument that was the same object as another argument or a global: the graph has one input for
    # both and would keep treating them as one in later calls (a shared submodule of `self` is fine).
    params = _parameter_names(fn)
    aliased = [
        g.code_list[0]
        for g in guards
        if g.kind == GuardKind.ALIAS and any(name in params for name in re.findall(r"L\['([^']+)'\]", g.code_list[0]))
    ]
    if aliased:
        raise UserError(
            f"export: {_name(fn)} reads one object under two names ({aliased[0]}); the exported graph "
            f"would keep treating them as one in every later call; pass distinct tensors",
            code=BreakCode.EXPORT,
        )
    graph, example_inputs = captured[0] if captured else (None, [])
    graph_outputs = outputs[-1] if outputs else ()
    gm = _standalone_module(fn, args, kwargs, graph, example_inputs, graph_outputs, result)
    if aten_graph:
        gm = _as_aten(
            gm,
            args,
            kwargs,
            decomposition_table,
            tracing_mode or ("symbolic" if dynamic_shapes is not None else "real"),
        )
    gm.meta[DYNAMIC_DIMS] = shapes.named_dims(args, kwargs, dynamic_shapes, _argument_names(fn, args, kwargs))
    return gm, guards


def _standalone_module(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    graph: torch.fx.GraphModule | None,
    example_inputs: list[Any],
    graph_outputs: tuple[Any, ...],
    result: Any,
) -> torch.fx.GraphModule:
    flat_args, in_spec = pytree.tree_flatten((args, kwargs))
    arg_names = _argument_names(fn, args, kwargs)
    root = torch.nn.Module()
    new = torch.fx.Graph()
    leaves = [new.placeholder(_leaf_name(arg_names, in_spec, i)) for i in range(len(flat_args))]
    leaf_of = {}
    for leaf, value in zip(leaves, flat_args):
        leaf_of.setdefault(id(value), leaf)  # an object passed twice: its first leaf

    env: dict[torch.fx.Node, Any] = {}
    held: dict[int, torch.fx.Node] = {}  # tensors the module holds (parameters, buffers, globals), by identity
    if graph is not None:
        placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, example_inputs):
            env[node] = leaf_of.get(id(value)) or _held_input(root, new, node, value, arg_names, held)
        for node in graph.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                break
            if node.op in ("get_attr", "call_module"):
                _copy_attr(graph, root, node.target)
            env[node] = new.node_copy(node, lambda n: env[n])
        output_nodes = [env[n] for n in pytree.tree_leaves(node.args[0])]
    else:
        output_nodes = []

    out_leaves, out_spec = pytree.tree_flatten(result)
    made = {id(t): n for t, n in zip(graph_outputs, output_nodes)}
    flat_out = []
    for value in out_leaves:
        if isinstance(value, (_GraphInt, _GraphFloat)):  # a number the graph computed (`x[0].item() * 2`)
            flat_out.append(made[id(value)])
        elif isinstance(value, torch.Tensor):
            # computed by the graph, an argument returned as is, or a tensor the function read from
            # elsewhere (a parameter, a global) and returns as is: held by the module like the graph's inputs
            node = made.get(id(value)) or leaf_of.get(id(value)) or held.get(id(value))
            flat_out.append(node if node is not None else _hold(root, new, "returned", value, held))
        else:
            flat_out.append(value)
    new.output(flat_out)
    for node in new.nodes:  # a held tensor is read at the line of its first use
        if node.op == "get_attr" and node.stack_trace is None:
            node.stack_trace = next((u.stack_trace for u in node.users if u.stack_trace), None)
    new._codegen = _PyTreeCodeGen(_PyTreeInfo(arg_names, in_spec, out_spec))
    gm = torch.fx.GraphModule(root, new)
    gm.recompile()
    return gm


def _as_aten(
    gm: torch.fx.GraphModule, args: tuple, kwargs: dict, decomposition_table: dict | None, tracing_mode: str
) -> torch.fx.GraphModule:
    """`gm` traced again to ATen ops by `make_fx`, taking and returning the same pytrees. The graph runs node
    by node under `preserve_node_meta`, so that each ATen node gets the stack trace of the node it came from."""
    from torch.fx import traceback as fx_traceback
    from torch.fx.experimental.proxy_tensor import make_fx

    def run_nodes(*flat: Any) -> Any:
        with fx_traceback.preserve_node_meta():  # the interpreter rebuilds the result's pytree: flat again
            return pytree.tree_leaves(torch.fx.Interpreter(gm).run(*flat))

    flat_args = pytree.tree_leaves((args, kwargs))
    aten = make_fx(run_nodes, decomposition_table=decomposition_table, tracing_mode=tracing_mode)(*flat_args)
    aten.graph._codegen = gm.graph._codegen
    aten.recompile()
    return aten


class _GraphInt(int):
    """A number the captured graph returned (an `.item()`, a data-dependent size): marked, so that the function's
    result is matched to the graph's outputs by identity (a plain int could be the same small int as a constant)."""


class _GraphFloat(float):
    __doc__ = _GraphInt.__doc__


def _marked(value: Any) -> Any:
    if type(value) is int:
        return _GraphInt(value)
    if type(value) is float:
        return _GraphFloat(value)
    return value


def _held_input(
    root: torch.nn.Module,
    new: torch.fx.Graph,
    node: torch.fx.Node,
    value: Any,
    arg_names: list[str],
    held: dict[int, torch.fx.Node],
) -> torch.fx.Node:
    """A graph input that is not an argument leaf: kept on the module (parameter or buffer, shared)."""
    source = node.meta.get("framejit_source", node.name)
    root_name = source[3 : source.index("']")] if source.startswith("L['") else None
    if root_name in arg_names:
        raise UserError(
            f"export: the graph reads {source}, a tensor inside argument {root_name!r} that is not a "
            f"tuple, list or dict; pass the tensor itself as an argument",
            code=BreakCode.EXPORT,
        )
    return _hold(root, new, node.name, value, held)


def _hold(
    root: torch.nn.Module, new: torch.fx.Graph, name: str, value: torch.Tensor, held: dict[int, torch.fx.Node]
) -> torch.fx.Node:
    """`value` as a parameter or buffer of the exported module (shared, not copied), under a fresh name."""
    if id(value) in held:
        return held[id(value)]
    base, n = f"held_{name}", 0
    name = base
    while hasattr(root, name):  # nn.Module's own attributes (`training`, `forward`...) included
        n += 1
        name = f"{base}_{n}"
    if isinstance(value, torch.nn.Parameter):
        root.register_parameter(name, value)
    else:
        root.register_buffer(name, value)
    held[id(value)] = new.get_attr(name)
    return held[id(value)]


def _copy_attr(graph: torch.fx.GraphModule, root: torch.nn.Module, target: str) -> None:
    """A submodule or constant the captured graph refers to, at the same dotted path on `root`."""
    *path, last = target.split(".")
    src, dst = graph, root
    for part in path:
        src = getattr(src, part)
        if not hasattr(dst, part):
            dst.add_module(part, torch.nn.Module())
        dst = getattr(dst, part)
    value = getattr(src, last)
    if isinstance(value, torch.nn.Module):
        dst.add_module(last, value)
    else:
        setattr(dst, last, value)


def _signature_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """fn's parameters as the caller passes them (a module's forward without `self`)."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        return list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return []


def _parameter_names(fn: Callable[..., Any]) -> set[str]:
    return {p.name for p in _signature_parameters(fn)}


def _argument_names(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[str]:
    """Names for the exported module's parameters: fn's own positional names where it has them, then the
    keyword names (what torch.fx's pytree codegen expects: positional ones first, then one per keyword)."""
    params = [p for p in _signature_parameters(fn) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [params[i].name if i < len(params) else f"arg{i}" for i in range(len(args))]
    names += list(kwargs)
    if len(set(names)) != len(names) or "self" in names:
        names = [f"arg{i}" for i in range(len(args))] + list(kwargs)
    return names


def _leaf_name(arg_names: list[str], in_spec: pytree.TreeSpec, index: int) -> str:
    """`x` for an argument that is one tensor, `x_0`, `x_1`... for the leaves of a container argument."""
    counts = [
        group.child(i).num_leaves for group in (in_spec.child(0), in_spec.child(1)) for i in range(group.num_children)
    ]
    for name, count in zip(arg_names, counts):
        if index < count:
            return name if count == 1 else f"{name}_{index}"
        index -= count
    return f"leaf{index}"


def _unoptimized(fn: Any) -> Any:
    """The user's function or module behind a framejit.optimize/compile wrapper: export captures it itself."""
    if isinstance(fn, eval_frame.OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_framejit_orig", fn)


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
