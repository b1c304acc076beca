"""The trace reads a torch.autograd.Function's forward (and setup_context) and backward before the graph calls the
real `apply`, then forgets what it traced: what it learns decides whether the call may stay in the graph, and
whether AOTAutograd may trace through it.

The graph node calls the real `apply` (autograd_function.py), so a graph that runs as its torch ops is eager's
program. Reading the forward first guards what it reads (a global, the class's methods) and finds Python side
effects: its writes into its arguments are kept (autograd_writes.py); a forward that writes other state from before
it (a global, an object it was not given), warns, logs or returns an object holding tensors is a graph break, since
the call cannot be a graph op then. Reading the backward
finds what AOTAutograd, which traces forward and backward once into its own graph, would get wrong: Python side
effects and data-dependent code in backward, a None gradient (AOTAutograd gives zeros), set_materialize_grads(False)
(AOTAutograd materializes), gradient strides read (AOTAutograd's are contiguous), writes into inputs. A training
graph runs such a call, and what feeds it, as its torch ops (`as_eager/custom_functions.py`).
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple, Sequence

import torch

from framejit.contracts import OPAQUE_EFFECTS_META, Tracer
from framejit.exc import BreakCode, Unsupported, raise_observed, unsupported
from framejit.variables.autograd_args import ApplyArguments
from framejit.variables.autograd_ctx import AutogradCtxVariable
from framejit.variables.autograd_writes import check_writes, container_contents, made_values_written
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BaseListVariable, ListVariable, TupleVariable
from framejit.variables.tensor import TensorVariable


class Reading(NamedTuple):
    """What reading a Function's call found."""

    refusal: str | None  # why AOTAutograd must not trace through it in a training graph (None: it may)
    opaque_effects: bool  # its forward draws random numbers or writes into a tensor from before it
    made: list  # [(Variable, path)]: what the forward made and wrote into its arguments (autograd_writes.py)
    out: Variable | None  # what the forward returned, as read


def speculate(
    tx: Tracer,
    cls_var: Variable,
    args: Sequence[Variable],
    kwargs: dict[str, Variable],
    training: bool,
    arguments: ApplyArguments,
    writes_allowed: bool = True,
) -> Reading:
    """Read the forward and, in training, the backward of `cls_var`'s Function called with args/kwargs, then
    forget what was traced, except the forward's writes into its arguments (autograd_writes.py). Raises
    Unsupported (a graph break at the call) where the call cannot be a graph op."""
    cls = cls_var.as_python_constant()
    name = cls.__qualname__
    graph = tx.output.graph  # type: ignore[attr-defined]
    nodes_before = set(graph.nodes)
    log = tx.output.side_effects
    mark = log.speculation()
    contents = container_contents(log)
    held = [(t, t.node, t.example, _metadata(t.example)) for t in tensor_args([*args, *kwargs.values()])]
    grad_mode = torch.is_grad_enabled()
    try:
        torch._C._set_grad_enabled(False)  # apply runs forward and setup_context with grad off
        bound, needs = _bind(tx, cls, list(args), dict(kwargs), grad_mode)
        ctx = AutogradCtxVariable(cls, needs)
        try:
            out = _forward(tx, cls_var, ctx, bound)
        except Unsupported as e:
            unsupported(f"the forward of autograd.Function {name} cannot be traced: {e.msg}", e.code)
        if log.reported_since(mark):
            unsupported(
                f"the forward of autograd.Function {name} warns or logs: the call runs as Python",
                BreakCode.SIDE_EFFECT,
            )
        keeps_writes = log.wrote_older_state(mark.checkpoint, tensors=False)
        if keeps_writes and not writes_allowed:
            unsupported(
                f"the forward of autograd.Function {name} writes state from before it, under torch.vmap",
                BreakCode.SIDE_EFFECT,
            )
        if keeps_writes:
            check_writes(tx, name, mark, arguments, contents)
            made = made_values_written(tx, arguments, set(graph.nodes) - nodes_before, mark.checkpoint[1])
        forward_mark = log.speculation()
        _check_outputs(name, out)
        if any(_metadata(t.example) != meta for t, _, _, meta in held):
            unsupported(
                f"the forward of autograd.Function {name} changes an input's sizes in place", BreakCode.OP_ERROR
            )
        random, writes = _opaque_effects(graph, nodes_before)
        refusal = None
        if training:
            refusal = _forward_refusal(name, ctx, writes) or _backward_refusal(tx, cls_var, ctx, out)
    finally:
        torch._C._set_grad_enabled(grad_mode)
        for t, node, example, _ in held:  # (requires_grad_ on an argument gives it another node)
            t.node, t.example = node, example
        for node in reversed(list(graph.nodes)):
            if node not in nodes_before and node.op not in ("placeholder", "get_attr"):
                graph.erase_node(node)
    kept = forward_mark if keeps_writes else mark
    if not log.forgettable_since(kept):
        unsupported(
            f"the backward of autograd.Function {name} changes a list, dict or iterator from before the call",
            BreakCode.SIDE_EFFECT,
        )
    log.forget_since(kept)
    return Reading(refusal, random or writes, made if keeps_writes else [], out)


