"""Opcode handlers of a class statement: LOAD_BUILD_CLASS, and the name opcodes of a class body, whose names are
the class namespace (the body frame's symbolic locals); see variables/local_class.py."""

from __future__ import annotations

from framejit.codeobj import Inst
from framejit.exc import BreakCode, unsupported
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.local_class import BuildClassVariable
from framejit.variables.mappings import DictVariable


class ClassOps(FrameState):
    """Opcode handlers of the translator for class statements and class bodies."""

    @handles("LOAD_BUILD_CLASS")
    def LOAD_BUILD_CLASS(self, inst: Inst) -> None:
        self.push(BuildClassVariable())

    @handles("LOAD_NAME")
    def LOAD_NAME(self, inst: Inst) -> None:
        """The namespace, then the globals, then the builtins."""
        if inst.argval in self.symbolic_locals:
            self.push(self.symbolic_locals[inst.argval])
        else:
            self.load_global(inst.argval)

    @handles("STORE_NAME")
    def STORE_NAME(self, inst: Inst) -> None:
        self.symbolic_locals[inst.argval] = self.pop()

    @handles("SETUP_ANNOTATIONS")
    def SETUP_ANNOTATIONS(self, inst: Inst) -> None:
        """A class body with annotations: its namespace gets an `__annotations__` dict."""
        if "__annotations__" not in self.symbolic_locals:
            self.symbolic_locals["__annotations__"] = DictVariable({})

    @handles("DELETE_NAME")
    def DELETE_NAME(self, inst: Inst) -> None:
        if inst.argval not in self.symbolic_locals:
            unsupported(f"name {inst.argval!r} is not defined", BreakCode.UNBOUND)
        del self.symbolic_locals[inst.argval]
