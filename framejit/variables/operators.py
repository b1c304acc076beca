"""Python operators applied to Variables (`a + b`, `x[i]`, `in`, `is`, comparisons): a class's own dunder
traced, folded on constants, graph ops on tensors, container and sequence operators on traced containers."""

from __future__ import annotations

import operator
import types
from collections import Counter
import typing
from typing import Any, Callable, Sequence

import torch

from framejit.contracts import GuardKind, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.op_effects import OUT_OF_PLACE
from framejit.variables.base import HEAPTYPE, KnownValueVariable, UnreadableArg, Variable, lookup_class_attr
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import ListVariable, TupleVariable, BaseListVariable
from framejit.variables.sets import SetVariable
from framejit.variables.mappings import DictVariable, DictViewVariable
from framejit.variables.nn_module import NNModuleVariable
from framejit.variables.numpy_arrays import holds_array, numpy_operator_call
from framejit.variables.symbolic import SymbolicVariable, numpy_result_type
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable, UserObjectVariable, python_class_method


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
    for arg in args:
        if isinstance(arg, UnreadableArg):  # an argument the trace could not read: the break says why
            arg.as_python_constant()
    if fn is operator.getitem and _is_type_hint(args[0]) and args[1].is_python_constant():
        return _getitem(tx, *args)  # `typing.List[Foo]`: typing's own __getitem__ is no code to trace
    if holds_array(args):  # numpy arrays the graph computes (Tensor.numpy()): numpy's rules, via torch._numpy
        return numpy_operator_call(tx, fn, args)
    overloaded = _python_operator(tx, fn, args)
    if overloaded is not None:
        return overloaded
    on_base = _on_base_contents(tx, fn, args)
    if on_base is not None:
        return on_base
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
        if fn in OUT_OF_PLACE and not isinstance(args[0], TensorVariable):
            fn = OUT_OF_PLACE[fn]  # `b += t` with an immutable b (an int) is `b = b + t`
        result = tx.output.call_graph_op(tx, "call_function", fn, args, {})
        numpy_type = numpy_result_type(fn, args)
        if numpy_type is not None:
            if isinstance(result, SymbolicVariable):
                result.numpy_type = numpy_type
            elif result.is_python_constant():  # (folded: `n * 0`)
                return tx.wrap_constant(numpy_type(result.as_python_constant()))
        return result
    args = [_as_tuple_variable(a) for a in args]  # `() + (h,)`: a constant tuple grown by traced items
    from_view = fn in _SET_LIKE and any(isinstance(a, DictViewVariable) and a.kind != "values" for a in args)
    if from_view:  # keys and items views compare as sets, and combine with any iterable as a set
        args = [_view_as_set(tx, a, fn not in _COMPARISONS) for a in args]
    if len(args) == 2 and isinstance(args[0], SetVariable) and isinstance(args[1], SetVariable):
        return _set_operator(tx, fn, args[0], args[1], from_view)
    shared = _container_operator(tx, fn, args)
    if shared is not None:
        return shared
    if all(a.is_python_constant() for a in args):
        try:
            return tx.wrap_constant(fn(*[a.as_python_constant() for a in args]))
        except Exception as e:  # the user's operation raises it (1 / 0): a try in the trace may catch it
            raise_observed(e.with_traceback(None), BreakCode.CONSTANT_ERROR)
    return _sequence_operator(tx, fn, args)


# operator -> (method on the first operand, reflected method on the second); `in` asks the container (second)
_DUNDERS: dict[Callable[..., Any], tuple[str, str | None]] = {
    operator.add: ("__add__", "__radd__"),
    operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"),
    operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"),
    operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"),
    operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"),
    operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"),
    operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
    operator.neg: ("__neg__", None),
    operator.pos: ("__pos__", None),
    operator.invert: ("__invert__", None),
    operator.getitem: ("__getitem__", None),
    operator.contains: ("__contains__", None),
}


