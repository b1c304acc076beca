"""Turning real Python values read by the trace into Variables, recording one guard per read."""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import enum
import inspect
import operator
import os
import types
from typing import Any, Callable

import torch
from torch import nn

from framejit import capture_policy, policy
from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import (
    AttrSource,
    ConstSource,
    DerivedSource,
    GenericAttrSource,
    ItemSource,
    LocalSource,
    ModuleGlobalsSource,
    ReduceSource,
    Source,
)
from framejit.variables.autograd_function import (
    AutogradFunctionClassVariable,
    is_autograd_function_class,
    is_bound_apply,
)
from framejit.variables.autocast import (
    AutocastCtorVariable,
    AutocastDecoratedVariable,
    AutocastVariable,
    is_autocast_class,
    is_autocast_decorated,
)
from framejit.variables.base import Variable
from framejit.variables.autograd_vmap import VmapVariable, is_vmap
from framejit.variables.callable_ops import CallableOpVariable, is_callable_op
from framejit.variables.builtins import TRACED_BUILTINS, BuiltinVariable
from framejit.variables.callables import (
    ConstantResultVariable,
    DisallowedVariable,
    GraphBreakRequestVariable,
    RefusalVariable,
    SubstitutedVariable,
    TorchVariable,
    UserFunctionVariable,
    UserMethodVariable,
    is_numpy_number_function,
)
from framejit.variables.constant import (
    TYPE_HINTS,
    ConstantVariable,
    ObjectVariable,
    is_constant_key,
    is_literal,
    is_numpy_integer,
)
from framejit.variables.containers import BoundMethod, IteratorVariable, ListVariable, TupleVariable
from framejit.variables.hash_keys import identity_hashed
from framejit.variables.sets import SetVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.nn_module import NNModuleVariable
from framejit.variables.numpy_arrays import NumpyFunctionVariable, is_ndarray, is_numpy_function, wrap_array_input
from framejit.variables.torch_special import (
    GRAD_MODE_CTORS,
    GradModeCtorVariable,
    SetGradEnabledVariable,
    GradModeVariable,
    WithExitVariable,
    is_constant_query,
    is_torch_op,
)
from framejit.variables.optimizer import OptimizerVariable
from framejit.variables.user_object import EnvironVariable, UserObjectVariable, has_custom_lookup
from framejit.variables.wrapper_subclass import (
    DistributedConstantVariable,
    FoldedCallVariable,
    FromLocalVariable,
    is_from_local,
    is_mesh_or_placement,
    is_placement_class,
)


_BUILTIN_CALLABLES = {id(v) for v in vars(builtins).values() if callable(v)} | {
    id(v) for v in vars(operator).values() if callable(v)
}


def wrap_constant_result(value: Any) -> Variable:
    """A value computed at trace time from constants (no source, no guard)."""
    if is_literal(value):
        return ConstantVariable(value)
    if is_mesh_or_placement(value):
        return DistributedConstantVariable(value)
    if isinstance(value, tuple):
        return TupleVariable([wrap_constant_result(v) for v in value], py_type=type(value))
    if isinstance(value, list):
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is set and all(is_literal(v) for v in value):
        return SetVariable(value)
    if isinstance(value, (dict, types.MappingProxyType)):  # a read-only view computed now is a copy
        return DictVariable({k: wrap_constant_result(v) for k, v in value.items()})
    if isinstance(value, (torch.finfo, torch.iinfo, enum.Enum)):
        return ObjectVariable(value)
    if isinstance(value, types.GeneratorType) or hasattr(value, "__next__"):
        unsupported("an iterator computed at trace time", BreakCode.ITER)
    return ObjectVariable(value)


