"""A class statement in traced code (`LOAD_BUILD_CLASS`): the class body is traced into a namespace, and when it
is safe the class is made now, at trace time, so that its instances are objects made in the trace
(NewObjectVariable) whose methods are the body's functions, traced.

Safe means making it runs no user code and depends on nothing known only at run time: a metaclass of `type`, no
`__init_subclass__` in the bases, no keywords (`metaclass=`), a body that writes nothing that existed before and
whose namespace holds only constants and functions made in it (their defaults constants, no variable of the
enclosing function read: the body code has no free variables). Otherwise the CALL of `__build_class__` is a
graph break naming why; what the frame did before it is still captured.

Each call of the function makes a new class in Python: the class made now serves the trace only. When the class
(or an instance) outlives the graph, the code after the graph makes the class again by running the class
statement (`__build_class__` of the body code): one class per call, as in eager, and the instances are made of it.
"""

from __future__ import annotations

import builtins
import types
from typing import Any, Sequence

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.callables import NestedFunctionVariable
from framejit.variables.constant import ObjectVariable, is_literal
from framejit.variables.user_object import construct, constructible


class BuildClassVariable(Variable):
    """builtins.__build_class__, as LOAD_BUILD_CLASS pushes it."""

    def python_type(self) -> type:
        return types.BuiltinFunctionType

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable) or not args[1].is_python_constant():
            unsupported("__build_class__ called other than by a class statement", BreakCode.CALL)
        body, name = args[0], args[1].as_python_constant()
        why = f"class statement {name}: "
        if kwargs:
            unsupported(why + f"keywords {sorted(kwargs)} (a metaclass runs Python to make it)", BreakCode.OPCODE)
        bases = _bases(why, args[2:])
        if body.code.co_freevars:
            unsupported(
                why + f"its body or methods read variables of the enclosing function {list(body.code.co_freevars)}",
                BreakCode.OPCODE,
            )
        checkpoint = tx.output.side_effects.checkpoint()
        namespace = tx.run_class_body(body)
        if tx.output.side_effects.wrote_older_state(checkpoint):
            unsupported(why + "its body writes state that existed before it", BreakCode.SIDE_EFFECT)
        real_ns = _real_namespace(why, namespace)
        cls = type(name, tuple(b.as_python_constant() for b in bases), real_ns)
        made = LocalClassVariable(cls, body.code, body.f_globals, bases)
        tx.output.side_effects.local_classes[id(cls)] = made
        return made

    def rebuild(self, cg: Emitter) -> None:
        cg.emit_const(builtins.__build_class__)

    def __repr__(self) -> str:
        return "BuildClassVariable()"


def _bases(why: str, bases: Sequence[Variable]) -> list[Variable]:
    """The bases as Variables of classes known now; the metaclass and the bases' hooks must run no user code."""
    for base in bases:
        cls = base.as_python_constant() if base.is_python_constant() else None
        if not isinstance(cls, type):
            unsupported(why + f"base {base} is not a class known at trace time", BreakCode.OPCODE)
        if type(cls) is not type:
            unsupported(why + f"metaclass {type(cls).__name__} runs Python to make the class", BreakCode.OPCODE)
        hooks = [k.__name__ for k in cls.__mro__ if "__init_subclass__" in vars(k) and k is not object]
        if hooks:
            unsupported(why + f"__init_subclass__ of {hooks[0]} runs when the class is made", BreakCode.OPCODE)
    return list(bases)


def _real_namespace(why: str, namespace: dict[str, Variable]) -> dict[str, Any]:
    """The namespace as real values: constants, and real functions made from the body's functions (closing over
    the class's own `__class__` cell, which type() fills)."""
    class_cell = types.CellType()
    real: dict[str, Any] = {}
    for key, value in namespace.items():
        if key == "__classcell__" and value.python_type() is types.CellType:
            real[key] = class_cell
        elif isinstance(value, NestedFunctionVariable):
            real[key] = _real_function(why, key, value, class_cell)
        elif isinstance(value, DescriptorVariable):
            real[key] = value.kind(_real_function(why, key, value.fn, class_cell))
        elif value.is_python_constant() and _shareable(key, value.as_python_constant()):
            real[key] = value.as_python_constant()
        else:
            unsupported(
                why + f"class attribute {key!r} is {value} (only immutable constants, classes and functions are "
                "made at trace time)",
                BreakCode.OPCODE,
            )
    return real


