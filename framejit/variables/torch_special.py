"""Calls to torch callables: most become graph ops; a few are trace-time state (grad mode) or constants."""

from __future__ import annotations

import functools
import operator
import types
from typing import Any, Sequence

import torch

from framejit import policy
from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.op_effects import in_place_name, op_name
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.tensor import META_METHODS, TensorVariable


# Python-level torch modules whose functions are single graph ops (not traced into).
OP_MODULES = frozenset(
    {
        "torch",
        "torch.functional",
        "torch.nn.functional",
        "torch._tensor",
        "torch.nn.init",
        "torch.special",
        "torch.linalg",
        "torch.fft",
        "torch._C._nn",
        "torch._C._linalg",
        "torch._C._special",
        "torch._C._fft",
        "torch._C._VariableFunctions",
        "torch.random",
    }
)
# Functions that change or read global state: running them at trace time would be wrong.
_STATEFUL = frozenset(
    {
        "manual_seed",
        "seed",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "save",
        "load",
        "set_default_dtype",
        "set_default_device",
        "set_default_tensor_type",
        "set_printoptions",
        "use_deterministic_algorithms",
        "set_num_threads",
        "set_num_interop_threads",
        "set_anomaly_enabled",
        "set_autocast_enabled",
        "compile",
    }
)
# Queries of global state, folded into constants: the first two are guarded by every cache entry
# (guards.add_global_state), the others by a guard on the query's answer where they are folded.
_GUARDED_EVERYWHERE = frozenset({"is_grad_enabled", "get_default_dtype"})
_CONSTANT_QUERIES = _GUARDED_EVERYWHERE | {
    "is_autocast_enabled",
    "get_autocast_dtype",
    "is_autocast_cpu_enabled",
    "get_autocast_cpu_dtype",
    "_is_any_autocast_enabled",
    "_get_current_dispatch_mode_stack",  # nn.MultiheadAttention asks it
    "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "is_inference_mode_enabled",
    "get_num_threads",
    "get_float32_matmul_precision",
    "_get_privateuse1_backend_name",  # which devices the optimizers' foreach/fused kernels support
}
# Usage telemetry (nn.Module.__init__ logs "python.nn_module"): nothing a graph computes depends on it, so a
# module built inside the trace skips it.
_TRACE_NOOPS = frozenset({"_log_api_usage_once"})
_TORCH_FUNCTION_CHECKS = frozenset(
    {
        prefix + name
        for prefix in ("", "_")
        for name in ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
    }
)


# torch functions that make tensors from Python values only: safe to run on fakes with no tensor argument.
FACTORIES = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "range",
        "linspace",
        "logspace",
        "eye",
        "tensor",
        "as_tensor",
        "scalar_tensor",
        "normal",
        "empty_strided",
        "tril_indices",
        "triu_indices",
        "hann_window",
        "hamming_window",
        "bartlett_window",
        "blackman_window",
        "kaiser_window",
        "zeros_like",
        "ones_like",
    }
)
# Ops whose non-tensor result depends only on guarded metadata: folded into constants.
PURE_QUERIES = META_METHODS | {
    "is_tensor",
    "result_type",
    "promote_types",
    "can_cast",
    "is_same_size",
    "is_storage",
    "typename",
    "broadcast_shapes",
    "is_conj",
    "is_neg",
    "_none_or_dtype",
}
# Tensor methods with effects outside the graph (autograd, storage): they run as Python (a graph break).
EFFECTFUL_METHODS = frozenset(
    {
        "backward",
        "retain_grad",
        "register_hook",
        "register_post_accumulate_grad_hook",
        "untyped_storage",
        "storage",
        "is_set_to",
        "data_ptr",
        "set_",
        "share_memory_",
        "pin_memory",
        "record_stream",
        "tolist",
        "numpy",
        "is_shared",
        "requires_grad_",
        "detach_",
        "resize_",
        "resize_as_",
    }
)


