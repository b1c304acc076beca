"""Opcode handlers: jumps (on trace-time constants only) and for-loops (unrolled)."""

from __future__ import annotations

from framejit.codeobj import Inst
from framejit.exc import BreakCode, unsupported
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.containers import IteratorVariable, ListVariable
from framejit.variables.generators import refuse_outside_generator
from framejit.variables.mappings import dict_iterator
from framejit.variables.user_object import iterate_user_object


class FlowOps(FrameState):
    """Opcode handlers of the translator: jumps and for-loops."""

    @handles("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
    def JUMP(self, inst: Inst) -> None:
        self.jump(inst)

    @handles("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE")
    def POP_JUMP_IF_TRUE(self, inst: Inst) -> None:
        if self.pop().truth(self):
            self.jump(inst)

    @handles("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE")
    def POP_JUMP_IF_FALSE(self, inst: Inst) -> None:
        if not self.pop().truth(self):
            self.jump(inst)

    def _is_none(self) -> bool:
        value = self.pop()
        return value.is_python_constant() and value.as_python_constant() is None

    @handles("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE")
    def POP_JUMP_IF_NONE(self, inst: Inst) -> None:
        if self._is_none():
            self.jump(inst)

    @handles("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")
    def POP_JUMP_IF_NOT_NONE(self, inst: Inst) -> None:
        if not self._is_none():
            self.jump(inst)

    @handles("JUMP_IF_TRUE_OR_POP")
    def JUMP_IF_TRUE_OR_POP(self, inst: Inst) -> None:
        if self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    @handles("JUMP_IF_FALSE_OR_POP")
    def JUMP_IF_FALSE_OR_POP(self, inst: Inst) -> None:
        if not self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    @handles("GET_ITER")
    def GET_ITER(self, inst: Inst) -> None:
        value = self.pop()
        refuse_outside_generator(value, "iterating over")
        if isinstance(value, IteratorVariable):
            self.push(value)
        elif type(value) is ListVariable:  # live: appending to the list while looping over it is seen
            self.push(IteratorVariable([], live=value))
        elif (iterator := dict_iterator(self, value)) is not None:
            self.push(iterator)
        elif (user_iterator := iterate_user_object(self, value)) is not None:
            if not isinstance(user_iterator, IteratorVariable):
                unsupported(
                    f"__iter__ of {value} gave {user_iterator}, not an iterator the trace follows", BreakCode.ITER
                )
            self.push(user_iterator)
        else:
            self.push(IteratorVariable(value.unpack(self)))

    @handles("FOR_ITER")
    def FOR_ITER(self, inst: Inst) -> None:
        iterator = self.stack[-1]
        refuse_outside_generator(iterator, "iterating over")
        if not isinstance(iterator, IteratorVariable):
            unsupported(f"iterating over {iterator} inside the trace", BreakCode.ITER)
        item = iterator.next()
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)