def wrap_value(tx: Tracer, value: Any, source: Source | None) -> Variable:
    """Wrap a real value read from `source`, guarding what the trace relies on."""
    local_classes = tx.output.side_effects.local_classes
    made_here = local_classes.get(id(value)) if local_classes else None
    if made_here is not None:  # a class a class statement of the trace made (a method's __class__ cell)
        return made_here
    if source is None:
        if is_literal(value) or isinstance(
            value, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.CodeType, type, torch.Tensor)
        ):
            return _wrap(tx, value, None)
        source = ConstSource(value)  # mutable: it needs a name so that reads are guarded and writes replayed
    cache = tx.output.wrapped
    key = source.name()
    if key in cache:
        return cache[key]
    if value is os.environ:
        return EnvironVariable(source)
    if value is os.getenv:  # os.environ.get by another name
        _guard(tx, source, GuardKind.FUNCTION_MATCH, value)
        return BoundMethod(EnvironVariable(ItemSource(ModuleGlobalsSource("os"), "environ")), "get")
    if has_custom_lookup(type(value)):  # look no further: isinstance() and hasattr() would run its lookup
        _guard(tx, source, GuardKind.TYPE_MATCH, value)
        cache[key] = var = UserObjectVariable(value, source)
        return tx.output.wrapped_by_id.setdefault(id(value), var)
    if _aliasable(value):
        seen = tx.output.wrapped_by_id.get(id(value))
        if seen is not None and seen.source is not None:  # the same object through another path
            tx.output.guards.add(source, GuardKind.ALIAS, seen.source)
            cache[key] = seen
            return seen
        if not isinstance(value, torch.Tensor):  # a later call passing one object twice must not hit
            for other in tx.output.wrapped_by_id.values():
                if other.source is not None and other.python_type() is type(value):
                    tx.output.guards.add(source, GuardKind.NOT_ALIAS, other.source)
    cache[key] = var = _wrap(tx, value, source)
    if _aliasable(value):
        tx.output.wrapped_by_id[id(value)] = var
    return var


# `with record_function("name"):` / `with profiler.profile():` inside compiled code
_PROFILER_CONTEXTS = (
    torch.autograd.profiler.record_function,
    torch.autograd.profiler.profile,
    torch.profiler.profile,
    torch.autograd.profiler.emit_nvtx,
)


def _is_torch_compiles_module_init(value: types.FunctionType) -> bool:
    return capture_policy.is_torchdynamo_function(value, "patched_init") and "init" in value.__code__.co_freevars


def _ints_of_an_argument(value: Any, source: Source | None) -> bool:
    """A tuple argument holding ints (`*args` with a timestep): read item by item, so that an int that changes
    between calls becomes symbolic like any int argument, rather than the tuple being guarded whole."""
    return (
        type(value) is tuple
        and isinstance(source, LocalSource)
        and any(type(v) is int or is_numpy_integer(v) for v in value)
    )


def _through_attribute(source: Source) -> bool:
    while isinstance(source, DerivedSource):
        if isinstance(source, (AttrSource, GenericAttrSource)):
            return True
        source = source.base
    return False


def _aliasable(value: Any) -> bool:
    """Values whose identity matters to the trace: tensors and mutable containers and objects."""
    return isinstance(value, (torch.Tensor, list, dict, set)) or (
        not isinstance(
            value, (nn.Module, type, types.FunctionType, types.ModuleType, types.BuiltinFunctionType, types.MethodType)
        )
        and not is_literal(value)
        and hasattr(value, "__dict__")
    )


def _guard(tx: Tracer, source: Source | None, kind: GuardKind, value: Any) -> None:
    if source is not None:
        tx.output.guards.add(source, kind, value)


