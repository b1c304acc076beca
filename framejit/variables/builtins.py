"""Python builtins and operators applied to Variables: folded on constants, graph ops on tensors."""
from __future__ import annotations

import inspect
import operator
import types
from collections import Counter
import typing
from typing import Any, Callable, Sequence

import torch

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import AttrSource
from framejit.variables.base import HEAPTYPE, KnownValueVariable, Variable, lookup_class_attr
from framejit.variables.callables import UserFunctionVariable, UserMethodVariable
from framejit.variables.constant import ConstantVariable, ObjectVariable, is_immutable, new_exception
from framejit.variables import copying, iteration, mappings, pure_functions, signatures
from framejit.variables.containers import (IteratorVariable, ListVariable, SetVariable, SliceVariable,
                                           TupleVariable, BaseListVariable)
from framejit.variables.mappings import DictVariable
from framejit.variables.nn_module import NNModuleVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import (NewObjectVariable, UserObjectVariable, delete_attribute,
                                            python_class_method)



def _has_tensor(args: Sequence[Variable]) -> bool:
    """Whether the op needs the graph: a tensor, or a number computed from dynamic sizes, among its operands."""
    return any(isinstance(a, (TensorVariable, SymbolicVariable)) for a in args)


def _same_object(tx: Tracer, a: Variable, b: Variable) -> bool | None:
    """Identity of two traced values, or None when it can't be known at trace time."""
    if a is b:
        return True
    if a.is_python_constant() and b.is_python_constant():
        return a.as_python_constant() is b.as_python_constant()
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        if a.example is b.example:
            return True
        if a.source is not None and b.source is not None:  # distinct inputs: guard that they stay distinct
            tx.output.guards.add(a.source, GuardKind.NOT_ALIAS, b.source)
        return False
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False  # a tensor is never a constant / container
    if isinstance(a, _USER_OBJECTS) and isinstance(b, _USER_OBJECTS):
        return a is b  # one Variable per object: the builder guards the aliasing of objects from outside
    if type(a) is not type(b):
        return False
    if isinstance(a, NNModuleVariable) and a.source is not None and b.source is not None:
        for m in (a, b):  # modules are guarded by type: `is` between two needs their identities
            tx.output.guards.add(m.source, GuardKind.ID_MATCH, m.module)
        return a.module is b.module  # type: ignore[attr-defined]
    return None


_USER_OBJECTS = (UserObjectVariable, NewObjectVariable)


def _compares_by_identity(value: Variable) -> bool:
    """A user object whose class's == is object's, or Python code (which gave NotImplemented, or eq wouldn't be
    asked again)."""
    if not isinstance(value, _USER_OBJECTS):
        return False
    eq = lookup_class_attr(value.python_type(), "__eq__")[1]
    return eq is object.__eq__ or isinstance(eq, types.FunctionType)


def call_operator(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable:
    """fn is an `operator` function (add, getitem, lt, contains, ...)."""
    if fn is operator.getitem and _is_type_hint(args[0]) and args[1].is_python_constant():
        return _getitem(tx, *args)  # `typing.List[Foo]`: typing's own __getitem__ is no code to trace
    overloaded = _python_operator(tx, fn, args)
    if overloaded is not None:
        return overloaded
    if fn in (operator.eq, operator.ne) and all(_compares_by_identity(a) for a in args):
        same = _same_object(tx, *args)  # neither __eq__ answered: Python compares identities
        return ConstantVariable(same if fn is operator.eq else not same)
    if fn in (operator.is_, operator.is_not):
        same = _same_object(tx, *args)
        if same is None:
            unsupported("`is` between values whose identity is unknown at trace time", BreakCode.IDENTITY)
        return ConstantVariable(same if fn is operator.is_ else not same)
    if fn is operator.contains:
        return _contains(tx, args[0], args[1])
    if fn is operator.getitem:
        return _getitem(tx, args[0], args[1])
    if _has_tensor(args):
        if fn in _OUT_OF_PLACE and not isinstance(args[0], TensorVariable):
            fn = _OUT_OF_PLACE[fn]  # `b += t` with an immutable b (an int) is `b = b + t`
        return tx.output.call_graph_op(tx, "call_function", fn, args, {})
    args = [_as_tuple_variable(a) for a in args]  # `() + (h,)`: a constant tuple grown by traced items
    shared = _container_operator(tx, fn, args)
    if shared is not None:
        return shared
    if all(a.is_python_constant() for a in args):
        try:
            return tx.wrap_constant(fn(*[a.as_python_constant() for a in args]))
        except Exception as e:  # the same error would be raised by the original code
            unsupported(f"{fn.__name__} on constants raised {type(e).__name__}: {e}", BreakCode.CONSTANT_ERROR)
    return _sequence_operator(tx, fn, args)


# operator -> (method on the first operand, reflected method on the second); `in` asks the container (second)
_DUNDERS: dict[Callable[..., Any], tuple[str, str | None]] = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"), operator.mul: ("__mul__", "__rmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"), operator.floordiv: ("__floordiv__", "__rfloordiv__"),
    operator.mod: ("__mod__", "__rmod__"), operator.pow: ("__pow__", "__rpow__"),
    operator.matmul: ("__matmul__", "__rmatmul__"), operator.and_: ("__and__", "__rand__"),
    operator.or_: ("__or__", "__ror__"), operator.xor: ("__xor__", "__rxor__"),
    operator.lshift: ("__lshift__", "__rlshift__"), operator.rshift: ("__rshift__", "__rrshift__"),
    operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"), operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"), operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__"),
    operator.neg: ("__neg__", None), operator.pos: ("__pos__", None), operator.invert: ("__invert__", None),
    operator.getitem: ("__getitem__", None), operator.contains: ("__contains__", None),
}


