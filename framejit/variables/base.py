"""The base of every value the symbolic interpreter pushes."""

from __future__ import annotations

from typing import Any, ClassVar, Iterator, Sequence

from framejit.contracts import Emitter, GuardKind, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.sources import Source


HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not written in C)


def lookup_class_attr(cls: type, name: str, after: type | None = None) -> tuple[type | None, Any]:
    """(the class on cls.__mro__ that defines `name`, its raw value) without running descriptors, or (None, None);
    with `after`, the search starts past that class (super())."""
    mro = cls.__mro__
    for klass in mro[mro.index(after) + 1 :] if after is not None else mro:
        if name in vars(klass):
            return klass, vars(klass)[name]
    return None, None


class Variable:
    """A value during tracing: a Python constant, a container, a tensor (FX node), a function...

    Containers are mutable Python objects here: a list mutated during the trace
    is the same Variable everywhere it is referenced, so aliasing is exact.
    """

    source: Source | None = None

    def python_type(self) -> type:
        raise NotImplementedError(type(self).__name__)

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self) -> Any:
        unsupported(f"{self} is not a Python constant", BreakCode.NOT_CONSTANT)

    def var_getattr(self, tx: Tracer, name: str) -> "Variable":
        unsupported(f"getattr {name!r} on {self}", BreakCode.GETATTR)

    def call(self, tx: Tracer, args: Sequence["Variable"], kwargs: dict[str, "Variable"]) -> "Variable":
        unsupported(f"call to {self}", BreakCode.CALL)

    def call_method(
        self, tx: Tracer, name: str, args: Sequence["Variable"], kwargs: dict[str, "Variable"]
    ) -> "Variable":
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx: Tracer) -> list["Variable"]:
        """The items this value yields when iterated or unpacked."""
        unsupported(f"iterating over {self}", BreakCode.ITER)

    def each_item(self, tx: Tracer) -> Iterator["Variable"]:
        """The items as a CPython consumer that works item by item takes them (`in`, any, list.extend, sum...): an
        iterator is advanced one item per step, so the consumer's work interleaves with a generator's side effects
        and a consumer that stops early leaves the rest untaken; a container's items are read now."""
        return iter(self.unpack(tx))

    def guard_missing_attr(self, tx: Tracer, name: str) -> None:
        """Guard that attribute `name`, found missing, stays missing (the answer is guarded like any other read)."""
        if self.source is not None:
            tx.output.guards.add(self.source, GuardKind.NO_ATTR, name)

    def truth(self, tx: Tracer) -> bool:
        """bool(value) decided at trace time (jumps, `not`, `and`/`or`)."""
        unsupported(f"bool() of {self}", BreakCode.TRUTH)

    def as_node_arg(self) -> Any:
        """This value as an argument of an FX node (nodes for tensors, literals for constants)."""
        unsupported(f"{self} as an argument of a graph op", BreakCode.GRAPH_ARG)

    def as_fake(self) -> Any:
        """This value as an argument of fake-tensor execution."""
        unsupported(f"{self} as an argument of a graph op", BreakCode.GRAPH_ARG)

    def children(self) -> list["Variable"]:
        """The Variables this one holds (container items, a method's object...), for graph outputs."""
        return []

    # mutable: when made anew after the graph, loading it twice must give one object (the code generator
    # keeps it in a temporary)
    rebuilt_once: ClassVar[bool] = False

    def rebuild(self, cg: Emitter) -> None:
        """Emit the bytecode that makes this value anew from its parts, after the graph (its source aside)."""
        if not self.is_python_constant():
            unsupported(f"cannot rebuild {self} after the graph", BreakCode.RECONSTRUCT)
        cg.emit_const(self.as_python_constant())

    def replace_contents(self, cg: Emitter, temp: str) -> None:
        """Make the outside object behind this value's source hold what `temp` holds (a replayed mutation)."""
        unsupported(f"replaying a mutation of {self}", BreakCode.SIDE_EFFECT)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class KnownValueVariable(Variable):
    """A value known at trace time and used as itself: a constant, a builtin or torch function, an opaque
    object. Subclasses decide what can be done with it."""

    def __init__(self, value: Any, source: Any = None) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.value

    def truth(self, tx: Tracer) -> bool:
        """A function or class is true (`if self.activation:`); a value whose class decides its truth in C (a
        builtin or torch type) is asked now, as it is known; one whose class has a Python __bool__ or __len__ is
        not (that code would run)."""
        cls = type(self.value)
        if cls.__flags__ & HEAPTYPE and any(lookup_class_attr(cls, n)[0] is not None for n in ("__bool__", "__len__")):
            return super().truth(tx)
        try:
            return bool(self.value)
        except Exception:  # noqa: BLE001 - (a numpy array of many items): Python raises it at run time
            return super().truth(tx)


class LazyArg(Variable):
    """An argument of the captured frame not read yet: wrapped on first read, else reloaded by source."""

    def __init__(self, value: Any, source: Source) -> None:
        self.value = value
        self.source = source

    def realize(self, tx: Tracer) -> Variable:
        return tx.wrap(self.value, self.source)


class UnreadableArg(Variable):
    """An argument the trace cannot read as a value (a dict whose keys compare by value): loaded, stored and
    passed on as it is (reloaded from its source), but any use of it is a graph break, with the reason reading
    it gave, at the instruction that uses it (which can resume; the load cannot)."""

    def __init__(self, source: Source | None, msg: str, code: BreakCode) -> None:
        self.source = source
        self.msg, self.code = msg, code

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        unsupported(self.msg, self.code)

    python_type = as_python_constant = call = call_method = unpack = truth = _refuse
    as_node_arg = as_fake = guard_missing_attr = _refuse

    def var_getattr(self, tx: Any, name: str) -> Variable:
        unsupported(f"{self.msg} (at .{name})", self.code)

    def __repr__(self) -> str:
        return f"UnreadableArg({self.source.name() if self.source else '?'})"


class NullVariable(Variable):
    """The NULL that PUSH_NULL and LOAD_GLOBAL/LOAD_METHOD put below a callable."""

    def __repr__(self) -> str:
        return "NULL"


NULL = NullVariable()


class ExcInfoVariable(Variable):
    """What PUSH_EXC_INFO saves below the exception `exc` being handled (the one handled before, which
    POP_EXCEPT restores). Only a continuation that starts at an except clause meets it."""

    def __init__(self, exc: Variable) -> None:
        self.exc = exc

    def children(self) -> list[Variable]:
        return [self.exc]

    def __repr__(self) -> str:
        return "ExcInfo"