def _python_operator(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable | None:
    """An operator on an object whose class defines it in Python: the method is traced, then the reflected one
    on the other operand if the first gives NotImplemented (as Python does); `a += b` tries a.__iadd__ first and
    falls back to `a + b`. None if neither is Python code."""
    if fn in OUT_OF_PLACE:
        result = _call_dunder(tx, args[0], "__i" + _DUNDERS[OUT_OF_PLACE[fn]][0][2:], args[1:])
        return result if result is not None else _python_operator(tx, OUT_OF_PLACE[fn], args)
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


def _dunder_operators() -> dict[str, tuple[Callable[..., Any], bool]]:
    """Each operator method's name -> (the operator, whether its operands are swapped: `a.__radd__(b)` is the
    addition b + a as a's type does it)."""
    table: dict[str, tuple[Callable[..., Any], bool]] = {}
    for fn, (name, reflected) in _DUNDERS.items():
        table[name] = (fn, False)
        if reflected is not None and reflected not in table and fn not in _COMPARISONS:
            table[reflected] = (fn, True)
    for in_place, fn in OUT_OF_PLACE.items():
        table["__i" + _DUNDERS[fn][0][2:]] = (in_place, False)
    return table


_COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


def call_dunder_operator(
    tx: Tracer, obj: Variable, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]
) -> Variable | None:
    """`obj.__or__(other)`, `d.__ior__(e)`, `s.__contains__(x)`, `obj.__iter__()` called by name on a container the
    trace holds: the operator (or builtin) the method implements, as `obj | other` does it; a set's or dict's
    method answers NotImplemented for an operand of another kind, as CPython's does. None: not such a method."""
    if name == "__iter__" and not args and not kwargs:  # obj.__iter__(): iter(obj)
        from framejit.variables.builtins import TRACED_BUILTINS

        return TRACED_BUILTINS[iter](tx, [obj], {})
    entry = _DUNDER_OPERATORS.get(name)
    if entry is None or kwargs or len(args) != (0 if entry[0] in _UNARY else 1):
        return None
    fn, swapped = entry
    operands = [*args, obj] if swapped else [obj, *args]
    if fn is operator.contains:  # obj.__contains__(item): `item in obj`
        return _contains(tx, obj, args[0])
    if args and fn is not operator.getitem and _refuses_operand(obj, args[0], fn):
        return ConstantVariable(NotImplemented)  # `{1}.__or__([2])`: the operator would ask [2] next
    return call_operator(tx, fn, operands)


def _refuses_operand(obj: Variable, other: Variable, fn: Callable[..., Any]) -> bool:
    """Whether a set's or dict's own operator method answers NotImplemented for `other`: they take only their
    own kind (a set or frozenset; a dict), but for dict's `|=`, which takes any pairs as update does."""
    for kind, accepted in ((SetVariable, (set, frozenset)), (DictVariable, dict)):
        if isinstance(obj, kind) and not (kind is DictVariable and fn is operator.ior):
            try:
                return not issubclass(other.python_type(), accepted)
            except Exception:  # a kind that does not know its type: let the operator decide
                return False
    return False


_UNARY = (operator.neg, operator.pos, operator.invert)


def _on_base_contents(tx: Tracer, fn: Callable[..., Any], args: list[Variable]) -> Variable | None:
    """An operator on an instance of a subclass of a builtin container (set, frozenset, dict, list) whose class
    leaves the operator to the base type: the base type's operator on what it holds. An in-place one answers the
    instance itself; the others what the base type's gives (`MySet() | s` is a set, as in Python)."""
    taking = args[:1] if fn is operator.contains else args  # `item in obj`: the item is looked up as itself
    if fn in (operator.is_, operator.is_not, operator.getitem) or not any(_holds_base(a) for a in taking):
        return None
    contents = [a.base_contents(tx) if _holds_base(a) and any(a is t for t in taking) else a for a in args]
    result = call_operator(tx, fn, contents)
    return args[0] if result is contents[0] and contents[0] is not args[0] else result


def _holds_base(value: Variable) -> bool:
    return isinstance(value, _USER_OBJECTS) and issubclass(value.python_type(), (set, frozenset, dict, list))


def _call_dunder(tx: Tracer, obj: Variable, name: str, rest: list[Variable]) -> Variable | None:
    """obj.<name>(*rest) if obj's class defines it in Python and it does not answer NotImplemented; else None."""
    method = python_class_method(tx, obj, name)
    if method is None:
        return None
    result = method.call(tx, rest, {})
    return None if result.is_python_constant() and result.as_python_constant() is NotImplemented else result


_DUNDER_OPERATORS = _dunder_operators()


def _as_tuple_variable(value: Variable) -> Variable:
    if isinstance(value, ConstantVariable) and type(value.value) in (tuple, torch.Size):
        return TupleVariable([ConstantVariable(v) for v in value.value], py_type=type(value.value))
    return value