def _python_operator(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable | None:
    """An operator on an object whose class defines it in Python: the method is traced, then the reflected one
    on the other operand if the first gives NotImplemented (as Python does); `a += b` tries a.__iadd__ first and
    falls back to `a + b`. None if neither is Python code."""
    if fn in _OUT_OF_PLACE:
        result = _call_dunder(tx, args[0], "__i" + _DUNDERS[_OUT_OF_PLACE[fn]][0][2:], args[1:])
        return result if result is not None else _python_operator(tx, _OUT_OF_PLACE[fn], args)
    names = _DUNDERS.get(fn)
    if names is None:
        return None
    result = _call_dunder(tx, args[0], names[0], args[1:])  # operator.contains(container, item): container first
    if result is None and names[1] is not None and len(args) == 2:
        result = _call_dunder(tx, args[1], names[1], args[:1])
    if result is None and fn is operator.ne:  # object.__ne__ inverts __eq__
        equal = _python_operator(tx, operator.eq, args)
        if equal is not None and equal.is_python_constant():
            return ConstantVariable(not equal.as_python_constant())
    return result


def _call_dunder(tx: Tracer, obj: Variable, name: str, rest: list[Variable]) -> Variable | None:
    """obj.<name>(*rest) if obj's class defines it in Python and it does not answer NotImplemented; else None."""
    method = python_class_method(tx, obj, name)
    if method is None:
        return None
    result = method.call(tx, rest, {})
    return None if result.is_python_constant() and result.as_python_constant() is NotImplemented else result


_OUT_OF_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                 operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                 operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                 operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                 operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


def _as_tuple_variable(value: Variable) -> Variable:
    if isinstance(value, ConstantVariable) and type(value.value) in (tuple, torch.Size):
        return TupleVariable([ConstantVariable(v) for v in value.value], py_type=type(value.value))
    return value


_SET_INPLACE = {operator.iand: "intersection_update", operator.isub: "difference_update",
                operator.ixor: "symmetric_difference_update"}


def _container_operator(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable | None:
    """Operators whose result must share or mutate container Variables rather than copy constants: `+=`,
    `*=` and `|=` change the object in place (other names for it see the change), and `+`/`*`/`|` build a
    container holding the same items (`[inner] * 3` holds one `inner` three times). None: not such a case."""
    if len(args) != 2:
        return None
    a, b = args
    if isinstance(a, ListVariable) and fn is operator.iadd:
        a.call_method(tx, "extend", [b], {})
        return a
    if isinstance(a, ListVariable) and fn is operator.imul and b.is_python_constant():
        n = b.as_python_constant()
        if n <= 0:
            a.call_method(tx, "clear", [], {})
        elif n > 1:
            a.call_method(tx, "extend", [ListVariable(a.items * (n - 1))], {})
        return a
    if isinstance(a, DictVariable) and fn in (operator.or_, operator.ior) and issubclass(a.py_type, Counter):
        unsupported("| of Counters (a union of counts)", BreakCode.CONTAINER_METHOD)
    if isinstance(a, DictVariable) and fn is operator.ior:
        a.call_method(tx, "update", [b], {})
        return a
    if isinstance(a, DictVariable) and isinstance(b, DictVariable) and fn is operator.or_:
        # the right operand's type wins when it is a subclass with its own __ror__ (dict | OrderedDict)
        kind = b if b.py_type is not a.py_type and issubclass(b.py_type, a.py_type) else a
        return kind.call_method(tx, "copy", [], {}).merged_with(a, b)
    if isinstance(a, SetVariable) and fn is operator.ior:
        a.call_method(tx, "update", [b], {})
        return a
    if isinstance(a, SetVariable) and fn in _SET_INPLACE:
        if a.source is not None:
            unsupported("mutating a set from outside the frame", BreakCode.SIDE_EFFECT)
        getattr(a.values, _SET_INPLACE[fn])(v.as_python_constant() for v in b.unpack(tx))
        tx.output.side_effects.note_write(a.born)
        return a
    if fn in (operator.add, operator.mul) and isinstance(a, BaseListVariable):
        return _sequence_operator(tx, fn, args)
    if fn is operator.mul and isinstance(b, BaseListVariable) and a.is_python_constant():
        return _sequence_operator(tx, fn, [b, a])
    return None


def _sequence_operator(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable:
    a, b = (args + [None])[:2]
    if fn in (operator.add, operator.iadd) and isinstance(a, BaseListVariable) and type(a) is type(b):
        if fn is operator.iadd and isinstance(a, ListVariable):
            a.call_method(tx, "extend", [b], {})
            return a
        if isinstance(a, TupleVariable):  # tuple.__add__ gives a tuple; torch.Size's gives a Size
            return TupleVariable(a.items + b.items, py_type=torch.Size if a.py_type is torch.Size else tuple)
        return type(a)(a.items + b.items)
    if fn in (operator.mul, operator.imul) and isinstance(a, BaseListVariable) and b.is_python_constant():
        return type(a)(a.items * b.as_python_constant())
    if fn is operator.not_:
        return ConstantVariable(not a.truth(tx))
    if fn in (operator.eq, operator.ne) and b is not None:
        same = _same_object(tx, a, b)
        if same is not None and not isinstance(a, (BaseListVariable, DictVariable)):
            return ConstantVariable(same if fn is operator.eq else not same)
    unsupported(f"operator {fn.__name__} on {[type(x).__name__ for x in args]}", BreakCode.OPERATOR)


def _contains(tx: Tracer, container: Variable, item: Variable) -> Variable:
    if isinstance(container, (DictVariable, SetVariable)) or getattr(container, "answers_contains", False):
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, TensorVariable):
        unsupported("`in` on a tensor (data-dependent)", BreakCode.DATA_DEPENDENT)
    items = container.unpack(tx) if not container.is_python_constant() else None
    if items is None:
        return ConstantVariable(item.as_python_constant() in container.as_python_constant())
    for x in items:  # `in` is `x is item or x == item`, item by item
        if _same_object(tx, x, item):
            return ConstantVariable(True)
        if isinstance(x, TensorVariable) or isinstance(item, TensorVariable):
            unsupported("`in` compares a tensor with ==, which needs its value (data-dependent)", BreakCode.DATA_DEPENDENT)
        if not (x.is_python_constant() and item.is_python_constant()):
            unsupported("`in` with items that cannot be compared at trace time", BreakCode.OPERATOR)
        if x.as_python_constant() == item.as_python_constant():
            return ConstantVariable(True)
    return ConstantVariable(False)


def _getitem(tx: Tracer, obj: Variable, key: Variable) -> Variable:
    if _is_type_hint(obj) and key.is_python_constant():  # list[torch.Tensor], typing.Optional[int]
        return tx.wrap_constant(obj.as_python_constant()[key.as_python_constant()])
    if isinstance(obj, TensorVariable):
        return tx.output.call_graph_op(tx, "call_function", operator.getitem, [obj, key], {})
    if hasattr(obj, "getitem"):
        return obj.getitem(tx, key)
    if obj.is_python_constant() and key.is_python_constant() and isinstance(obj, ConstantVariable):
        return tx.wrap_constant(obj.as_python_constant()[key.as_python_constant()])
    return obj.call_method(tx, "__getitem__", [key], {})


def _is_type_hint(obj: Variable) -> bool:
    """A builtin class, a typing.Generic class or a typing construct: subscripting it makes a type hint and runs
    nothing of the user's (list[torch.Tensor], typing.Optional[int])."""
    if not isinstance(obj, KnownValueVariable):
        return False
    value = obj.value
    if isinstance(value, type):
        return not value.__flags__ & HEAPTYPE and hasattr(value, "__class_getitem__") or \
            issubclass(value, typing.Generic)
    return getattr(type(value), "__module__", None) == "typing"


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
            if all(a.is_python_constant() for a in [*args, *kwargs.values()]):
                return tx.wrap_constant(self.fn(*[a.as_python_constant() for a in args],
                                                    **{k: v.as_python_constant() for k, v in kwargs.items()}))
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
    return ConstantVariable(issubclass(obj.python_type(), cls))


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


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
        return SetVariable(_iterate(tx, args[0]) if args else [], py_type=py_type)
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
    return IteratorVariable([TupleVariable([ConstantVariable(i + start), v])
                             for i, v in enumerate(_iterate(tx, args[0]))])


@_traces(zip)
def _zip(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if kwargs.get("strict") is not None and kwargs["strict"].as_python_constant():
        lengths = {len(_iterate(tx, a)) for a in args}
        if len(lengths) > 1:
            unsupported("zip(strict=True) on sequences of different lengths", BreakCode.BUILTIN)
    return IteratorVariable([TupleVariable(list(group)) for group in zip(*[_iterate(tx, a) for a in args])])


@_traces(reversed)
def _reversed(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    return IteratorVariable(list(reversed(_iterate(tx, args[0]))))


@_traces(iter)
def _iter(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    if isinstance(args[0], IteratorVariable):
        return args[0]
    if type(args[0]) is ListVariable:  # live, as GET_ITER makes it
        return IteratorVariable([], live=args[0])
    return IteratorVariable(_iterate(tx, args[0]))


@_traces(next)
def _next(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    it = args[0]
    if not isinstance(it, IteratorVariable):
        unsupported("next() on a non-iterator", BreakCode.ITER)
    item = it.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        unsupported("StopIteration from next()", BreakCode.ITER)
    return item


def _without_side_effects(tx: Tracer, what: str, evaluate: Callable[[], Variable]) -> Variable:
    """map()/filter() are lazy; the trace evaluates them at once, which is only right if the function has no
    side effects (else it would run for items never taken): those run as Python (a graph break)."""
    checkpoint = tx.output.side_effects.checkpoint()
    result = evaluate()
    if tx.output.side_effects.wrote_older_state(checkpoint):
        unsupported(f"{what}() with a function that has side effects (it is lazy in Python)", BreakCode.SIDE_EFFECT)
    return result


@_traces(map)
def _map(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn, seqs = args[0], [_iterate(tx, a) for a in args[1:]]
    return _without_side_effects(tx, "map", lambda: IteratorVariable(
        [fn.call(tx, list(group), {}) for group in zip(*seqs)]))


@_traces(filter)
def _filter(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    fn, items = args[0], _iterate(tx, args[1])
    return _without_side_effects(tx, "filter", lambda: IteratorVariable(
        [x for x in items if (x.truth(tx) if fn.is_python_constant() and fn.as_python_constant() is None
                              else fn.call(tx, [x], {}).truth(tx))]))


@_traces(sum)
def _sum(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    items = _iterate(tx, args[0])
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in items:
        total = call_operator(tx, operator.add, [total, item])
    return total


def _scalar_ctor(fn: Callable[..., Any]) -> Callable[..., Variable]:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        if _has_tensor(args):
            unsupported(f"{fn.__name__}() of a tensor reads its value (data-dependent)", BreakCode.DATA_DEPENDENT)
        if fn is bool and args:
            return ConstantVariable(args[0].truth(tx))
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
TRACED_BUILTINS.update(copying.RULES)
TRACED_BUILTINS.update(pure_functions.RULES)
TRACED_BUILTINS.update(mappings.RULES)
TRACED_BUILTINS.update(signatures.RULES)


@_traces(print, input, open)
def _io(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    unsupported("call to a builtin with I/O (print/input/open)", BreakCode.BUILTIN_IO)


@_traces(super)
def _super(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
    from framejit.variables.callables import SuperVariable
    if args:
        return SuperVariable(args[0].as_python_constant(), args[1])
    return tx.zero_arg_super()


del _fn
