"""Outputs that autograd must see as eager's ops made them: views where eager's are views, made in grad mode."""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
from torch._C._autograd import CreationMeta, _set_creation_meta

from framejit.op_effects import (
    RANDOM_OP,
    creation_meta,
    op_name,
    requires_grad,
    storage_of as _storage,
    writes_into_first_argument,
)


def _fake(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def eager_view_outputs(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn` (a backend's compilation, not the graph's own ops), with the outputs above fixed after each
    call; `graph_fn` itself where no output can need it."""
    out_nodes = gm.graph.output_node().args[0]
    outputs = [_fake(n) for n in out_nodes]
    graph_fn = _no_grad_views_of_inputs(graph_fn, gm, outputs, example_inputs)
    if not torch.is_grad_enabled():
        return graph_fn
    # views without gradient: AOTAutograd made them under no_grad (an inference graph) or inside its Function
    remade = [i for i, v in enumerate(outputs) if isinstance(v, torch.Tensor) and v._is_view() and not v.requires_grad]
    copied: list[tuple[int, list[int]]] = []  # (output, the outputs that are views of it)
    if any(requires_grad(v) for v in example_inputs):
        written_through_view = {
            _storage(_fake(n.args[0]))
            for n in gm.graph.nodes
            if writes_into_first_argument(n)
            and isinstance(_fake(n.args[0]), torch.Tensor)
            and _fake(n.args[0])._is_view()
        }
        shared = [
            s
            for v in [*(_fake(n) for n in gm.graph.nodes if n.op == "placeholder"), *outputs]
            if (s := _storage(v)) is not None
        ]  # (a size input has none; StorageWeakRef == None raises)
        for i, v in enumerate(outputs):
            if requires_grad(v) and not v._is_view() and _storage(v) in written_through_view:
                # no input shares its memory, and the outputs that do are views of it (`t[..., 0]`): they are
                # made again from the copy
                views = [
                    j for j, w in enumerate(outputs) if j != i and (s := _storage(w)) is not None and s == _storage(v)
                ]
                if all(outputs[j]._is_view() for j in views) and len(views) + 1 == shared.count(_storage(v)):
                    copied.append((i, views))
    # views eager refuses to write (a row of `for row in t`, from unbind: one of several views of one op; a view
    # made under no_grad): AOTAutograd made them again, without that mark, so a write went through
    strict = [
        (i, meta)
        for i, v in enumerate(outputs)
        if isinstance(v, torch.Tensor)
        and v._is_view()
        and i not in remade
        and (meta := creation_meta(v)) != CreationMeta.DEFAULT
    ]
    # ... and where the view is one of several an op made (a row of `for row in t`), it is made by that op again,
    # so that autograd's refusal names it as eager's does ("Output 1 of Unbind", not "Output 0 of AsStrided")
    # (rows without grad too: eager's refuse a later use with grad once their base was written with grad, fuzz 4425
    # of seed 2400000)
    several = {
        i: made
        for i, v in enumerate(outputs)
        if isinstance(v, torch.Tensor)
        and v._is_view()
        and creation_meta(v) == CreationMeta.MULTI_OUTPUT_NODE
        and (made := _one_of_several_views(out_nodes[i])) is not None
    }
    sources = {i: list(out_nodes).index(made[0].args[0]) for i, made in several.items() if made[0].args[0] in out_nodes}
    repeated = _repeated_computations(gm.graph)
    if not remade and not copied and not strict and not repeated:
        return graph_fn

    def run_with_eager_views(*args: Any) -> Any:
        results = list(graph_fn(*args))
        # (in grad mode, where eager's ops made these views: the graph may end inside a `no_grad` block, and a view
        # made there would have no autograd node until the program uses it with grad)
        with torch.enable_grad():
            return _made_as_eager(results, args)

    def _made_as_eager(results: list[Any], args: tuple) -> list[Any]:
        if not all(
            isinstance(results[i], torch.Tensor) for i in (*remade, *(i for i, _ in copied), *(i for i, _ in strict))
        ):
            return results  # a backend returned other values than the graph's tensors: nothing to fix in them
        made_again = set()
        for i, (op, index, layout, count) in several.items():
            if isinstance(layout, int):  # (symbolic: the input's, in this call)
                layout = (tuple(args[layout].shape), args[layout].stride(), args[layout].storage_offset())
            src = sources.get(i)
            if (
                src is not None
                and isinstance(results[src], torch.Tensor)
                and (held := _storage(results[src])) is not None
                and held == _storage(results[i])
            ):
                # the graph returns the rows' source too (inductor returns rows sharing its memory, but no views):
                # the rows are made of it, so that a write into it reaches them as in eager
                results[i] = _view_of_several(results[src], op, index, layout)
                made_again.add(i)
            elif results[i]._is_view():
                results[i] = _view_of_several(results[i]._base, op, index, layout)
                made_again.add(i)
            elif op_name(op.target) == "unbind":
                # AOTAutograd returns the rows of an intermediate as outputs of its own: the row is made a row of
                # `unbind` of itself repeated (`expand`: no copy; the gradient passes to the row alone)
                dim = _unbind_dim(op, len(layout[0]))
                expanded = results[i].unsqueeze(dim).expand(*layout[0][:dim], count, *layout[0][dim + 1 :])
                results[i] = expanded.unbind(dim)[index]
                made_again.add(i)
        for i, meta in strict:
            if i in made_again:
                continue
            view = results[i] if results[i]._is_view() else results[i].view_as(results[i])
            # (a view AOTAutograd made inside its Function refuses the write too, with another error)
            if creation_meta(view) != meta:
                try:
                    _set_creation_meta(view, meta)
                except RuntimeError:  # a view autograd does not track (no grad anywhere): nothing to refuse
                    continue
                results[i] = view
        for i in remade:
            view = results[i]
            if i in made_again:
                continue
            if view._is_view() and not view._base.requires_grad:
                results[i] = view._base.as_strided(view.size(), view.stride(), view.storage_offset())
        for i, views in copied:
            base = results[i]
            if base._is_view():
                results[i] = copy = base.clone()
                if views and copy.stride() != base.stride():
                    results[i] = base  # (a clone keeps the strides of a dense tensor; others stay as they came)
                    continue
                for j in views:
                    view = results[j]
                    results[j] = copy.as_strided(
                        view.size(), view.stride(), view.storage_offset() - base.storage_offset()
                    )
        for i, j in repeated:
            if isinstance(results[j], torch.Tensor) and results[j] is results[i]:
                results[j] = results[j].clone()
        return results

    return run_with_eager_views


def _no_grad_views_of_inputs(
    graph_fn: Callable[..., Any], gm: torch.fx.GraphModule, outputs: list[Any], example_inputs: list[Any]
) -> Callable[..., Any]:
    """`graph_fn`, with its views of inputs that require grad, made in a `no_grad` block (`outputs`: the
    graph's output fakes), made again from the input under no_grad. Eager's such views require grad (their base
    does; `x[-1]`) and refuse a later write with grad on; AOTAutograd's came back without grad (fuzz 6311 of
    seed 2400000)."""
    inputs = [_storage(_fake(n)) for n in gm.graph.nodes if n.op == "placeholder"]
    found: dict[int, int] = {}  # output -> the input it is a view of
    for o, v in enumerate(outputs):
        if (
            isinstance(v, torch.Tensor)
            and v._is_view()
            and v.requires_grad
            and (storage := _storage(v)) is not None
            and creation_meta(v) == CreationMeta.NO_GRAD_MODE
        ):
            sharing = [i for i, s in enumerate(inputs) if s is not None and s == storage]
            if len(sharing) == 1 and requires_grad(example_inputs[sharing[0]]):
                found[o] = sharing[0]
    if not found:
        return graph_fn

    def run_with_views_of_inputs(*args: Any) -> Any:
        results = list(graph_fn(*args))
        with torch.no_grad():
            for o, i in found.items():
                got, base = results[o], args[i]
                if isinstance(got, torch.Tensor) and not got.requires_grad and requires_grad(base):
                    results[o] = base.as_strided(got.size(), got.stride(), got.storage_offset())
        return results

    return run_with_views_of_inputs


_SEVERAL_VIEWS = frozenset({"unbind", "split", "chunk", "tensor_split", "split_with_sizes"})
Layout = tuple[tuple[int, ...], tuple[int, ...], int]  # sizes, strides, storage offset


def _one_of_several_views(node: Any) -> tuple[torch.fx.Node, int, Layout | int, int] | None:
    """For an output `op(src, ...)[i]` where `op` makes several views (`unbind`, `split`, ...) of a `src` whose
    layout is numbers, or that is a graph input, and takes no other graph value: (the op's node, i, src's layout
    or, where it is symbolic, the input's position, how many views it made)."""
    if not isinstance(node, torch.fx.Node) or node.target is not operator.getitem:
        return None
    op, index = node.args
    if (
        not isinstance(op, torch.fx.Node)
        or not isinstance(index, int)
        or op_name(op.target) not in _SEVERAL_VIEWS
        or op.op not in ("call_method", "call_function")
        or not op.args
    ):
        return None
    src = op.args[0]
    fake = _fake(src)
    if not isinstance(fake, torch.Tensor) or any(a is not src for a in op.all_input_nodes):
        return None
    layout: Layout | int = (tuple(fake.shape), tuple(fake.stride()), fake.storage_offset())
    made = _fake(op)
    if not isinstance(made, tuple):
        return None
    if not all(isinstance(d, int) for d in (*layout[0], *layout[1], layout[2])):
        if src.op != "placeholder":
            return None
        layout = [n for n in src.graph.nodes if n.op == "placeholder"].index(src)
    return op, index, layout, len(made)


def _unbind_dim(op: torch.fx.Node, ndim: int) -> int:
    dim = op.args[1] if len(op.args) > 1 else op.kwargs.get("dim", 0)
    return dim % ndim


def _view_of_several(base: torch.Tensor, op: torch.fx.Node, index: int, layout: Layout) -> torch.Tensor:
    """`op(src, ...)[index]`, src made from `base` (the returned view's base) where it is not `base` itself."""
    src = base if (tuple(base.shape), base.stride(), base.storage_offset()) == layout else base.as_strided(*layout)
    made = (
        getattr(src, op.target)(*op.args[1:], **op.kwargs)
        if op.op == "call_method"
        else op.target(src, *op.args[1:], **op.kwargs)
    )
    return made[index]


def _repeated_computations(graph: torch.fx.Graph) -> list[tuple[int, int]]:
    """Pairs (earlier, later) of output positions that are distinct tensors in eager, computed by the same op on
    the same values (a backend may merge them): each op gets a number, equal for equal computations."""
    numbers: dict[Any, int] = {}
    number_of: dict[torch.fx.Node, Any] = {}

    def number(arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node):
            return number_of.get(arg, ("node", arg))
        if isinstance(arg, (tuple, list)):
            return (type(arg), tuple(number(a) for a in arg))
        if isinstance(arg, dict):
            return (dict, tuple((k, number(v)) for k, v in arg.items()))
        return (
            ("const", type(arg), arg)
            if isinstance(arg, (int, float, bool, str, type(None), torch.dtype))
            else ("object", id(arg))
        )

    for node in graph.nodes:
        if (
            node.op in ("call_function", "call_method")
            and not writes_into_first_argument(node)
            and not RANDOM_OP.fullmatch(op_name(node.target))
        ):
            key = (node.op, node.target, number(node.args), number(node.kwargs))
            number_of[node] = ("op", numbers.setdefault(key, len(numbers)))
    out = graph.output_node().args[0]
    first: dict[Any, int] = {}
    pairs = []
    for position, node in enumerate(out):
        if isinstance(node, torch.fx.Node) and node in number_of and isinstance(_fake(node), torch.Tensor):
            earlier = first.setdefault(number_of[node], position)
            if earlier != position and out[earlier] is not node:
                pairs.append((earlier, position))
    return pairs


def requiring_grad(graph_fn: Callable, positions: list[int]) -> Callable:
    """`graph_fn`, its outputs at `positions` (detached in the graph) made leaves that require grad."""

    def run(*args: Any) -> Any:
        outputs = graph_fn(*args)
        for i in positions:
            outputs[i].requires_grad_()
        return outputs

    return run