# torch._check(cond, msg) and its kind: with a condition known at trace time, nothing (or a raise) happens
_CONDITION_CHECKS = frozenset({torch._check, torch._check_index, torch._check_value, torch._check_type, torch._assert})


def check_op_before_run(target: Any, has_tensor_args: bool) -> None:
    """Refuse ops that must not run on fake values at trace time (they would have real effects)."""
    name = op_name(target)
    if name in _STATEFUL or name in EFFECTFUL_METHODS:
        unsupported(f"{name}() has effects outside the graph", BreakCode.TORCH_STATEFUL)
    # e.g. F's _none_or_dtype(None); numpy code on tensors (np.zeros(3)) makes tensors and nothing else
    pure_helper = getattr(target, "__module__", None) == "torch.nn.functional" or _pure_tensor_code(target)
    # (a pure query of a non-tensor, is_tensor(3), is a constant)
    if (
        not has_tensor_args
        and name not in FACTORIES
        and name not in PURE_QUERIES
        and not pure_helper
        and not policy.is_allowed_in_graph(target)
        and not _functional_aten(target)
    ):
        unsupported(
            f"torch function {name}() with no tensor arguments may change global state", BreakCode.TORCH_STATEFUL
        )


@functools.lru_cache(maxsize=None)
def _functional_aten(target: Any) -> bool:
    """A torch function bound to an ATen op none of whose overloads (but `out=`) writes or is random: on numbers
    alone (`torch.div(seq_len, window, rounding_mode="trunc")`) it makes a new tensor and nothing else."""
    if (
        not isinstance(target, types.BuiltinFunctionType)
        or getattr(target, "__module__", None) != "torch"
        or getattr(torch, target.__name__, None) is not target
    ):
        return False
    packet = getattr(torch.ops.aten, target.__name__, None)
    if packet is None:
        return False
    overloads = [getattr(packet, name) for name in packet.overloads() if "out" not in name]
    return bool(overloads) and not any(
        op._schema.is_mutable or torch.Tag.nondeterministic_seeded in op.tags for op in overloads
    )


def _pure_tensor_code(target: Any) -> bool:
    """A callable framejit puts in graphs that only computes its result from its arguments (numpy_graph_ops):
    a non-tensor result of it (np.ndim(a)) comes from the arguments' metadata."""
    return getattr(type(target), "pure_tensor_code", False) is True


def keeps_non_tensor_result(target: Any, kwargs: dict[str, Any]) -> bool:
    """For an op whose result holds no tensor: True if it must still be a node (it mutates its inputs, or it is a
    function allowed in the graph); raises Unsupported unless its result is a pure function of guarded metadata."""
    name = op_name(target)
    # a function allowed in the graph that returns no tensor was put there for what it does: it runs there
    if (
        in_place_name(target, name)
        or target is operator.setitem
        or "out" in kwargs
        or policy.is_allowed_in_graph(target)
    ):
        return True
    if (
        name in PURE_QUERIES
        or (name.startswith("_") and getattr(target, "__module__", None) == "torch.nn.functional")
        or _pure_tensor_code(target)
    ):
        # F's private helpers (_canonical_mask(None), ...) only check and convert their arguments
        return False
    unsupported(f"{name}() returns no tensor: it runs as Python", BreakCode.NON_TENSOR_OP)


def is_constant_query(value: Any) -> bool:
    """A query of global state that torch implements in Python (so not a torch op by its module)."""
    return (
        callable(value)
        and getattr(value, "__name__", None) in _CONSTANT_QUERIES
        and str(getattr(value, "__module__", "")).startswith("torch.")
    )


