"""Outputs that autograd must see as eager's ops made them: views where eager's are views, made in grad mode.

AOTAutograd returns some outputs with view metadata that eager's ops would not give them, and autograd then
refuses an in-place write the program makes later:
- An output that is a view without grad (`torch.where(...)[1:]`) comes back made under `no_grad` (AOTAutograd
  runs an inference graph so, even when grad mode is on) or inside AOTAutograd's autograd Function (a training
  graph); writing a value that requires grad into it then raises. Such an output, if its base has no grad
  either, is made again from that base, in grad mode, as eager's view was.
- A training graph that writes into an output through a view of it (`t = x + x; t.view(-1).add_(1)`) may return
  that output as a view made inside its autograd Function, and such a view may not be written in place. Where
  eager's output is no view and shares its memory with no input, and only with outputs that are views of it, a
  view that comes back is copied (the copy is differentiable; nothing else sees its memory) and those outputs
  are made again as views of the copy.
- A view eager refuses to write in place (a row from `unbind` or `for row in t`, one of several views one op
  made; a view made under no_grad that requires grad) comes back made again by AOTAutograd without that mark,
  or as no view at all: the write went through where eager raises. The mark (autograd's creation meta, read
  from the trace's fake) is set on the returned view, or on a view of the returned tensor, so that the write
  raises eager's error (also in place of the mark of a view made inside AOTAutograd's Function, which refuses
  the write with another error).
- Outputs eager computes twice (`[t.topk(2).values, t.topk(2).values]`) come back as one tensor: AOTAutograd's
  common-subexpression elimination merged them, and a write into one showed in the other. A later one that
  comes back sharing memory with an earlier one is cloned (differentiable).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch._C._autograd import CreationMeta, _set_creation_meta

from framejit.backends.mutation import (creation_meta, op_name, requires_grad, storage_of as _storage,
                                        writes_into_first_argument)
from framejit.rerun import RANDOM_OP


def _fake(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def eager_view_outputs(graph_fn: Callable[..., Any], gm: torch.fx.GraphModule,
                       example_inputs: list[Any]) -> Callable[..., Any]:
    """`graph_fn` (a backend's compilation, not the graph's own ops), with the outputs above fixed after each
    call; `graph_fn` itself where no output can need it."""
    if not torch.is_grad_enabled():
        return graph_fn
    outputs = [_fake(n) for n in next(n for n in gm.graph.nodes if n.op == "output").args[0]]
    # views without gradient: AOTAutograd made them under no_grad (an inference graph) or inside its Function
    remade = [i for i, v in enumerate(outputs) if isinstance(v, torch.Tensor) and v._is_view() and not v.requires_grad]
    copied: list[tuple[int, list[int]]] = []  # (output, the outputs that are views of it)
    if any(requires_grad(v) for v in example_inputs):
        written_through_view = {_storage(_fake(n.args[0])) for n in gm.graph.nodes
                                if writes_into_first_argument(n) and isinstance(_fake(n.args[0]), torch.Tensor)
                                and _fake(n.args[0])._is_view()}
        shared = [s for v in [*(_fake(n) for n in gm.graph.nodes if n.op == "placeholder"), *outputs]
                  if (s := _storage(v)) is not None]  # (a size input has none; StorageWeakRef == None raises)
        for i, v in enumerate(outputs):
            if requires_grad(v) and not v._is_view() and _storage(v) in written_through_view:
                # no input shares its memory, and the outputs that do are views of it (`t[..., 0]`): they are
                # made again from the copy
                views = [j for j, w in enumerate(outputs)
                         if j != i and (s := _storage(w)) is not None and s == _storage(v)]
                if all(outputs[j]._is_view() for j in views) and len(views) + 1 == shared.count(_storage(v)):
                    copied.append((i, views))
    # views eager refuses to write (a row of `for row in t`, from unbind: one of several views of one op; a view
    # made under no_grad): AOTAutograd made them again, without that mark, so a write went through
    strict = [(i, meta) for i, v in enumerate(outputs) if isinstance(v, torch.Tensor) and v._is_view()
              and i not in remade and (meta := creation_meta(v)) != CreationMeta.DEFAULT]
    repeated = _repeated_computations(gm.graph)
    if not remade and not copied and not strict and not repeated:
        return graph_fn

    def run_with_eager_views(*args: Any) -> Any:
        results = list(graph_fn(*args))
        if not all(isinstance(results[i], torch.Tensor)
                   for i in (*remade, *(i for i, _ in copied), *(i for i, _ in strict))):
            return results  # a backend returned other values than the graph's tensors: nothing to fix in them
        for i, meta in strict:
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
                    results[j] = copy.as_strided(view.size(), view.stride(),
                                                 view.storage_offset() - base.storage_offset())
        for i, j in repeated:
            if isinstance(results[j], torch.Tensor) and results[j] is results[i]:
                results[j] = results[j].clone()
        return results
    return run_with_eager_views


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
        return ("const", type(arg), arg) if isinstance(arg, (int, float, bool, str, type(None), torch.dtype)) \
            else ("object", id(arg))

    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and not writes_into_first_argument(node) \
                and not RANDOM_OP.fullmatch(op_name(node)):
            key = (node.op, node.target, number(node.args), number(node.kwargs))
            number_of[node] = ("op", numbers.setdefault(key, len(numbers)))
    out = next(n for n in graph.nodes if n.op == "output").args[0]
    first: dict[Any, int] = {}
    pairs = []
    for position, node in enumerate(out):
        if isinstance(node, torch.fx.Node) and node in number_of and isinstance(_fake(node), torch.Tensor):
            earlier = first.setdefault(number_of[node], position)
            if earlier != position and out[earlier] is not node:
                pairs.append((earlier, position))
    return pairs