_SET_INPLACE = {
    operator.ior: "update",
    operator.iand: "intersection_update",
    operator.isub: "difference_update",
    operator.ixor: "symmetric_difference_update",
}


def _set_operator(tx: Tracer, fn: Callable[..., Any], a: SetVariable, b: SetVariable, from_view: bool) -> Variable:
    """An operator between two sets, on their keys (Python's own set algebra and comparisons). `s |= t` on a set
    changes s; on a frozenset, or with a dict view on the right (set.__ior__ takes sets only: Python falls back to
    the view's __ror__), it makes a new one. An operator with a dict view gives a set."""
    if fn in _SET_INPLACE and a.py_type is set and not from_view:
        a.call_method(tx, _SET_INPLACE[fn], [b], {})
        return a
    fn = OUT_OF_PLACE.get(fn, fn)
    if fn not in _SET_LIKE:
        unsupported(f"operator {fn.__name__} on sets", BreakCode.OPERATOR)
    result = fn(a.as_real_set(), b.as_real_set())
    if from_view and isinstance(result, frozenset):
        result = set(result)
    return SetVariable.wrap_result(result)


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
        # two objects are unequal by identity only where neither type has an __eq__ of its own
        if same is not None and (same or _eq_is_identity(a) and _eq_is_identity(b)):
            return ConstantVariable(same if fn is operator.eq else not same)
    for unreadable in (x for x in args if isinstance(x, UnreadableArg)):
        unreadable.python_type()  # (a break with the reason the argument could not be read)
    unsupported(f"operator {fn.__name__} on {[type(x).__name__ for x in args]}", BreakCode.OPERATOR)


def _eq_is_identity(value: Variable) -> bool:
    return lookup_class_attr(value.python_type(), "__eq__")[1] is object.__eq__


_SET_LIKE = frozenset(
    {operator.and_, operator.or_, operator.sub, operator.xor, operator.eq, operator.ne}
    | {operator.lt, operator.le, operator.gt, operator.ge}
    | {operator.iand, operator.ior, operator.isub, operator.ixor}
)


def _view_as_set(tx: Tracer, value: Variable, any_iterable: bool) -> Variable:
    """A keys or items view as the set it holds (what its set operators see); with `any_iterable` (`&`, `|`, `-`,
    `^` beside a view, which take any iterable), another iterable too; others unchanged. An items view's pairs are
    keys only where their values hash (a tensor value does, by identity)."""
    if isinstance(value, DictViewVariable) and value.kind != "values":
        return SetVariable.of(tx, value.unpack(tx))
    if any_iterable and not isinstance(value, (SetVariable, TensorVariable)) and _is_iterable(value):
        return SetVariable.of(tx, value.unpack(tx))
    return value


def _is_iterable(value: Variable) -> bool:
    try:
        return hasattr(value.python_type(), "__iter__")
    except Exception:  # a kind that does not know its type
        return False


def _contains(tx: Tracer, container: Variable, item: Variable) -> Variable:
    if isinstance(container, (DictVariable, SetVariable)) or getattr(container, "answers_contains", False):
        return container.call_method(tx, "__contains__", [item], {})
    if isinstance(container, TensorVariable):
        unsupported("`in` on a tensor (data-dependent)", BreakCode.DATA_DEPENDENT)
    if container.is_python_constant():
        return ConstantVariable(item.as_python_constant() in container.as_python_constant())
    for x in container.each_item(tx):  # `in` is `x is item or x == item`, item by item, up to the first match
        if _same_object(tx, x, item):
            return ConstantVariable(True)
        if isinstance(x, TensorVariable) or isinstance(item, TensorVariable):
            unsupported(
                "`in` compares a tensor with ==, which needs its value (data-dependent)", BreakCode.DATA_DEPENDENT
            )
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
    """A builtin class, a typing.Generic class, a class whose __class_getitem__ is types.GenericAlias (a
    collections.abc subclass) or a typing construct: subscripting it makes a type hint and runs nothing of the
    user's (list[torch.Tensor], typing.Optional[int], OrderedSet[T])."""
    if not isinstance(obj, KnownValueVariable):
        return False
    value = obj.value
    if isinstance(value, type):
        hook = lookup_class_attr(value, "__class_getitem__")[1]
        return (
            not value.__flags__ & HEAPTYPE
            and hasattr(value, "__class_getitem__")
            or issubclass(value, typing.Generic)
            or (isinstance(hook, classmethod) and hook.__func__ is types.GenericAlias)
        )
    return getattr(type(value), "__module__", None) == "typing"
