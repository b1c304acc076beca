"""Opcode handlers: calls, function creation, with-blocks, generators and return."""

from __future__ import annotations

from typing import Sequence

from framejit.codeobj import Inst
from framejit.exc import BreakCode, unsupported
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.base import NULL, ExcInfoVariable, Variable
from framejit.variables.callables import NestedFunctionVariable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import IteratorVariable
from framejit.variables.generators import GeneratorVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.torch_special import WithExitVariable
from framejit.variables.user_object import python_class_method


class ReturnValue(Exception):
    """Raised by RETURN_VALUE to end a frame's trace with its return value."""

    def __init__(self, value: Variable) -> None:
        self.value = value


def _is_none(value: Variable) -> bool:
    return value.is_python_constant() and value.as_python_constant() is None


class Yielded(Exception):
    """Raised by YIELD_VALUE to suspend a generator's frame with the item it yields."""

    def __init__(self, value: Variable) -> None:
        self.value = value


class CallOps(FrameState):
    """Opcode handlers of the translator: calls, function creation, with-blocks, exceptions and return."""

    def _call(self, fn: Variable, args: list[Variable], kw_names: Sequence[str]) -> None:
        kwargs: dict[str, Variable] = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[-len(kw_names) :]))
            args = args[: -len(kw_names)]
        self.push(fn.call(self, args, kwargs))

    @handles("PRECALL")
    def PRECALL(self, inst: Inst) -> None:
        """3.11 splits calls in PRECALL + CALL; all the work happens at CALL."""

    @handles("KW_NAMES")
    def KW_NAMES(self, inst: Inst) -> None:
        self.kw_names = tuple(inst.argval)

    @handles("CALL")
    def CALL(self, inst: Inst) -> None:
        args = self.popn(inst.oparg)
        callable_or_self, below = self.pop(), self.pop()
        if below is NULL:
            fn = callable_or_self
        else:  # a method: [method, self, args...]
            fn, args = below, [callable_or_self, *args]
        kw_names, self.kw_names = self.kw_names, ()
        self._call(fn, args, kw_names)

    @handles("CALL_FUNCTION_EX")
    def CALL_FUNCTION_EX(self, inst: Inst) -> None:
        kwargs = self.pop() if inst.oparg & 1 else DictVariable({})
        args, fn = self.pop(), self.pop()
        self.pop()  # 3.11 always pushes a NULL below the callable of CALL_FUNCTION_EX
        if not isinstance(kwargs, DictVariable):
            unsupported("**kwargs that is not a dict", BreakCode.CALL)
        arg_list = args.unpack(self)
        self.push(fn.call(self, arg_list, dict(kwargs.items)))

    @handles("MAKE_FUNCTION")
    def MAKE_FUNCTION(self, inst: Inst) -> None:
        code = self.pop().as_python_constant()
        closure = [c.cell for c in self.pop().unpack(self)] if inst.oparg & 0x08 else None  # type: ignore[attr-defined]
        annotations = self.pop() if inst.oparg & 0x04 else None  # not needed to run it; kept if it is rebuilt
        kwdefaults = self.pop().items if inst.oparg & 0x02 else {}  # type: ignore[attr-defined]
        defaults = self.pop().unpack(self) if inst.oparg & 0x01 else []
        self.push(
            NestedFunctionVariable(
                code, code.co_qualname, self.f_globals, defaults, dict(kwdefaults), closure, annotations
            )
        )

    @handles("RETURN_VALUE")
    def RETURN_VALUE(self, inst: Inst) -> None:
        raise ReturnValue(self.pop())  # (a generator's: what StopIteration carries, `yield from`'s value)

    @handles("RETURN_GENERATOR")
    def RETURN_GENERATOR(self, inst: Inst) -> None:
        """A generator's frame starts (its first resume, variables/generators.py): the value POP_TOP drops."""
        self.push(ConstantVariable(None))

    @handles("YIELD_VALUE")
    def YIELD_VALUE(self, inst: Inst) -> None:
        """The generator's frame stops here until it is resumed (with the sent value pushed, or an exception
        raised at this instruction)."""
        raise Yielded(self.pop())

    @handles("GET_YIELD_FROM_ITER")
    def GET_YIELD_FROM_ITER(self, inst: Inst) -> None:
        self.GET_ITER(inst)  # iter(); coroutines are never traced

    @handles("SEND")
    def SEND(self, inst: Inst) -> None:
        """`yield from it`, one step: send the value to `it` (next() for None); what it yields is yielded by the
        YIELD_VALUE after this; when it is exhausted, its return value is the value of the expression."""
        sent = self.pop()
        receiver = self.stack[-1]
        if isinstance(receiver, GeneratorVariable):
            item = receiver.resume(self, None if _is_none(sent) else sent, None)
        else:
            if not isinstance(receiver, IteratorVariable):
                unsupported(f"`yield from` {receiver}", BreakCode.GENERATOR)
            if not _is_none(sent):
                unsupported(f"send() of a value through `yield from` into {receiver}", BreakCode.GENERATOR)
            item = receiver.next()
        if item is None:
            self.pop()
            self.push(receiver.returned or ConstantVariable(None))
            self.jump(inst)
        else:
            self.push(item)

    @handles("BEFORE_WITH")
    def BEFORE_WITH(self, inst: Inst) -> None:
        ctx = self.pop()
        enter, exit_ = (python_class_method(self, ctx, name) for name in ("__enter__", "__exit__"))
        if enter is not None and exit_ is not None:  # a context manager written in Python: both traced
            self.push(exit_)  # the normal exit calls it with three Nones; an exception in the block breaks
            self.push(enter.call(self, [], {}))
            return
        if not hasattr(ctx, "enter"):
            unsupported(f"with-block on {ctx}, which is not a supported context manager", BreakCode.CONTEXT_MANAGER)
        self.push(WithExitVariable(ctx))
        self.push(ctx.enter(self))

    @handles("PUSH_EXC_INFO")
    def PUSH_EXC_INFO(self, inst: Inst) -> None:
        exc = self.pop()
        self.push(ExcInfoVariable(exc))
        self.push(exc)
        self.handled_exceptions().append(exc)  # what a bare `raise` raises until POP_EXCEPT

    @handles("CHECK_EXC_MATCH")
    def CHECK_EXC_MATCH(self, inst: Inst) -> None:
        expected = self.pop().as_python_constant()
        self.push(ConstantVariable(issubclass(self.stack[-1].python_type(), expected)))

    @handles("POP_EXCEPT")
    def POP_EXCEPT(self, inst: Inst) -> None:
        handled = self.handled_exceptions()
        if handled:
            handled.pop()
        if self.parent is None and not handled and self.instructions[self.ip].opname != "RERAISE":
            self.handling = None  # the outermost handler is done (a cleanup's RERAISE goes on propagating it)
        saved = self.pop()
        if not isinstance(saved, ExcInfoVariable):  # a real PUSH_EXC_INFO ran before this continuation
            self.output.side_effects.restore_exc_info(saved)