def _wrap(tx: Tracer, value: Any, source: Source | None) -> Variable:
    if isinstance(value, torch.Tensor):
        if source is None:
            unsupported("a tensor that did not come from the frame's inputs", BreakCode.TENSOR_CONSTANT)
        return tx.output.add_graph_input(source, value)
    if (
        (type(value) is int or is_numpy_integer(value))
        and source is not None
        and isinstance(source.root(), LocalSource)
    ):
        # an argument that varies (dynamic shapes policy); an attribute of an object (a model's config) only once
        # it changed between compiles, as configuration does not vary with the data
        symbolic = tx.output.add_int_input(source, value, automatic_only=_through_attribute(source))
        if symbolic is not None:
            return symbolic
    if type(value) is float and isinstance(source, LocalSource):  # an argument: symbolic once it changed
        symbolic = tx.output.add_float_input(source, value)
        if symbolic is not None:
            return symbolic
    if is_literal(value) and not _ints_of_an_argument(value, source):
        singleton = value is None or isinstance(value, (bool, type(Ellipsis)))
        _guard(tx, source, GuardKind.ID_MATCH if singleton else GuardKind.EQUALS, value)
        return ConstantVariable(value, source)
    if is_ndarray(value) and source is not None:  # a graph input: the tensor sharing its memory
        _guard(tx, source, GuardKind.TYPE_MATCH, value)
        return wrap_array_input(tx, value, source)
    if isinstance(value, nn.Module):
        # A module is guarded by its type and what the trace reads of it (its parameters and buffers, graph inputs
        # checked by TENSOR_MATCH; its children, attributes and hooks), so another instance of the same class and
        # structure reuses the graph: a block compiled once serves every layer (regional compilation), a copy of
        # a model and a new model of the same class do not compile again, as in torch.compile.
        _guard(tx, source, GuardKind.TYPE_MATCH, value)
        if source is not None and policy.is_compiled_module(value):
            tx.output.guards.watch(value)  # the entry goes when the compiled module that made it does
        return NNModuleVariable(value, source)
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        _guard(tx, source, GuardKind.LEN_MATCH, value)
        items = [wrap_value(tx, v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
        return (ListVariable if type(value) is list else TupleVariable)(
            items, source, *(() if type(value) is list else (type(value),))
        )
    if type(value) in (set, frozenset) and all(is_literal(v) for v in value):
        return SetVariable.read(tx, value, source)  # its items, in iteration order
    if type(value) is frozenset and all(is_constant_key(v) for v in value):
        _guard(tx, source, GuardKind.ID_MATCH, value)  # of functions, classes...: immutable, its identity is enough
        return ObjectVariable(value, source)
    if type(value) in (set, frozenset) and all(is_constant_key(v) or identity_hashed(v) for v in value):
        return SetVariable.read(tx, value, source)  # of tensors, modules, objects: each read by position
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
        return DictVariable.read(tx, value, source)
    return _wrap_callable_or_object(tx, value, source)


def _wrap_callable_or_object(tx: Tracer, value: Any, source: Source | None) -> Variable:
    """A value no container or tensor rule took: the first rule of _CALLABLE_OR_OBJECT_RULES that matches wraps it,
    else it is a user object, guarded by its type."""
    for rule in _CALLABLE_OR_OBJECT_RULES:
        if rule.matches(value, source):
            if rule.guard is not None:
                _guard(tx, source, rule.guard, value)
            return rule.make(tx, value, source)
    if source is None:
        unsupported(f"a {type(value).__name__} object made during the trace", BreakCode.OBJECT)
    _guard(tx, source, GuardKind.TYPE_MATCH, value)
    return (OptimizerVariable if isinstance(value, torch.optim.Optimizer) else UserObjectVariable)(value, source)


def _has_traced_rule(value: Any) -> bool:
    """A function the trace evaluates by a rule of its own (inspect.signature, itertools.chain.from_iterable: a
    bound method made anew at each read, equal but not identical)."""
    try:
        return value in TRACED_BUILTINS
    except Exception:  # unhashable, or an __eq__ that does not answer a bool
        return False


def _wrap_entered_grad_mode(tx: Tracer, exit_method: Any, source: Source) -> Variable:
    """The __exit__ of an entered no_grad/enable_grad/set_grad_enabled, as a continuation receives it."""
    ctx_source = AttrSource(source, "__self__")
    _guard(tx, ctx_source, GuardKind.TYPE_MATCH, exit_method.__self__)
    _guard(tx, AttrSource(ctx_source, "prev"), GuardKind.EQUALS, exit_method.__self__.prev)
    if isinstance(exit_method.__self__, torch.set_grad_enabled):
        _guard(tx, AttrSource(ctx_source, "mode"), GuardKind.EQUALS, exit_method.__self__.mode)
    return WithExitVariable(GradModeVariable.from_entered(exit_method.__self__), source)


_SEQUENCE_ITERATORS = (type(iter(())), type(iter([])), type(iter(range(0))))


def _wrap_iterator(tx: Tracer, iterator: Any, source: Source) -> Variable:
    """An iterator over a tuple, list or range (a for loop a continuation resumes): its remaining items."""
    _guard(tx, source, GuardKind.TYPE_MATCH, iterator)
    reduced = iterator.__reduce__()  # (iter, (sequence,), index); no index once exhausted
    if len(reduced) < 3:
        return IteratorVariable([], source)
    sequence = wrap_value(tx, reduced[1][0], ItemSource(ItemSource(ReduceSource(source), 1), 0))
    index = wrap_value(tx, reduced[2], ItemSource(ReduceSource(source), 2)).as_python_constant()
    if type(sequence) is ListVariable:  # a list iterator reads the list as it is when advanced
        variable = IteratorVariable([], source, live=sequence, start=index)
    else:
        variable = IteratorVariable(sequence.unpack(tx)[index:], source, start=index)
    tx.output.side_effects.track_iterator(variable)
    return variable


def _wrap_function(tx: Tracer, value: types.FunctionType, source: Source | None) -> Variable:
    """A plain Python function: inlined by the trace unless the user disabled it or it wraps another function."""
    if vars(value).get("_torchdynamo_disable") is True and callable(vars(value).get("_torchdynamo_orig_callable")):
        # @torch.compiler.disable: the user keeps it out of compiled code. The call runs as Python, and the
        # function the wrapper calls is not captured either (framejit.disable's rule)
        _guard(tx, source, GuardKind.ID_MATCH, value)
        policy.mark_disabled(value._torchdynamo_orig_callable)
        return DisallowedVariable(value, reason="torch.compiler.disable")
    if policy.is_disabled(value):
        return DisallowedVariable(value, reason="framejit.disable")
    if hasattr(value, "_framejit_orig"):  # optimize()/run() of a function called in a trace: this compile
        _guard(tx, source, GuardKind.ID_MATCH, value)  # takes what it wraps (the outermost context wins)
        return wrap_value(tx, value._framejit_orig, AttrSource(source, "_framejit_orig") if source else None)
    if _is_torch_compiles_module_init(value):
        # once torch.compile has run, TorchDynamo's wrapper of nn.Module.__init__ (it tags the module for its own
        # bookkeeping, then calls the original): the trace calls the original, from the wrapper's closure
        _guard(tx, source, GuardKind.ID_MATCH, value)
        index = value.__code__.co_freevars.index("init")
        cell = ItemSource(AttrSource(source, "__closure__"), index) if source else None
        return wrap_value(
            tx, value.__closure__[index].cell_contents, AttrSource(cell, "cell_contents") if cell else None
        )
    if getattr(value, "__script_if_tracing_wrapper", False):  # @torch.jit.script_if_tracing outside a jit
        _guard(tx, source, GuardKind.ID_MATCH, value)  # trace calls the function it wraps
        return wrap_value(tx, value.__original_fn, AttrSource(source, "__original_fn") if source else None)
    _guard(tx, source, GuardKind.CODE_MATCH, value)  # closure contents and defaults are guarded when read
    return UserFunctionVariable(value, source)


def _wrap_bound_method(tx: Tracer, value: types.MethodType, source: Source | None) -> Variable:
    fn = wrap_value(tx, value.__func__, AttrSource(source, "__func__") if source else None)
    obj = wrap_value(tx, value.__self__, AttrSource(source, "__self__") if source else None)
    return UserMethodVariable(fn, obj, source)


def _is_exit_of_entered(value: Any, source: Source | None, context_types: Any) -> bool:
    """The bound __exit__ of an entered context manager of `context_types`, as a continuation receives it."""
    return (
        isinstance(value, types.MethodType)
        and isinstance(value.__self__, context_types)
        and value.__func__.__name__ == "__exit__"
        and source is not None
    )


def _is_member(value: Any, source: Source | None) -> bool:
    """A builtin method of a tensor, list or dict read from a source: re-read through its object."""
    return (
        isinstance(value, types.BuiltinMethodType)
        and isinstance(value.__self__, (torch.Tensor, list, dict))
        and source is not None
    )


def _wrap_member(tx: Tracer, value: Any, source: Source) -> Variable:
    _guard(tx, AttrSource(source, "__name__"), GuardKind.EQUALS, value.__name__)
    return BoundMethod(wrap_value(tx, value.__self__, AttrSource(source, "__self__")), value.__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WrapRule:
    """One kind of callable or object: `matches(value, source)`; `guard`, when set, is recorded on the source
    before `make(tx, value, source)` builds the Variable (a rule that guards otherwise does it in `make`)."""

    kind: str
    matches: Callable[[Any, Source | None], bool]
    guard: GuardKind | None
    make: Callable[[Tracer, Any, Source | None], Variable]


# In order: the first rule that matches wins (a torch op is also a callable; a function may be disallowed).
_CALLABLE_OR_OBJECT_RULES: tuple[WrapRule, ...] = (
    WrapRule(
        kind="module",
        matches=lambda v, s: isinstance(v, types.ModuleType),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: ObjectVariable(v, s),
    ),
    WrapRule(
        kind="disallowed",
        matches=lambda v, s: policy.is_disallowed(v),
        guard=None,
        make=lambda tx, v, s: DisallowedVariable(v),
    ),
    WrapRule(
        kind="graph break request",
        matches=lambda v, s: policy.graph_break_request(v) is not None,
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: GraphBreakRequestVariable(v, policy.graph_break_request(v) or ""),
    ),
    WrapRule(
        kind="refusal in a polyfill",
        matches=lambda v, s: policy.is_refusal(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: RefusalVariable(v),
    ),
    WrapRule(
        kind="substituted in graph",
        matches=lambda v, s: policy.substitute_for(v) is not None,
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: SubstitutedVariable(v, policy.substitute_for(v)),
    ),
    WrapRule(
        kind="constant result",
        matches=lambda v, s: policy.is_constant_result(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: ConstantResultVariable(v),
    ),
    WrapRule(
        kind="is-compiling query",
        matches=lambda v, s: policy.compile_query_answer(v)[0],
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: ConstantResultVariable(v, policy.compile_query_answer(v)[1]),
    ),
    # a Python function of torch's that reads global state (folded, guarded)
    WrapRule(
        kind="torch state query",
        matches=lambda v, s: is_constant_query(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: TorchVariable(v, s),
    ),
    # profiler ranges in a graph do nothing, as under torch.compile: the graph stays whole (its ops are not ranged)
    WrapRule(
        kind="profiler context",
        matches=lambda v, s: any(v is c for c in _PROFILER_CONTEXTS),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: wrap_value(
            tx, contextlib.nullcontext, ItemSource(ModuleGlobalsSource("contextlib"), "nullcontext")
        ),
    ),
    WrapRule(
        kind="torch._C._set_grad_enabled",
        matches=lambda v, s: v is torch._C._set_grad_enabled,
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: SetGradEnabledVariable(),
    ),
    WrapRule(
        kind="grad mode class",
        matches=lambda v, s: any(v is c for c in GRAD_MODE_CTORS),  # `is`: a user __eq__ may say True
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: GradModeCtorVariable(v),
    ),
    WrapRule(
        kind="autocast class",
        matches=lambda v, s: is_autocast_class(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: AutocastCtorVariable(v, s),
    ),
    WrapRule(
        kind="autocast-decorated function",
        matches=lambda v, s: is_autocast_decorated(v),
        guard=GuardKind.CODE_MATCH,
        make=lambda tx, v, s: AutocastDecoratedVariable(v, s),
    ),
    WrapRule(
        kind="autograd.Function class",
        matches=lambda v, s: is_autograd_function_class(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: AutogradFunctionClassVariable(v, s),
    ),
    WrapRule(
        kind="torch.vmap",
        matches=lambda v, s: is_vmap(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: VmapVariable(v, s),
    ),
    WrapRule(
        kind="callable op",
        matches=lambda v, s: is_callable_op(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: CallableOpVariable(v, s),
    ),
    # `MyFn.apply` read from a global or an attribute: guarded through its class
    WrapRule(
        kind="autograd.Function apply",
        matches=lambda v, s: is_bound_apply(v),
        guard=None,
        make=lambda tx, v, s: wrap_value(tx, v.__self__, AttrSource(s, "__self__") if s else None).var_getattr(
            tx, "apply"
        ),
    ),
    WrapRule(
        kind="builtin",
        matches=lambda v, s: (
            id(v) in _BUILTIN_CALLABLES or getattr(v, "__module__", None) == "math" or _has_traced_rule(v)
        ),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: BuiltinVariable(v, s),
    ),
    WrapRule(
        kind="torch op",
        matches=lambda v, s: is_torch_op(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: TorchVariable(v, s),
    ),
    # np.sin, np.sum, np.linalg.norm: traced through torch._numpy on arrays, folded on constants
    WrapRule(
        kind="numpy function",
        matches=lambda v, s: is_numpy_function(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: NumpyFunctionVariable(v, s),
    ),
    WrapRule(
        kind="DTensor placement class",
        matches=lambda v, s: is_placement_class(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: FoldedCallVariable(v, s),
    ),
    WrapRule(
        kind="DeviceMesh or placement",
        matches=lambda v, s: is_mesh_or_placement(v),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: DistributedConstantVariable(v, s),
    ),
    WrapRule(
        kind="DTensor.from_local",
        matches=lambda v, s: is_from_local(v),
        guard=GuardKind.FUNCTION_MATCH,
        make=lambda tx, v, s: FromLocalVariable(v, s),
    ),
    WrapRule(
        kind="user function", matches=lambda v, s: isinstance(v, types.FunctionType), guard=None, make=_wrap_function
    ),
    WrapRule(
        kind="sequence iterator",
        matches=lambda v, s: type(v) in _SEQUENCE_ITERATORS and s is not None,
        guard=None,
        make=_wrap_iterator,
    ),
    WrapRule(kind="tensor, list or dict method", matches=_is_member, guard=None, make=_wrap_member),
    WrapRule(
        kind="entered grad mode's __exit__",
        matches=lambda v, s: _is_exit_of_entered(v, s, GRAD_MODE_CTORS),
        guard=None,
        make=_wrap_entered_grad_mode,
    ),
    WrapRule(
        kind="entered autocast's __exit__",
        matches=lambda v, s: _is_exit_of_entered(v, s, torch.amp.autocast),
        guard=None,
        make=lambda tx, v, s: WithExitVariable(AutocastVariable.from_entered(tx, v.__self__, s), s),
    ),
    WrapRule(
        kind="bound method", matches=lambda v, s: isinstance(v, types.MethodType), guard=None, make=_wrap_bound_method
    ),
    WrapRule(
        kind="class or plain callable",
        matches=lambda v, s: (
            isinstance(v, type) or callable(v) and not hasattr(v, "__dict__") or is_numpy_number_function(v)
        ),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: ObjectVariable(v, s),
    ),
    # immutable: what is read from it needs no further guard (a decorator's signature kept in a closure, bound in
    # the trace)
    WrapRule(
        kind="code or signature",
        matches=lambda v, s: isinstance(v, (types.CodeType, inspect.Signature, inspect.Parameter)),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: ObjectVariable(v, s),
    ),
    WrapRule(
        kind="enum member or type hint",
        matches=lambda v, s: isinstance(v, (enum.Enum, TYPE_HINTS)),
        guard=GuardKind.ID_MATCH,
        make=lambda tx, v, s: ObjectVariable(v, s),
    ),
)