def is_torch_op(value: Any) -> bool:
    """Whether calling `value` should put one op in the graph."""
    if policy.is_allowed_in_graph(value):
        return True
    if isinstance(
        value,
        (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType, types.MethodWrapperType),
    ):
        owner = getattr(value, "__objclass__", None)
        if owner is not None:
            return issubclass(owner, torch._C.TensorBase)
        module = getattr(value, "__module__", None) or ""
        return module.startswith("torch")
    if isinstance(value, types.FunctionType):
        return value.__module__ in OP_MODULES
    return isinstance(value, torch._ops.OpOverloadPacket) or isinstance(value, torch._ops.OpOverload)


def call_torch_function(tx: Tracer, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    from framejit.variables.numpy_arrays import holds_array, torch_function_on_arrays

    if holds_array([*args, *kwargs.values()]):  # torch.from_numpy(a) of an array the graph computes
        return torch_function_on_arrays(tx, fn, args, kwargs)
    name = getattr(fn, "__name__", "")
    if name in _STATEFUL:
        unsupported(f"torch.{name}() changes global state", BreakCode.TORCH_STATEFUL)
    if name in _TRACE_NOOPS:
        return ConstantVariable(None)
    if fn is torch._check_tensor_all and len(args) == 1 and isinstance(args[0], TensorVariable):
        return _assert_all(tx, args[0])
    if name in _CONSTANT_QUERIES and all(a.is_python_constant() for a in args) and not kwargs:
        values = tuple(a.as_python_constant() for a in args)
        result = fn(*values)
        if name not in _GUARDED_EVERYWHERE:
            tx.output.guards.add_query(fn, values, result)
        return tx.wrap_constant(result)  # the dispatch mode stack is a list
    if fn in _CONDITION_CHECKS and args and args[0].is_python_constant():
        if not args[0].as_python_constant():  # it raises, with its message: Python makes that happen
            unsupported(f"torch.{name}() of a false condition raises", BreakCode.TORCH_STATEFUL)
        return ConstantVariable(None)  # a condition known true checks nothing
    if fn is torch.is_tensor and len(args) == 1 and not kwargs:  # isinstance(obj, Tensor): the type is guarded
        return ConstantVariable(issubclass(args[0].python_type(), torch.Tensor))
    if name in _TORCH_FUNCTION_CHECKS:  # __torch_function__ overrides: none on plain tensors (type is guarded)
        values = [a for arg in args for a in (arg.unpack(tx) if not isinstance(arg, TensorVariable) else [arg])]
        plain = all(
            isinstance(v, TensorVariable)
            and v.python_type() in (torch.Tensor, torch.nn.Parameter)
            or v.is_python_constant()
            for v in values
        )
        if not plain:
            unsupported(f"{name}() on values that may override __torch_function__", BreakCode.TORCH_FUNCTION)
        return ConstantVariable(False)
    if fn is torch._shape_as_tensor and len(args) == 1 and isinstance(args[0], TensorVariable) and not kwargs:
        # (torch.onnx.operators.shape_as_tensor) its fake kernel wants data: the graph makes the sizes a tensor
        # (torch.tensor of symbolic sizes would fix them to their values: each is a 0-d tensor, stacked)
        int64 = {"dtype": ConstantVariable(torch.int64)}
        sizes = args[0].call_method(tx, "size", [], {}).unpack(tx)
        if not sizes:
            return tx.output.call_graph_op(tx, "call_function", torch.zeros, [ConstantVariable(0)], int64)
        scalars = [tx.output.call_graph_op(tx, "call_function", torch.scalar_tensor, [s], int64) for s in sizes]
        return tx.output.call_graph_op(tx, "call_function", torch.stack, [ListVariable(scalars)], {})
    if fn in (torch.tensor, torch.as_tensor) and args and _holds_symbolic(tx, args[0]):
        return _tensor_of_symbolic(tx, args[0], kwargs)
    return tx.output.call_graph_op(tx, "call_function", fn, args, kwargs)


def _holds_symbolic(tx: Tracer, data: Variable) -> bool:
    from framejit.variables.symbolic import SymbolicVariable

    if isinstance(data, SymbolicVariable):
        return True
    return isinstance(data, (ListVariable, TupleVariable)) and any(_holds_symbolic(tx, v) for v in data.items)


def _tensor_of_symbolic(tx: Tracer, data: Variable, kwargs: dict[str, Variable]) -> Variable:
    """torch.tensor(data) of symbolic numbers (`torch.tensor([t])` of a timestep that changes every call): each
    number a 0-d tensor, stacked, in the dtype eager infers (int64 for ints, the default dtype for floats), as
    fake execution of torch.tensor would fix each number to its value."""
    if set(kwargs) - {"dtype", "device"}:
        unsupported(f"torch.tensor of symbolic numbers with {sorted(kwargs)}", BreakCode.GRAPH_ARG)

    def leaves(v: Variable) -> list[Variable]:
        return [x for item in v.items for x in leaves(item)] if isinstance(v, (ListVariable, TupleVariable)) else [v]

    dtype = kwargs.get("dtype")
    if dtype is None or dtype.as_python_constant() is None:
        floating = any(issubclass(v.python_type(), float) for v in leaves(data))
        dtype = ConstantVariable(torch.get_default_dtype() if floating else torch.int64)
    options = {"dtype": dtype, **({"device": kwargs["device"]} if "device" in kwargs else {})}

    def build(v: Variable) -> Variable:
        if isinstance(v, (ListVariable, TupleVariable)):
            if not v.items:
                unsupported("torch.tensor of an empty list among symbolic numbers", BreakCode.GRAPH_ARG)
            parts = ListVariable([build(item) for item in v.items])
            return tx.output.call_graph_op(tx, "call_function", torch.stack, [parts], {})
        return tx.output.call_graph_op(tx, "call_function", torch.scalar_tensor, [v], options)

    return build(data)


def _assert_all(tx: Tracer, cond: TensorVariable) -> Variable:
    """torch._check_tensor_all(cond): which way it goes needs the data, so the graph checks it when it runs (an
    op with an effect: never dropped). Both raise a RuntimeError when some element is False."""
    every = tx.output.call_graph_op(tx, "call_function", torch.all, [cond], {})
    node = tx.output.create_node(tx, "call_function", torch._assert_async, (every.as_node_arg(),), {})
    node.meta["example_value"] = None
    tx.output.side_effects.note_write()
    return ConstantVariable(None)


class GradModeVariable(Variable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b): grad mode during the trace and in the graph."""

    def __init__(self, ctor: Any, mode: bool, previous: bool) -> None:
        self.ctor = ctor  # torch.no_grad, torch.enable_grad or torch.set_grad_enabled
        self.mode = mode
        self.applies_on_create = ctor is torch.set_grad_enabled  # acts when called, not on __enter__
        self.previous = previous

    @classmethod
    def create(cls, tx: Tracer, ctor: Any, args: list[Variable]) -> "GradModeVariable":
        previous = torch.is_grad_enabled()
        if ctor is torch.set_grad_enabled:
            var = cls(ctor, bool(args[0].as_python_constant()), previous)
            tx.output.set_grad_mode(var.mode)
            return var
        return cls(ctor, ctor is torch.enable_grad, previous)

    @classmethod
    def from_entered(cls, ctx: Any) -> "GradModeVariable":
        """The Variable for a real, already entered grad-mode context object (a continuation's stack)."""
        ctor = type(ctx)
        mode = ctx.mode if ctor is torch.set_grad_enabled else ctor is torch.enable_grad
        return cls(ctor, mode, ctx.prev)

    def python_type(self) -> type:
        return torch.set_grad_enabled if self.applies_on_create else torch.no_grad

    def enter(self, tx: Tracer) -> Variable:
        if not self.applies_on_create:
            self.previous = torch.is_grad_enabled()
            tx.output.set_grad_mode(self.mode)
        return ConstantVariable(None)

    def exit(self, tx: Tracer) -> None:
        tx.output.set_grad_mode(self.previous)

    def exit_before_break(self, tx: Tracer) -> None:
        """Grad mode stays as inside the block at the end of a graph; the break code steps out and re-enters."""

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        """`torch.no_grad()(fn)`: fn decorated, run in this mode when called. set_grad_enabled(b), which switched
        the mode when made, switches it back (its __call__ does)."""
        if kwargs or len(args) != 1:
            unsupported(f"{self.ctor.__name__}() called with {len(args)} arguments", BreakCode.GRAD_MODE)
        if self.applies_on_create:
            tx.output.set_grad_mode(self.previous)
        return GradModeDecorated(self.ctor, self.mode, args[0])

    def reconstruct_entered(self, cg: Emitter) -> None:
        """Leave the __exit__ of a fresh, entered context of this kind on the stack (grad mode is then set)."""
        cg.emit("PUSH_NULL")
        cg.emit_const(self.ctor)
        if self.applies_on_create:
            cg.emit_const(self.mode)
        cg.call(1 if self.applies_on_create else 0)
        cg.emit("BEFORE_WITH")
        cg.emit("POP_TOP")


class GradModeDecorated(Variable):
    """A function decorated in the trace by a grad-mode context (`torch.no_grad()(fn)`): called, fn runs in the
    mode, which is set back after."""

    def __init__(self, ctor: Any, mode: bool, fn: Variable) -> None:
        self.ctor, self.mode, self.fn = ctor, mode, fn

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        ctx = GradModeVariable.create(tx, self.ctor, [ConstantVariable(self.mode)])
        ctx.enter(tx)
        result = self.fn.call(tx, args, kwargs)
        ctx.exit(tx)
        return result

    def rebuild(self, cg: Emitter) -> None:
        """`ctor(...)(fn)`, as the code made it (a set_grad_enabled made and applied leaves the mode as it was)."""
        cg.emit("PUSH_NULL")  # (for the decorating call)
        cg.emit("PUSH_NULL")
        cg.emit_const(self.ctor)
        if self.ctor is torch.set_grad_enabled:
            cg.emit_const(self.mode)
        cg.call(1 if self.ctor is torch.set_grad_enabled else 0)
        cg.load(self.fn)
        cg.call(1)


class SetGradEnabledVariable(Variable):
    """`torch._C._set_grad_enabled(b)` (what a user's grad-mode context manager calls): grad mode switched, in the
    trace and in the graph, as `torch.set_grad_enabled(b)` called as a function does."""

    def python_type(self) -> type:
        return types.BuiltinFunctionType

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or len(args) != 1 or not args[0].is_python_constant():
            unsupported("torch._C._set_grad_enabled of a value known only at run time", BreakCode.GRAD_MODE)
        tx.output.set_grad_mode(bool(args[0].as_python_constant()))
        return ConstantVariable(None)


class WithExitVariable(Variable):
    """The __exit__ that BEFORE_WITH leaves on the stack; the normal exit path calls it with 3 Nones. `ctx` is a
    context kind with enter/exit/exit_before_break/reconstruct_entered (grad mode, autocast)."""

    def __init__(self, ctx: Any, source: Any = None) -> None:
        self.ctx = ctx
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: Tracer, args: Any, kwargs: dict[str, Variable]) -> Variable:
        self.ctx.exit(tx)
        return ConstantVariable(None)


GRAD_MODE_CTORS = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


class GradModeCtorVariable(Variable):
    """torch.no_grad / torch.enable_grad / torch.set_grad_enabled as callables."""

    def __init__(self, ctor: Any) -> None:
        self.ctor = ctor

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.ctor

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or (self.ctor is not torch.set_grad_enabled and args):
            unsupported("torch.no_grad/enable_grad used as a decorator inside a compiled region", BreakCode.GRAD_MODE)
        return GradModeVariable.create(tx, self.ctor, list(args))
