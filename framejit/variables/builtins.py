"""Python builtins applied to Variables (len, isinstance, getattr, range, zip, map, id...): folded on constants,
graph ops on tensors; operators are in operators.py."""

from __future__ import annotations

import abc
import inspect
import operator
from typing import Any, Callable, Sequence

import torch

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.sources import AttrSource
from framejit.variables.base import HEAPTYPE, KnownValueVariable, Variable, lookup_class_attr
from framejit.variables.callables import UserFunctionVariable, UserMethodVariable
from framejit.variables.constant import ConstantVariable, ObjectVariable, is_immutable, new_exception
from framejit.variables import copying, iteration, itertools_rules, local_class, mappings, pure_functions, reports
from framejit.variables import signatures, stdlib_containers
from framejit.variables.container_subclasses import text_operand
from framejit.variables.containers import IteratorVariable, ListVariable, SliceVariable, TupleVariable
from framejit.variables.generators import refuse_outside_generator
from framejit.variables.sets import SetVariable, set_keys
from framejit.variables.nn_module import NNModuleVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable, delete_attribute, python_class_method
from framejit.variables.operators import _has_tensor, call_operator


def _iterate(tx: Tracer, value: Variable) -> list[Variable]:
    return value.unpack(tx)


class BuiltinVariable(KnownValueVariable):
    """A builtin function, an `operator` function or a pure `math` function."""

    @property
    def fn(self) -> Any:
        return self.value

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if isinstance(self.value, type) and not self.value.__flags__ & HEAPTYPE:
            return tx.wrap(getattr(self.value, name), None)  # a builtin type never changes (chain.from_iterable)
        return super().var_getattr(tx, name)

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        args = list(args)
        traced = TRACED_BUILTINS.get(self.fn)
        if traced is not None:
            return traced(tx, args, kwargs)
        if getattr(self.fn, "__module__", None) == "_operator" or self.fn in vars(operator).values():
            if kwargs:
                unsupported(f"operator.{self.fn.__name__} with keyword arguments", BreakCode.OPERATOR)
            return call_operator(tx, self.fn, args)
        if self.fn in _FOLDABLE or getattr(self.fn, "__module__", None) == "math":
            values = [*args, *kwargs.values()]
            if self.fn in (repr, format) and args and not kwargs and all(a.is_python_constant() for a in args[1:]):
                text = self.fn(text_operand(args[0]), *[a.as_python_constant() for a in args[1:]])
                return ConstantVariable(text)
            if all(a.is_python_constant() for a in values) or (
                self.fn in _TEXT_OF_NUMBER and all(a.is_python_constant() or _symbolic_number(a) for a in values)
            ):  # (a symbolic number made text specialises: its value is guarded)
                return tx.wrap_constant(
                    self.fn(
                        *[a.as_python_constant() for a in args],
                        **{k: v.as_python_constant() for k, v in kwargs.items()},
                    )
                )
            if self.fn in (abs, pow, divmod) and _has_tensor(args):
                op = {abs: operator.abs, pow: operator.pow}.get(self.fn)
                if op is not None:
                    return call_operator(tx, op, args)
        made = new_exception(self.fn, args, kwargs)
        if made is not None:
            return made
        unsupported(f"call to builtin {getattr(self.fn, '__name__', self.fn)}", BreakCode.BUILTIN)

    def __repr__(self) -> str:
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"


_FOLDABLE = {abs, pow, divmod, round, repr, ord, chr, hash, bin, hex, oct, format, issubclass}
_TEXT_OF_NUMBER = {repr, chr, hash, bin, hex, oct, format}


def _symbolic_number(value: Variable) -> bool:
    """A Python int or float the trace made symbolic (no numpy scalar, which formats otherwise)."""
    return isinstance(value, SymbolicVariable) and value.numpy_type is None


# builtin -> how a call of it is traced: (tx, args, kwargs) -> result
TRACED_BUILTINS: dict[Any, Callable[..., Variable]] = {}


def _traces(*fns: Any) -> Callable[[Callable[..., Variable]], Callable[..., Variable]]:
    def register(trace_call: Callable[..., Variable]) -> Callable[..., Variable]:
        for fn in fns:
            TRACED_BUILTINS[fn] = trace_call
        return trace_call

    return register


