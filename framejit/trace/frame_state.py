"""What the opcode handler classes (ops_*.py) share: the state of the frame being traced and its stack."""

from __future__ import annotations

import traceback
import types
from typing import TYPE_CHECKING, Any

from framejit.codeobj import Inst
from framejit.contracts import TraceOutput
from framejit.sources import Source
from framejit.trace.cells import Cell
from framejit.variables.base import Variable


class FrameState:
    """The frame being traced, as the opcode handlers see it (set by Translator.__init__)."""

    output: TraceOutput
    code: types.CodeType
    f_globals: dict[str, Any]
    f_builtins: dict[str, Any]
    symbolic_locals: dict[str, Variable]
    cells: dict[str, Cell]
    parent: FrameState | None  # the frame inlining this one; None for the captured frame
    depth: int
    instructions: list[Inst]
    stack: list[Variable]
    ip: int  # the index of the next instruction
    current: Inst | None
    kw_names: tuple[str, ...]  # KW_NAMES' names, for the CALL that follows
    handling: int | None  # root frame: the index of the raise whose exception a handler is handling
    handled: list[Variable]  # root frame: the exceptions handlers are handling (PUSH_EXC_INFO to POP_EXCEPT)
    handling_stack: list[traceback.FrameSummary]  # root frame: where that raise is (the user's stack)

    def handled_exceptions(self) -> list[Variable]:
        """The exceptions being handled, innermost last: one list for the trace, as CPython keeps one per thread."""
        frame = self
        while frame.parent is not None:
            frame = frame.parent
        return frame.handled

    # -- stack ----------------------------------------------------------------------------
    def push(self, value: Variable) -> None:
        self.stack.append(value)

    def pop(self) -> Variable:
        return self.stack.pop()

    def popn(self, n: int) -> list[Variable]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst: Inst) -> None:
        assert inst.target_index is not None
        self.ip = inst.target_index

    if TYPE_CHECKING:
        # the Translator's (contracts.Tracer, and the global sources)
        def wrap(self, value: Any, source: Source | None) -> Variable: ...

        def wrap_constant(self, value: Any) -> Variable: ...

        def speculate_getattr(self, obj: Variable, name: str) -> Variable: ...

        def inline_call(
            self,
            code: types.CodeType,
            f_globals: dict[str, Any],
            bound: dict[str, Variable],
            *,
            closure: Any,
            fn_source: Source | None,
            fn_name: str,
        ) -> Variable: ...

        def zero_arg_super(self) -> Variable: ...

        def user_stack(self) -> list[traceback.FrameSummary]: ...

        def load_global(self, name: str) -> None: ...

        def run_class_body(self, body: Any) -> dict[str, Variable]: ...

        def frame_locals(self) -> dict[str, Variable]: ...

        def store_attr(self, obj: Variable, name: str, value: Variable, generic: bool = False) -> None: ...

        def global_source(self, name: str) -> Source: ...

        def globals_dict_source(self) -> Source | None: ...

        # another handler class's (ops_flow.FlowOps)
        def GET_ITER(self, inst: Inst) -> None: ...