def tensor_args(values: Sequence[Variable]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, TensorVariable):
            out.append(value)
        elif isinstance(value, BaseListVariable):
            out += tensor_args(value.items)
    return out


def _metadata(fake: torch.Tensor) -> tuple:
    return (fake.shape, fake.stride(), fake.storage_offset(), fake.dtype, fake.requires_grad)


def _has_setup_context(cls: type) -> bool:
    return cls.setup_context != torch.autograd.function._SingleLevelFunction.setup_context


class _Slot:
    """An argument of the call, bound by the real inspect.Signature.bind in its place (mapped back after)."""

    def __init__(self, key: int | str) -> None:
        self.key = key


def _bind(
    tx: Tracer, cls: type, args: list[Variable], kwargs: dict[str, Variable], grad_mode: bool
) -> tuple[list[Variable], tuple[bool, ...]]:
    """The arguments apply passes to forward, all positional, and needs_input_grad (one flag each): with a
    setup_context, apply first binds them by forward's signature with its defaults; then keywords fill the
    positions that forward's code names (eager's C++ apply). A binding eager refuses raises its TypeError, which
    the program may catch."""
    what = f"autograd.Function {cls.__qualname__}.apply"
    setup_context = _has_setup_context(cls)
    if setup_context:
        try:
            bound = inspect.signature(cls.forward).bind(
                *(_Slot(i) for i in range(len(args))), **{k: _Slot(k) for k in kwargs}
            )
        except TypeError as e:  # eager's apply raises it, and the program may catch it
            raise_observed(TypeError(f"{what}: {e}"))
        bound.apply_defaults()

        def back(value: Any) -> Variable:
            if isinstance(value, _Slot):
                return args[value.key] if isinstance(value.key, int) else kwargs[value.key]
            return tx.wrap(value, None)  # a default

        args, kwargs = [back(v) for v in bound.args], {k: back(v) for k, v in bound.kwargs.items()}
    if kwargs:
        forward = cls.forward
        code = getattr(getattr(forward, "__func__", forward), "__code__", None)
        if code is None or code.co_flags & inspect.CO_VARARGS:
            unsupported(f"{what} with keywords, of a forward without plain parameters", BreakCode.BAD_CALL)
        skip = (0 if setup_context else 1) + (1 if inspect.ismethod(forward) else 0)  # (cls,) ctx
        names = code.co_varnames[skip : code.co_argcount]
        for position in range(len(args), len(names)):
            if not kwargs:
                break
            if names[position] not in kwargs:
                raise_observed(TypeError(f"{what}: forward() missing argument {names[position]!r}"))
            kwargs = dict(kwargs)
            args.append(kwargs.pop(names[position]))
        if kwargs:
            raise_observed(TypeError(f"{what}: forward() got unexpected keywords {sorted(kwargs)}"))
    needs = tuple(grad_mode and isinstance(a, TensorVariable) and bool(a.example.requires_grad) for a in args)
    return args, needs


def _forward(tx: Tracer, cls_var: Variable, ctx: AutogradCtxVariable, args: list[Variable]) -> Variable:
    """forward(ctx, *args), or forward(*args) then setup_context(ctx, inputs, output)."""
    forward = cls_var.var_getattr(tx, "forward")
    if not _has_setup_context(ctx.cls):
        return forward.call(tx, [ctx, *args], {})
    out = forward.call(tx, args, {})
    cls_var.var_getattr(tx, "setup_context").call(tx, [ctx, TupleVariable(list(args)), out], {})
    return out


def _check_outputs(name: str, out: Variable) -> None:
    """What apply returns must be a graph op's result: tensors and constants, alone or in a tuple or list (an
    object or a nested tuple holding tensors would come back from the fake run holding fakes)."""
    items = out.items if type(out) in (TupleVariable, ListVariable) else [out]
    for item in items:
        if not isinstance(item, TensorVariable) and not item.is_python_constant():
            unsupported(
                f"autograd.Function {name} returns {item} (only tensors and constants can come out of a graph op)",
                BreakCode.AUTOGRAD_FUNCTION,
            )


