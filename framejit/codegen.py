"""Bytecode for the transformed function: call the compiled graph, rebuild Python values, replay writes."""
from __future__ import annotations

import types
from typing import Any, Callable

from bytecode import CellVar, Instr

from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable
from framejit.variables.callables import NestedFunctionVariable, UserMethodVariable
from framejit.variables.constant import WeakrefVariable
from framejit.variables.user_object import NewObjectVariable
from framejit.variables.containers import (BoundMethod, DictVariable, DictViewVariable, IteratorVariable,
                                           ListVariable, SetVariable, SliceVariable, TupleVariable)

GRAPH_OUT = "___graph_out"
_NO_ARG = object()


class PyCodegen:
    """Emits instructions that leave a Variable's real value on the stack.

    Tensors computed by the graph come from its output tuple (`output_index`);
    values with a source are reloaded from it; containers made during the trace
    are rebuilt (once: mutable ones are kept in a temporary so identity holds).
    """

    def __init__(self, output_index: dict[int, int], cell_names: frozenset[str] = frozenset(),
                 root_cells: dict[int, str] | None = None) -> None:
        self.output_index = output_index
        self.cell_names = cell_names            # the frame's cellvars (arguments among them are cells)
        self.root_cells = root_cells or {}      # id(trace Cell) -> name of that cell in the frame
        self.instructions: list[Instr] = []
        self.temps: list[str] = []
        self._built: dict[int, str] = {}

    def emit(self, opname: str, arg: Any = _NO_ARG) -> None:
        if opname in ("LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE") and isinstance(arg, str):
            arg = CellVar(arg)  # build_function_code turns it into a FreeVar where the name is free
        self.instructions.append(Instr(opname) if arg is _NO_ARG else Instr(opname, arg))

    def emit_const(self, value: Any) -> None:
        self.instructions.append(Instr("LOAD_CONST", value))

    def call(self, nargs: int) -> None:
        self.emit("PRECALL", nargs)
        self.emit("CALL", nargs)

    def new_temp(self) -> str:
        name = f"___tmp_{len(self.temps)}"
        self.temps.append(name)
        return name

    def store_temp(self, produce: Callable[[], None]) -> str:
        produce()
        name = self.new_temp()
        self.emit("STORE_FAST", name)
        return name

    def load_source(self, var: Variable) -> None:
        assert var.source is not None
        var.source.reconstruct(self)

    def load(self, var: Variable) -> None:
        if id(var) in self.output_index:
            self.emit("LOAD_FAST", GRAPH_OUT)
            self.emit_const(self.output_index[id(var)])
            self.emit("BINARY_SUBSCR")
        elif var.source is not None:
            var.source.reconstruct(self)
        elif id(var) in self._built:
            self.emit("LOAD_FAST", self._built[id(var)])
        else:
            self.build_fresh(var)

    def build_fresh(self, var: Variable) -> None:
        """Build `var` from its items (ignoring its source): new containers and replayed contents."""
        if isinstance(var, (TupleVariable, ListVariable)):
            for item in var.items:
                self.load(item)
            self.emit("BUILD_TUPLE" if isinstance(var, TupleVariable) else "BUILD_LIST", len(var.items))
            if isinstance(var, TupleVariable) and var.py_type is not tuple:
                self._named_tuple(var.py_type)
        elif isinstance(var, DictVariable):
            for key, value in var.items.items():
                self.emit_const(key)
                self.load(value)
            self.emit("BUILD_MAP", len(var.items))
        elif isinstance(var, SetVariable):
            var.reconstruct(self)
        elif isinstance(var, (WeakrefVariable, DictViewVariable)):
            var.reconstruct(self)
            return
        elif isinstance(var, NewObjectVariable):  # its attributes are set by the side-effect replay
            self.emit("PUSH_NULL")
            self.emit_const(object.__new__)
            self.load(var.cls_var)
            self.call(1)
        elif isinstance(var, SliceVariable):
            for part in var.parts:
                self.load(part)
            self.emit("BUILD_SLICE", len(var.parts))
        elif isinstance(var, BoundMethod):
            self.load(var.obj)
            self.emit("LOAD_ATTR", var.name)
            return
        elif isinstance(var, UserMethodVariable):
            self.emit("PUSH_NULL")
            self.emit_const(types.MethodType)
            self.load(var.fn)
            self.load(var.obj)
            self.call(2)
            return
        elif isinstance(var, NestedFunctionVariable):
            self._make_function(var)
            return
        elif isinstance(var, IteratorVariable) and var.live is not None and var.exhausted:
            self.emit_const(iter(()))  # exhausted: stays so even if the list grows
        elif isinstance(var, IteratorVariable) and var.live is not None:
            self.emit("PUSH_NULL")  # iter(the same list), advanced as far as the trace went
            self.emit_const(_advanced_iterator)
            self.load(var.live)
            self.emit_const(var.position)
            self.call(2)
        elif isinstance(var, IteratorVariable):
            for item in var.items:
                self.load(item)
            self.emit("BUILD_TUPLE", len(var.items))
            self.emit("GET_ITER")
        elif var.is_python_constant() and not isinstance(var, (TupleVariable, ListVariable)):
            self.emit_const(var.as_python_constant())
            return
        else:
            unsupported(f"cannot rebuild {var} after the graph", BreakCode.RECONSTRUCT)
        # one object per Variable: a list (or an iterator) loaded twice is the same object both times
        if isinstance(var, (ListVariable, DictVariable, SetVariable, IteratorVariable, NewObjectVariable)) \
                and var.source is None:
            name = self.new_temp()
            self.emit("COPY", 1)
            self.emit("STORE_FAST", name)
            self._built[id(var)] = name

    def _make_function(self, var: NestedFunctionVariable) -> None:
        """MAKE_FUNCTION for a function made during the trace, closing over the frame's own cells."""
        flags = 0
        if var.defaults:
            for item in var.defaults:
                self.load(item)
            self.emit("BUILD_TUPLE", len(var.defaults))
            flags |= 0x01
        if var.kwdefaults:
            self.build_fresh(DictVariable(var.kwdefaults))
            flags |= 0x02
        if var.closure:
            names = [self.root_cells.get(id(cell)) for cell in var.closure]
            if None in names:
                unsupported(f"cannot rebuild {var}: it closes over cells of an inlined function", BreakCode.RECONSTRUCT)
            for name in names:
                self.emit("LOAD_CLOSURE", name)
            self.emit("BUILD_TUPLE", len(names))
            flags |= 0x08
        self.emit_const(var.code)
        self.emit("MAKE_FUNCTION", flags)

    def _named_tuple(self, py_type: type) -> None:
        # stack: plain tuple -> py_type(*tuple) for namedtuples, py_type(tuple) for structseqs
        temp = self.new_temp()
        self.emit("STORE_FAST", temp)
        self.emit("PUSH_NULL")
        self.emit_const(py_type)
        if hasattr(py_type, "_make"):
            self.emit("LOAD_ATTR", "_make")
        self.emit("LOAD_FAST", temp)
        self.call(1)

    def replace_contents(self, var: Variable, temp: str) -> None:
        """Make the outside container behind var.source hold what the temp holds."""
        if isinstance(var, ListVariable):
            self.emit("LOAD_FAST", temp)
            self.load_source(var)
            self.emit_const(None)
            self.emit_const(None)
            self.emit("BUILD_SLICE", 2)
            self.emit("STORE_SUBSCR")
        elif isinstance(var, DictVariable):
            for method, args in (("clear", ()), ("update", (temp,))):
                self.load_source(var)
                self.emit("LOAD_METHOD", method)
                for arg in args:
                    self.emit("LOAD_FAST", arg)
                self.call(len(args))
                self.emit("POP_TOP")
        else:
            unsupported(f"replaying a mutation of {var}", BreakCode.SIDE_EFFECT)


def _advanced_iterator(iterable: Any, position: int) -> Any:
    """iter(iterable) at `position`: a list iterator the trace had advanced."""
    iterator = iter(iterable)
    iterator.__setstate__(position)
    return iterator