def _shareable(key: str, value: Any) -> bool:
    """A value the class made now may hold: one that is the same in the class made after the graph (immutable,
    or a class or function from outside, by identity). A mutable one would be written in the wrong class."""
    if key == "__annotations__":  # (made by the body from constants: read by dataclasses and typing)
        return isinstance(value, dict)
    return is_literal(value) or isinstance(value, (type, types.BuiltinFunctionType, types.FunctionType))


def _real_function(why: str, key: str, fn: NestedFunctionVariable, class_cell: Any) -> types.FunctionType:
    if fn.renamed or fn.func_dict.items:
        unsupported(why + f"method {key!r} has attributes written in the trace", BreakCode.OPCODE)
    if set(fn.code.co_freevars) - {"__class__"}:
        unsupported(why + f"method {key!r} closes over {list(fn.code.co_freevars)}", BreakCode.OPCODE)
    parts = [*fn.defaults, *fn.kwdefaults.values()]
    if not all(p.is_python_constant() for p in parts):
        unsupported(why + f"method {key!r} has defaults known only at run time", BreakCode.OPCODE)
    closure = tuple(class_cell for _ in fn.code.co_freevars)
    defaults = tuple(d.as_python_constant() for d in fn.defaults) or None
    made = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name, defaults, closure or None)
    made.__qualname__ = fn.qualname
    made.__kwdefaults__ = {k: v.as_python_constant() for k, v in fn.kwdefaults.items()} or None
    return made


class DescriptorVariable(Variable):
    """staticmethod(f), classmethod(f) or property(f) of a function made in the trace (a decorated method of a
    class body): made real with the class."""

    def __init__(self, kind: type, fn: NestedFunctionVariable) -> None:
        self.kind, self.fn = kind, fn

    def python_type(self) -> type:
        return self.kind

    def __repr__(self) -> str:
        return f"DescriptorVariable({self.kind.__name__}({self.fn.qualname}))"


def _descriptor(kind: type) -> Any:
    def trace_call(tx: Tracer, args: list[Variable], kwargs: dict) -> Variable:
        if len(args) != 1 or kwargs or not isinstance(args[0], NestedFunctionVariable):
            unsupported(f"{kind.__name__}() of other than a function made in the trace", BreakCode.BUILTIN)
        return DescriptorVariable(kind, args[0])

    return trace_call


# builtins -> how a call of one is traced (joined into builtins.TRACED_BUILTINS)
RULES = {kind: _descriptor(kind) for kind in (staticmethod, classmethod, property)}


class LocalClassVariable(ObjectVariable):
    """A class made by a class statement in the trace (`value`, made at trace time for the trace's use). Its
    instances are NewObjectVariables; after the graph it is made again by the class statement."""

    rebuilt_once = True  # one class per call, however many values hold it

    def __init__(self, cls: type, body_code: types.CodeType, f_globals: dict, bases: list[Variable]) -> None:
        super().__init__(cls)
        self.body_code, self.f_globals, self.bases = body_code, f_globals, bases

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if constructible(self.value):
            return construct(tx, self, args, kwargs)
        unsupported(f"making an instance of {self.value.__name__}, a class made in the trace", BreakCode.CALL)

    def children(self) -> list[Variable]:
        return list(self.bases)

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(_class_again)
        cg.emit_const(self.body_code)
        cg.emit_const(self.f_globals)
        cg.emit_const(self.value.__name__)
        for base in self.bases:
            cg.load(base)
        cg.emit("BUILD_TUPLE", len(self.bases))
        cg.call(4)

    def __repr__(self) -> str:
        return f"LocalClassVariable({self.value.__qualname__})"


def _class_again(body_code: types.CodeType, f_globals: dict, name: str, bases: tuple) -> type:
    """The class statement run again after the graph: a new class, as each call of the function makes."""
    return builtins.__build_class__(types.FunctionType(body_code, f_globals, name), name, *bases)  # type: ignore[attr-defined]