@_traces(inspect.signature)
def _signature(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """inspect.signature of a function the trace knows (guarded by its code): computed now, a constant."""
    fn, drop_self = args[0], False
    if isinstance(fn, UserMethodVariable):
        fn, drop_self = fn.fn, True
    if not isinstance(fn, UserFunctionVariable) or kwargs:
        unsupported(f"inspect.signature of {fn}", BreakCode.CALL)
    signature = inspect.signature(fn.fn)
    if drop_self:  # a bound method's signature has no `self`
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return ObjectVariable(signature)


@_traces(len)
def _len(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    (obj,) = args
    if isinstance(obj, TensorVariable):
        if obj.example.dim() == 0:
            unsupported("len() of a 0-d tensor", BreakCode.BUILTIN)
        return obj.call_method(tx, "size", [ConstantVariable(0)], {})  # a dynamic size comes from the graph
    if obj.is_python_constant() and isinstance(obj, ConstantVariable) or is_immutable(obj):
        return ConstantVariable(len(obj.as_python_constant()))
    method = python_class_method(tx, obj, "__len__")
    if method is not None:
        return method.call(tx, [], {})
    return obj.call_method(tx, "__len__", [], {})


@_traces(isinstance)
def _isinstance(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj, classes = args
    cls = classes.as_python_constant()
    if isinstance(obj, TensorVariable) and any(type(c) is _LEGACY_TENSOR_TYPE for c in _flat_classes(cls)):
        # torch.FloatTensor, torch.cuda.LongTensor...: their isinstance asks the tensor's dtype, device and layout,
        # which the entry guards; the fake has them
        return ConstantVariable(isinstance(obj.example, cls))
    if not isinstance(obj, TensorVariable) and any(
        isinstance(c, type) and type(c).__instancecheck__ not in _TYPE_ONLY_CHECKS and c is not obj.python_type()
        for c in _flat_classes(cls)
    ):
        # a metaclass that asks the object itself (torch.BoolStorage asks a storage's dtype): not the type alone
        if obj.is_python_constant():  # an immutable value, guarded: asked now
            return ConstantVariable(isinstance(obj.as_python_constant(), cls))
        unsupported(f"isinstance with {cls!r}, whose metaclass decides by more than the type", BreakCode.BUILTIN)
    return ConstantVariable(issubclass(obj.python_type(), cls))


# metaclasses whose isinstance asks only the type, of anything but a tensor (Parameter and Buffer also accept a
# plain tensor marked as one: tensors are answered above and below from their guarded type)
_TYPE_ONLY_CHECKS = (
    type.__instancecheck__,
    abc.ABCMeta.__instancecheck__,
    type(torch.nn.Parameter).__instancecheck__,
    type(torch.nn.Buffer).__instancecheck__,
)


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


def _legacy_tensor(cls: Any) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        """`torch.IntTensor([n])`: torch.tensor of the data, in the type's dtype (ints alone give sizes instead:
        an uninitialised tensor, which stays Python's)."""
        data = args[0] if len(args) == 1 else None
        if kwargs or not (
            isinstance(data, (ListVariable, TupleVariable))
            or isinstance(data, ConstantVariable)
            and isinstance(data.value, (list, tuple))
        ):
            unsupported(f"torch.{cls.__name__}(...) other than of a list of numbers", BreakCode.CALL)
        return tx.wrap(torch.tensor, None).call(tx, args, {"dtype": ConstantVariable(cls.dtype)})

    return trace_call


for _cls in (
    torch.FloatTensor,
    torch.DoubleTensor,
    torch.HalfTensor,
    torch.BFloat16Tensor,
    torch.ByteTensor,
    torch.CharTensor,
    torch.ShortTensor,
    torch.IntTensor,
    torch.LongTensor,
    torch.BoolTensor,
):
    TRACED_BUILTINS[_cls] = _legacy_tensor(_cls)


def _flat_classes(cls: Any) -> list[Any]:
    return [c for item in cls for c in _flat_classes(item)] if isinstance(cls, tuple) else [cls]


@_traces(type)
def _type(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if len(args) != 1:
        unsupported("type() with 3 arguments", BreakCode.BUILTIN)
    if isinstance(args[0], NewObjectVariable):  # the class as the trace read it: calling it makes another
        return args[0].class_var(tx)
    source = args[0].source
    return ObjectVariable(args[0].python_type(), AttrSource(source, "__class__") if source is not None else None)


@_traces(callable)
def _callable(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj = args[0]
    if obj.is_python_constant():
        return ConstantVariable(callable(obj.as_python_constant()))
    return ConstantVariable(lookup_class_attr(obj.python_type(), "__call__")[0] is not None)


@_traces(getattr)
def _getattr(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj, name = args[0], args[1].as_python_constant()
    if len(args) == 3:
        try:
            return tx.speculate_getattr(obj, name)
        except AttributeError:
            return args[2]
    return obj.var_getattr(tx, name)


@_traces(object.__getattribute__)
def _object_getattribute(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """The lookup a custom __getattribute__ defers to (`super().__getattribute__(name)`)."""
    obj, name = args[0], args[1].as_python_constant()
    generic = getattr(obj, "generic_getattr", None)
    return generic(tx, name) if generic is not None else obj.var_getattr(tx, name)


@_traces(object.__setattr__)
def _object_setattr(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """The store a custom __setattr__ defers to (`super().__setattr__(name, value)`)."""
    obj, name, value = args
    tx.store_attr(obj, name.as_python_constant(), value, generic=True)
    return ConstantVariable(None)


@_traces(hasattr)
def _hasattr(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj, name = args[0], args[1].as_python_constant()
    try:
        tx.speculate_getattr(obj, name)
    except AttributeError:
        return ConstantVariable(False)
    return ConstantVariable(True)


@_traces(setattr)
def _setattr(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj, name, value = args
    tx.store_attr(obj, name.as_python_constant(), value)
    return ConstantVariable(None)


@_traces(delattr, object.__delattr__)
def _delattr(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    obj, name = args
    delete_attribute(tx, obj, name.as_python_constant())
    return ConstantVariable(None)


def _make_sequence(ctor: type) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        items = _iterate(tx, args[0]) if args else []
        return TupleVariable(items) if ctor is tuple else ListVariable(items)

    return trace_call


TRACED_BUILTINS[tuple] = _make_sequence(tuple)
TRACED_BUILTINS[list] = _make_sequence(list)


def _set_of(py_type: type) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        if kwargs or len(args) > 1:
            unsupported(f"{py_type.__name__}() takes at most one argument and no keywords", BreakCode.BAD_CALL)
        return SetVariable(set_keys(tx, args[0]) if args else [], py_type=py_type)

    return trace_call


TRACED_BUILTINS[set] = _set_of(set)
TRACED_BUILTINS[frozenset] = _set_of(frozenset)


@_traces(range)
def _range(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return ConstantVariable(range(*[a.as_python_constant() for a in args]))


@_traces(slice)
def _slice(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return SliceVariable(list(args))


@_traces(enumerate)
def _enumerate(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))).as_python_constant()
    lazy = iteration.lazy_zip(tx, args[:1], start)
    if lazy is not None:
        return lazy
    return IteratorVariable(
        [TupleVariable([ConstantVariable(i + start), v]) for i, v in enumerate(_iterate(tx, args[0]))]
    )


@_traces(zip)
def _zip(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    strict = kwargs.get("strict") is not None and kwargs["strict"].as_python_constant()
    if strict and any(isinstance(a, IteratorVariable) for a in args):
        unsupported("zip(strict=True) over an iterator", BreakCode.BUILTIN)
    lazy = iteration.lazy_zip(tx, args)
    if lazy is not None:
        return lazy
    if strict:
        lengths = {len(_iterate(tx, a)) for a in args}
        if len(lengths) > 1:
            unsupported("zip(strict=True) on sequences of different lengths", BreakCode.BUILTIN)
    return IteratorVariable([TupleVariable(list(group)) for group in zip(*[_iterate(tx, a) for a in args])])


@_traces(reversed)
def _reversed(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    try:
        kind: type | None = args[0].python_type()
    except NotImplementedError:
        kind = None
    if kind is not None and not hasattr(kind, "__reversed__") and not hasattr(kind, "__getitem__"):  # an iterator
        raise_observed(TypeError(f"'{kind.__name__}' object is not reversible"), BreakCode.BUILTIN)
    return IteratorVariable(list(reversed(_iterate(tx, args[0]))))


@_traces(iter)
def _iter(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if isinstance(args[0], IteratorVariable):
        return args[0]
    if type(args[0]) is ListVariable:  # live, as GET_ITER makes it
        return IteratorVariable([], live=args[0])
    return mappings.dict_iterator(tx, args[0]) or IteratorVariable(_iterate(tx, args[0]))


@_traces(next)
def _next(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    it = args[0]
    refuse_outside_generator(it, "next() on")
    if not isinstance(it, IteratorVariable):
        unsupported("next() on a non-iterator", BreakCode.ITER)
    item = it.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise_observed(it.stop_iteration(), BreakCode.ITER)  # a `try` in the trace may catch it
    return item


@_traces(map)
def _map(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn = args[0]
    return iteration.without_side_effects(
        tx,
        "map",
        lambda: IteratorVariable([fn.call(tx, list(group), {}) for group in zip(*[_iterate(tx, a) for a in args[1:]])]),
    )


@_traces(filter)
def _filter(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn = args[0]
    return iteration.without_side_effects(
        tx,
        "filter",
        lambda: IteratorVariable(
            [
                x
                for x in _iterate(tx, args[1])
                if (
                    x.truth(tx)
                    if fn.is_python_constant() and fn.as_python_constant() is None
                    else fn.call(tx, [x], {}).truth(tx)
                )
            ]
        ),
    )


@_traces(sum)
def _sum(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in args[0].each_item(tx):  # added as each is taken, as Python's does
        total = call_operator(tx, operator.add, [total, item])
    return total


def _scalar_ctor(fn: Callable[..., Any]) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        if _has_tensor(args):
            unsupported(f"{fn.__name__}() of a tensor reads its value (data-dependent)", BreakCode.DATA_DEPENDENT)
        if fn is bool and args:
            return ConstantVariable(args[0].truth(tx))
        if fn is str and len(args) == 1 and not kwargs:
            return ConstantVariable(str(text_operand(args[0])))
        return ConstantVariable(fn(*[a.as_python_constant() for a in args]))

    return trace_call


for _fn in (int, float, bool, str, complex):
    TRACED_BUILTINS[_fn] = _scalar_ctor(_fn)


@_traces(id)
def _id(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """id() of an object the entry is guarded on by identity (a module with state, a class, a module of code)."""
    (obj,) = args
    if isinstance(obj, ObjectVariable) and obj.source is not None:  # read from a source: guarded by identity
        return ConstantVariable(id(obj.value))
    if isinstance(obj, NNModuleVariable) and obj.source is not None:  # a module guarded by type: now by identity
        tx.output.guards.add(obj.source, GuardKind.ID_MATCH, obj.module)
        return ConstantVariable(id(obj.module))
    unsupported(f"id() of {obj}, whose identity the entry does not guard", BreakCode.BUILTIN_IO)


@_traces(torch.jit.annotate)
def _annotate(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return args[1]  # a TorchScript type hint: the value itself


@_traces(torch.overrides.is_tensor_like)
def _is_tensor_like(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    cls = args[0].python_type()  # the type is guarded: a tensor's by TENSOR_MATCH, an object's by TYPE_MATCH
    return ConstantVariable(cls is torch.Tensor or hasattr(cls, "__torch_function__"))


TRACED_BUILTINS.update(iteration.RULES)
TRACED_BUILTINS.update(itertools_rules.RULES)
TRACED_BUILTINS.update(stdlib_containers.RULES)
TRACED_BUILTINS.update(copying.RULES)
TRACED_BUILTINS.update(pure_functions.RULES)
TRACED_BUILTINS.update(mappings.RULES)
TRACED_BUILTINS.update(signatures.RULES)
TRACED_BUILTINS.update(reports.RULES)
TRACED_BUILTINS.update(local_class.RULES)


@_traces(print, input, open)
def _io(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    unsupported("call to a builtin with I/O (print/input/open)", BreakCode.BUILTIN_IO)


@_traces(super)
def _super(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    from framejit.variables.callables import SuperVariable

    if args:
        return SuperVariable(args[0].as_python_constant(), args[1])
    return tx.zero_arg_super()


@_traces(locals, vars)
def _locals(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """locals() (and vars() without arguments) of the traced frame, made from its variables now: run as Python
    at a break, it would read the frame running the compiled code, whose variables are temporaries."""
    from framejit.variables.mappings import DictVariable

    if args or kwargs:
        unsupported("vars() of an object", BreakCode.BUILTIN)
    return DictVariable(tx.frame_locals())


@_traces(dir)
def _dir(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    """dir() without arguments: the traced frame's variable names, sorted (as `_locals`)."""
    if args or kwargs:
        unsupported("dir() of an object", BreakCode.BUILTIN)
    return ListVariable([ConstantVariable(name) for name in sorted(tx.frame_locals())])


del _fn
