"""Exceptions in the trace: `raise`, re-raise, and the jump to the handler a try block names."""

from __future__ import annotations

from framejit.codeobj import Inst, exception_table, offset_to_index
from framejit.codeobj.reading import exception_entry_at
from framejit.exc import BreakCode, ObservedException, raise_observed, unsupported
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.base import KnownValueVariable, Variable
from framejit.variables.constant import ConstantVariable, ObjectVariable
from framejit.variables.user_object import UserObjectVariable


def _raised(value: Variable) -> BaseException | None:
    """The exception `raise value` raises when value is an exception class or instance known now (made in the
    trace, or an instance passed in). A class is called with no arguments, as Python does (`raise ValueError`,
    `raise X from KeyError`)."""
    if not isinstance(value, (KnownValueVariable, UserObjectVariable)):
        return None
    exc = value.value
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    return exc if isinstance(exc, BaseException) else None


class ExceptOps(FrameState):
    """Opcode handlers of the translator that raise, and the routing of a raised exception to its handler."""

    @handles("RAISE_VARARGS")
    def RAISE_VARARGS(self, inst: Inst) -> None:
        args = self.popn(inst.oparg)
        if not args:  # a bare raise: the exception being handled, if the trace raised it
            handled = self.handled_exceptions()
            exc = _raised(handled[-1]) if handled else None
            if exc is not None:
                raise_observed(exc, reraised=True)
        else:
            exc = _raised(args[0])
        if exc is None:
            unsupported("raise of an exception not known at trace time (or a bare raise)", BreakCode.EXCEPTION)
        if len(args) == 2:
            cause = _raised(args[1])
            exc.__cause__ = cause  # `raise X from None` leaves it None, as Python does
        raise_observed(exc)

    @handles("RERAISE")
    def RERAISE(self, inst: Inst) -> None:
        exc = _raised(self.pop())
        if exc is not None:
            raise_observed(exc, reraised=True)
        unsupported("RERAISE: re-raising an exception inside a compiled region", BreakCode.EXCEPTION)

    @handles("WITH_EXCEPT_START")
    def WITH_EXCEPT_START(self, inst: Inst) -> None:
        """The exception path of a with block: [__exit__, lasti, previous exc_info, exc] -> push
        `__exit__(type(exc), exc, None)`. A true result suppresses it (the jump after this), else RERAISE. The
        traceback is None: the trace has no real one (torch.compile passes None too)."""
        exit_, exc = self.stack[-4], self.stack[-1]
        value = _raised(exc)
        if value is None:
            unsupported(f"{inst.opname} with {exc}, not an exception known at trace time", BreakCode.EXCEPTION)
        kind = self.wrap(type(value), None)
        self.push(exit_.call(self, [kind, exc, ConstantVariable(None)], {}))

    def chain_to_handled(self, e: ObservedException) -> None:
        """What CPython does when an exception is raised while another is handled: the handled one becomes its
        __context__ (a cycle through the handled one's own chain is cut). A re-raise keeps its context."""
        if e.chained:
            return
        e.chained = True
        handled = self.handled_exceptions()
        current = _raised(handled[-1]) if handled else None
        if current is None or current is e.exc:
            return
        link = current
        while (context := link.__context__) is not None:
            if context is e.exc:
                link.__context__ = None
                break
            link = context
        e.exc.__context__ = current

    def route_exception(self, e: ObservedException) -> bool:
        """Jump to the handler covering the current instruction, as CPython's unwinding does; False if none."""
        if self.current is None:
            return False
        entry = exception_entry_at(exception_table(self.code), self.current.offset)
        if entry is None:
            return False
        if self.parent is None and self.handling is None:
            self.handling = self.ip - 1  # until the outermost handler is done (POP_EXCEPT)
            self.handling_stack = e.user_stack or self.user_stack()
        del self.stack[entry.depth :]
        if entry.lasti:
            self.push(ConstantVariable(self.current.offset))
        self.push(ObjectVariable(e.exc))
        self.kw_names = ()
        self.ip = offset_to_index(self.instructions)[entry.target]
        return True
