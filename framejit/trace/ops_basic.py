"""Opcode handlers: stack shuffling, locals, cells, globals, constants and attributes."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from framejit.codeobj import Inst
from framejit.contracts import GuardKind
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.trace.cells import CellVariable
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.base import NULL, LazyArg
from framejit.variables.user_object import delete_attribute


class BasicOps(FrameState):
    """Opcode handlers of the translator: stack shuffling, locals, cells, globals, constants and attributes."""

    @handles("NOP", "RESUME", "MAKE_CELL", "COPY_FREE_VARS", "EXTENDED_ARG", "CACHE")
    def NOP(self, inst: Inst) -> None:
        """Cells are made when the Translator starts; these need no work."""

    @handles("POP_TOP")
    def POP_TOP(self, inst: Inst) -> None:
        self.pop()

    @handles("PUSH_NULL")
    def PUSH_NULL(self, inst: Inst) -> None:
        self.push(NULL)

    @handles("COPY")
    def COPY(self, inst: Inst) -> None:
        self.push(self.stack[-inst.oparg])

    @handles("SWAP")
    def SWAP(self, inst: Inst) -> None:
        s = self.stack
        s[-1], s[-inst.oparg] = s[-inst.oparg], s[-1]

    @handles("LOAD_CONST")
    def LOAD_CONST(self, inst: Inst) -> None:
        self.push(self.wrap_constant(inst.argval))

    @handles("LOAD_FAST")
    def LOAD_FAST(self, inst: Inst) -> None:
        if inst.argval not in self.symbolic_locals:
            unsupported(f"local variable {inst.argval!r} referenced before assignment", BreakCode.UNBOUND)
        value = self.symbolic_locals[inst.argval]
        if isinstance(value, LazyArg):
            try:
                value = self.symbolic_locals[inst.argval] = value.realize(self)
            except Unsupported as e:
                e.unreadable_arg = inst.argval
                raise
        self.push(value)

    @handles("STORE_FAST")
    def STORE_FAST(self, inst: Inst) -> None:
        self.symbolic_locals[inst.argval] = self.pop()

    @handles("DELETE_FAST")
    def DELETE_FAST(self, inst: Inst) -> None:
        if inst.argval not in self.symbolic_locals:  # `del r` a second time: eager's UnboundLocalError
            unsupported(f"local variable {inst.argval!r} deleted before assignment", BreakCode.UNBOUND)
        del self.symbolic_locals[inst.argval]

    @handles("LOAD_DEREF", "LOAD_CLASSDEREF")
    def LOAD_DEREF(self, inst: Inst) -> None:
        if inst.opname == "LOAD_CLASSDEREF" and inst.argval in self.symbolic_locals:  # a class body's own name
            self.push(self.symbolic_locals[inst.argval])
            return
        cell = self.cells[inst.argval]
        value = cell.get()
        if isinstance(value, LazyArg):  # an argument captured by an inner function
            value = cell.value = value.realize(self)
        self.push(value)

    @handles("STORE_DEREF")
    def STORE_DEREF(self, inst: Inst) -> None:
        self.cells[inst.argval].set(self.pop())

    @handles("LOAD_CLOSURE")
    def LOAD_CLOSURE(self, inst: Inst) -> None:
        self.push(CellVariable(self.cells[inst.argval]))

    @handles("LOAD_GLOBAL")
    def LOAD_GLOBAL(self, inst: Inst) -> None:
        if inst.oparg & 1:
            self.push(NULL)
        self.load_global(inst.argval)

    def load_global(self, name: str) -> None:
        pending = self.output.side_effects.pending_global(self.f_globals, name)
        if pending is not None:
            self.push(pending)
        elif name in self.f_globals:
            self.push(self.wrap(self.f_globals[name], self.global_source(name)))
        elif name in self.f_builtins:
            globals_dict = self.globals_dict_source()
            if globals_dict is not None:  # a global of that name defined later would shadow the builtin
                self.output.guards.add(globals_dict, GuardKind.NO_KEY, name)
            self.push(self.wrap(self.f_builtins[name], None))
        else:
            unsupported(f"name {name!r} is not defined", BreakCode.UNBOUND)

    @handles("STORE_GLOBAL")
    def STORE_GLOBAL(self, inst: Inst) -> None:
        if self.f_globals is not self.output.f_globals:
            unsupported("writing a global of another module", BreakCode.SIDE_EFFECT)
        self.output.side_effects.store_global(self.f_globals, inst.argval, self.pop())

    @handles("LOAD_ATTR")
    def LOAD_ATTR(self, inst: Inst) -> None:
        self.push(self.pop().var_getattr(self, inst.argval))

    @handles("LOAD_METHOD")
    def LOAD_METHOD(self, inst: Inst) -> None:
        obj = self.pop()
        self.push(NULL)
        self.push(obj.var_getattr(self, inst.argval))

    @handles("STORE_ATTR")
    def STORE_ATTR(self, inst: Inst) -> None:
        obj, value = self.pop(), self.pop()
        self.store_attr(obj, inst.argval, value)

    @handles("DELETE_ATTR")
    def DELETE_ATTR(self, inst: Inst) -> None:
        delete_attribute(self, self.pop(), inst.argval)

    @handles("IMPORT_NAME")
    def IMPORT_NAME(self, inst: Inst) -> None:
        fromlist, level = self.pop(), self.pop()
        name = inst.argval
        if level.as_python_constant():  # `from . import m`, `from .m import f`: resolved against the package
            package = _package_of(self.f_globals)
            if not package:
                unsupported(f"relative import of {name!r} outside a package", BreakCode.IMPORT)
            name = importlib.util.resolve_name("." * level.as_python_constant() + name, package)
        if name not in sys.modules:  # importing would run the module's code now, out of the program's order
            unsupported(f"import of {name!r} (not imported yet)", BreakCode.IMPORT)
        if fromlist.as_python_constant() or level.as_python_constant():
            self.push(self.wrap(sys.modules[name], None))
        else:
            self.push(self.wrap(sys.modules[name.partition(".")[0]], None))

    @handles("IMPORT_FROM")
    def IMPORT_FROM(self, inst: Inst) -> None:
        self.push(self.stack[-1].var_getattr(self, inst.argval))

    @handles("LOAD_ASSERTION_ERROR")
    def LOAD_ASSERTION_ERROR(self, inst: Inst) -> None:
        unsupported("assertion failed", BreakCode.ASSERT)


def _package_of(f_globals: dict[str, Any]) -> str | None:
    """The package a relative import in code with these globals is resolved against, as the import system
    computes it: __package__, else the module spec's parent, else the module's name (a package) or its parent."""
    package = f_globals.get("__package__")
    if package is None and f_globals.get("__spec__") is not None:
        package = f_globals["__spec__"].parent
    if package is None:
        name = f_globals.get("__name__", "")
        package = name if "__path__" in f_globals else name.rpartition(".")[0]
    return package