def _opaque_effects(graph: Any, nodes_before: set) -> tuple[bool, bool]:
    """Whether the forward just read draws random numbers, and whether it writes in place into a tensor from
    before it."""
    from framejit.op_effects import RANDOM_OP, node_storage, op_name, writes_into_first_argument

    older = {node_storage(n) for n in nodes_before} - {None}
    random = writes = False
    for node in graph.nodes:
        if node in nodes_before or node.op not in ("call_function", "call_method"):
            continue
        random = random or bool(RANDOM_OP.fullmatch(op_name(node.target))) or OPAQUE_EFFECTS_META in node.meta
        if writes_into_first_argument(node) and node_storage(node.kwargs.get("out", node.args[0])) in older:
            writes = True
    return random, writes


def _forward_refusal(name: str, ctx: AutogradCtxVariable, writes: bool) -> str | None:
    """Why AOTAutograd must not trace the forward of a training graph's call: it writes into a tensor from before
    it (mark_dirty), or asks for unmaterialized gradients."""
    if not ctx.materialize_grads:
        return (
            f"autograd.Function {name} sets materialize_grads False: its backward gets None for an unused output "
            "where AOTAutograd would give zeros"
        )
    if ctx.dirty or writes:
        return (
            f"the forward of autograd.Function {name} writes in place into a tensor from outside it: AOTAutograd "
            "would record another history"
        )
    return None


def _backward_refusal(tx: Tracer, cls_var: Variable, ctx: AutogradCtxVariable, out: Variable) -> str | None:
    """Why AOTAutograd must not trace the backward: it cannot be traced (Python side effects, data-dependent code,
    a gradient's strides read), writes into a tensor from before it, or gives None for an input that requires
    grad. It is read under no_grad, with zeros for the gradients (what the engine passes for an unused output)."""
    from framejit.op_effects import node_storage, writes_into_first_argument

    cls = ctx.cls
    name = cls.__qualname__
    function = torch.autograd.Function
    user_fn = "vjp" if cls.vjp is not function.vjp and cls.backward is function.backward else "backward"
    graph = tx.output.graph  # type: ignore[attr-defined]
    nodes_before = set(graph.nodes)
    effects = tx.output.side_effects
    mark = effects.speculation()
    items = out.items if type(out) in (TupleVariable, ListVariable) else [out]
    grads: list[Variable] = [
        _GradVariable.zeros_like(tx, item) if isinstance(item, TensorVariable) else ConstantVariable(None)
        for item in items
    ]
    try:
        result = cls_var.var_getattr(tx, user_fn).call(tx, [ctx, *grads], {})
    except Unsupported as e:
        return f"the backward of autograd.Function {name} cannot be traced: {e.msg}"
    if effects.wrote_older_state(mark.checkpoint, tensors=False) or effects.reported_since(mark):
        return f"the backward of autograd.Function {name} has Python side effects"
    older = {node_storage(n) for n in nodes_before} - {None}
    for node in graph.nodes:
        if node not in nodes_before and writes_into_first_argument(node):
            if node_storage(node.kwargs.get("out", node.args[0])) in older:
                return f"the backward of autograd.Function {name} writes in place into a tensor from before it"
    given = result.items if type(result) is TupleVariable else [result]
    for i, needed in enumerate(ctx.needs_input_grad):
        if needed and (i >= len(given) or not isinstance(given[i], TensorVariable)):
            return (
                f"the backward of autograd.Function {name} gives no gradient for its input {i}, which requires "
                "grad: eager leaves its .grad None where AOTAutograd would give zeros"
            )
    return None


class _GradVariable(TensorVariable):
    """A gradient the speculative backward gets: eager's may be any layout (an expanded one from `sum()`), where
    AOTAutograd's are laid out as the trace saw them, so a backward that reads its layout is not traced."""

    _LAYOUT = (
        "stride",
        "is_contiguous",
        "storage_offset",
        "data_ptr",
        "untyped_storage",
        "is_non_overlapping_and_dense",
    )

    @classmethod
    def zeros_like(cls, tx: Tracer, like: Variable) -> "_GradVariable":
        zeros = tx.output.call_graph_op(tx, "call_function", torch.zeros_like, [like], {})
        return cls(zeros.node, zeros.example)  # type: ignore[attr-defined]

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name in self._LAYOUT:
            unsupported(f"the backward reads a gradient's layout ({name})", BreakCode.AUTOGRAD_FUNCTION)
        return super().var_getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name in self._LAYOUT:
            unsupported(f"the backward reads a gradient's layout ({name}())", BreakCode.AUTOGRAD_FUNCTION)
        return super().call_method(tx, name, args, kwargs)
