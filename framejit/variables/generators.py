"""A generator made in the trace (a generator function or expression called there), run lazily as Python runs it.

Calling a generator function makes its frame (a suspended translator) without running it. `next()` / `send()`
resume that frame up to its next `yield` (which gives the item) or its return (StopIteration); `throw()` raises
the exception at the suspended `yield`, where the frame's own handlers catch it; `close()` throws GeneratorExit.
So the generator's side effects happen when it is advanced, in order with the rest of the frame.

After the graph (a break, or the generator outliving the frame) a suspended generator is made again as a real
generator over the items it has left: those are taken now (`settle`), which is right only if taking them writes
nothing that existed before and no handler of a generator would run differently (one with a try block or a
with-block is refused: `throw()`, `close()` or the collector would run its handlers in Python). A generator
dropped while suspended inside a try or with block is refused as well, since Python closes it, running them.
"""

from __future__ import annotations

import types
from typing import Any, Iterator, Protocol, Sequence

from framejit.codeobj import exception_table
from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, ObservedException, Unsupported, raise_observed, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import BoundMethod, IteratorVariable

CREATED, SUSPENDED, RUNNING, DONE = "created", "suspended", "running", "done"
GENERATOR_TYPE = types.GeneratorType


class GeneratorFrame(Protocol):
    """The suspended frame of a generator (trace.translator.Translator), as the generator resumes it."""

    parent: Any
    code: Any
    output: Any

    def resume_generator(
        self, started: bool, sent: Variable | None, thrown: BaseException | None
    ) -> tuple[bool, Variable]:
        """Run to the next yield: (True, the item) or (False, the return value). A started frame gets `sent`
        (None: None) as the value of its yield, or `thrown` raised there, which its handlers may catch; an
        exception nothing in the frame catches propagates."""
        ...

    def suspended_in_try(self) -> bool:
        """Whether the yield it is suspended at is inside a try or with block."""
        ...

    def in_yield_from(self) -> bool:
        """Whether the frame is suspended in a `yield from` (at the yield after SEND)."""
        ...

    def yield_from_delegate(self) -> Variable:
        """The iterator of the `yield from` it is suspended in."""
        ...

    def leave_yield_from(self) -> None:
        """Drop the delegate and go on after the `yield from` loop (the next resume gives its value)."""
        ...

    def handled_exceptions(self) -> list[Variable]:
        """The trace's list of the exceptions being handled (trace.frame_state.FrameState)."""
        ...

    def sent_value_used(self) -> bool:
        """Whether the code after the yield it is suspended at uses the yield's value (what send() gives)."""
        ...


class GeneratorVariable(IteratorVariable):
    """A generator object made in the trace; its frame runs when it is advanced."""

    from_generator = True

    def __init__(self, frame: GeneratorFrame, name: str) -> None:
        super().__init__([])
        self.frame = frame
        self.name = name
        self.state = CREATED
        self.advances = 0  # times its frame was resumed (a speculative read that resumed it cannot be forgotten)
        self.rest: list[Variable] | None = None  # the items left, once settled for a rebuild
        self.started = False  # whether it had been advanced when it was settled (its rebuild is started too)
        self.exc_state: list[Variable] = []  # the exceptions its frame's except clauses handle while suspended
        self.has_handlers = bool(exception_table(frame.code))  # a try or with block somewhere in its body
        frame.output.side_effects.generators.append(self)

    def python_type(self) -> type:
        return GENERATOR_TYPE

    def __repr__(self) -> str:
        return f"GeneratorVariable({self.name}, {self.state})"

    # -- the protocol -----------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        return self.state == DONE

    @property
    def items(self) -> list[Variable]:
        return self.unpack(None)  # (only a rebuild or unpack asks: it takes them all)

    @property
    def suspended_in_handler(self) -> bool:
        """Suspended at a yield inside a try or with block: Python runs the handler when it is closed."""
        return self.state == SUSPENDED and self.frame.suspended_in_try()

    def resume(self, tx: Tracer | None, sent: Variable | None, thrown: BaseException | None) -> Variable | None:
        """Advance: the next item, or None when it returned (`returned` holds the value)."""
        if self.state == RUNNING:
            raise_observed(ValueError("generator already executing"))
        if self.state == DONE:
            if thrown is not None:
                raise_observed(thrown)
            return None
        if self.rest is not None:
            unsupported(f"generator {self.name} advanced after it was settled for a rebuild", BreakCode.GENERATOR)
        if self.frame.output.side_effects.settling:
            self._refuse_settling(sends_none=sent is None and thrown is None)
        if thrown is not None and self.state == CREATED:  # raised before its first instruction: nothing catches
            self.state = DONE
            raise_observed(thrown)
        if tx is not None:
            self.frame.parent = tx  # the frame advancing it (for the user's stack of what happens inside)
        started, self.state = self.state == SUSPENDED, RUNNING
        self.advances += 1
        # the exceptions its suspended except clauses handle are current only while it runs (CPython keeps them
        # with the generator): not its caller's, for a bare raise or a new exception's __context__
        handled = self.frame.handled_exceptions()
        depth = len(handled)
        handled.extend(self.exc_state)
        try:
            yielded, value = self.frame.resume_generator(started, sent, thrown)
        except ObservedException as e:
            self.state = DONE
            if isinstance(e.exc, StopIteration):  # PEP 479
                error = RuntimeError("generator raised StopIteration")
                error.__cause__ = e.exc
                raise_observed(error)
            raise
        except BaseException:
            self.state = DONE  # (a break: the trace stops; what it made of the generator is not used)
            raise
        finally:
            self.exc_state = handled[depth:]
            del handled[depth:]
        if yielded:
            self.state = SUSPENDED
            return value
        self.state, self.returned = DONE, value
        return None

    def next(self) -> Variable | None:
        return self.resume(None, None, None)

    def unpack(self, tx: Tracer | None) -> list[Variable]:
        if self.rest is not None:
            return list(self.rest)
        out = []
        while (item := self.resume(tx, None, None)) is not None:
            out.append(item)
        return out

    def each_item(self, tx: Tracer) -> Iterator[Variable]:
        while (item := self.resume(tx, None, None)) is not None:
            yield item

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name in ("__next__", "send", "throw", "close", "__iter__"):
            return BoundMethod(self, name)
        if name == "__name__":
            return ConstantVariable(self.name)
        return super().var_getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs:
            unsupported(f"generator.{name} with keyword arguments", BreakCode.GENERATOR)
        if name == "__iter__" and not args:
            return self
        if name in ("__next__", "send"):
            sent = args[0] if name == "send" and len(args) == 1 else None
            if name == "send" and len(args) != 1 or name == "__next__" and args:
                unsupported(f"generator.{name} with {len(args)} arguments", BreakCode.GENERATOR)
            if self.state == CREATED and sent is not None and not _is_none(sent):
                raise_observed(TypeError("can't send non-None value to a just-started generator"))
            item = self.resume(tx, sent, None)
            return item if item is not None else self._stop()
        if name == "throw" and 1 <= len(args) <= 3:
            item = self.throw(tx, _exception_of(args))
            return item if item is not None else self._stop()
        if name == "close" and not args:
            return self._close(tx)
        unsupported(f"generator.{name}", BreakCode.GENERATOR)

    def _stop(self) -> Variable:
        raise_observed(self.stop_iteration(), BreakCode.ITER)

    def stop_iteration(self) -> StopIteration:
        """It returned: StopIteration carrying the return value, as Python raises it."""
        returned = self.returned
        if returned is not None and not returned.is_python_constant():
            unsupported(f"generator {self.name} returned {returned} (StopIteration's value)", BreakCode.GENERATOR)
        return StopIteration(returned.as_python_constant()) if returned is not None else StopIteration()

    def throw(self, tx: Tracer | None, exc: BaseException) -> Variable | None:
        """`exc` raised at the suspended yield: the next item, or None when it returned. Suspended in `yield from`,
        the delegate gets it first, as CPython's throw() does: GeneratorExit closes the delegate (an error its
        close raises is raised here instead); another exception is thrown into a delegate generator, whose next
        item is ours; when the delegate returns, its value is the value of the `yield from`; when it raises, that
        is raised here. An iterator with no throw() (a list's) has it raised here."""
        if self.state != SUSPENDED or not self.frame.in_yield_from():
            return self.resume(tx, None, exc)
        delegate = self.frame.yield_from_delegate()
        if isinstance(exc, GeneratorExit):
            return self.resume(tx, None, self._close_delegate(tx, delegate) or exc)
        if not isinstance(delegate, GeneratorVariable):
            return self.resume(tx, None, exc)
        self.state = RUNNING  # (the delegate's code advancing this generator is Python's ValueError)
        try:
            item = delegate.throw(tx, exc)
        except ObservedException as e:
            self.state = SUSPENDED
            self.frame.leave_yield_from()
            return self.resume(tx, None, e.exc)
        except BaseException:
            self.state = DONE
            raise
        self.state = SUSPENDED
        if item is not None:
            return item
        self.frame.leave_yield_from()
        return self.resume(tx, delegate.returned or ConstantVariable(None), None)

    def _close_delegate(self, tx: Tracer | None, delegate: Variable) -> BaseException | None:
        """close() of the delegate of a `yield from` (a list's iterator has none): what it raised, or None."""
        if not isinstance(delegate, GeneratorVariable):
            return None
        self.state = RUNNING
        try:
            delegate.close(tx)
        except ObservedException as e:
            return e.exc
        except BaseException:
            self.state = DONE
            raise
        finally:
            if self.state == RUNNING:
                self.state = SUSPENDED
        return None

    def close(self, tx: Tracer | None) -> None:
        """GeneratorExit at the suspended yield: a handler that yields again is Python's RuntimeError."""
        self._close(tx)

    def _close(self, tx: Tracer | None) -> Variable:
        if self.state != SUSPENDED:
            self.state = DONE
            return ConstantVariable(None)
        try:
            item = self.throw(tx, GeneratorExit())
        except ObservedException as e:
            if isinstance(e.exc, (GeneratorExit, StopIteration)):
                return ConstantVariable(None)
            raise
        if item is not None:
            raise_observed(RuntimeError("generator ignored GeneratorExit"))
        return ConstantVariable(None)

    # -- after the graph ----------------------------------------------------------------------
    def settle(self) -> list[Variable]:
        """The items it has left, taken now so that it can be made again as a real generator over them."""
        if self.rest is not None:
            return self.rest
        if self.state != DONE and self.has_handlers:
            unsupported(_handlers_reason(self.name), BreakCode.GENERATOR)
        self.started = self.state != CREATED
        effects = self.frame.output.side_effects
        checkpoint = effects.checkpoint()
        effects.settling = True
        try:
            rest = self.unpack(None)
        except ObservedException as e:
            raise Unsupported(
                f"generator {self.name} outlives the trace and raises {type(e.exc).__name__} when advanced",
                code=BreakCode.GENERATOR,
            ) from None
        finally:
            effects.settling = False
        if effects.wrote_older_state(checkpoint):
            unsupported(
                f"generator {self.name} with side effects outlives the trace (Python would run them lazily, as it "
                "is advanced)",
                BreakCode.GENERATOR,
            )
        self.rest = rest
        return rest

    def _refuse_settling(self, sends_none: bool) -> None:
        """Taking its items at the end of the trace (each resume sends None) is not what Python does later: a
        handler would run when Python throws into it or closes it, and a yield whose value it uses would get what
        Python's send() gives."""
        if self.has_handlers:
            unsupported(_handlers_reason(self.name), BreakCode.GENERATOR)
        if sends_none and self.state == SUSPENDED and self.frame.sent_value_used():
            unsupported(
                f"generator {self.name} outlives the trace suspended at a yield whose value it uses (what Python "
                "sends it later is not known to the trace)",
                BreakCode.GENERATOR,
            )

    def children(self) -> list[Variable]:
        return [*self.settle(), *([self.returned] if self.returned is not None else [])]

    def rebuild(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(_generator_over)
        for item in self.settle():
            cg.load(item)
        cg.emit("BUILD_TUPLE", len(self.settle()))
        if self.returned is not None:
            cg.load(self.returned)
        else:
            cg.emit_const(None)
        cg.emit_const(self.started)
        cg.call(3)


def refuse_outside_generator(value: Variable, what: str) -> None:
    """A generator the frame did not make (an argument, a continuation's rebuilt one) is advanced as Python runs
    it: its suspended frame is not traced."""
    if not isinstance(value, GeneratorVariable) and isinstance(value, Variable):
        try:
            kind = value.python_type()
        except NotImplementedError:
            return
        if kind is GENERATOR_TYPE:
            unsupported(
                f"{what} a generator made outside the compiled frame (its suspended frame runs as Python)",
                BreakCode.GENERATOR,
            )


def _generator_over(items: tuple, returned: Any, started: bool) -> Any:
    """A real generator giving `items`, then returning `returned`; `started`: already advanced to a yield that
    ignores what is sent to it, as the one it stands for was (send(v) past its end is StopIteration, not
    TypeError)."""
    generator = _yield_each(items, returned, started)
    if started:
        next(generator)
    return generator


def _yield_each(items: tuple, returned: Any, started: bool) -> Any:
    if started:
        yield  # (where _generator_over leaves it)
    for item in items:  # (not `yield from`: a tuple iterator has no send())
        yield item
    return returned


def _is_none(value: Variable) -> bool:
    return value.is_python_constant() and value.as_python_constant() is None


def _exception_of(args: Sequence[Variable]) -> BaseException:
    """What `gen.throw(typ[, val[, tb]])` raises: an exception class is instantiated (with `val` its argument)."""
    values = []
    for arg in args[:2]:
        value = getattr(arg, "value", None) if not arg.is_python_constant() else arg.as_python_constant()
        if value is None and not _is_none(arg):
            unsupported(f"generator.throw of {arg}, not an exception known at trace time", BreakCode.GENERATOR)
        values.append(value)
    exc = values[0]
    if isinstance(exc, type) and issubclass(exc, BaseException):
        if len(values) > 1 and isinstance(values[1], BaseException):
            return values[1]
        return exc() if len(values) == 1 or values[1] is None else exc(values[1])
    if isinstance(exc, BaseException) and (len(values) == 1 or values[1] is None):
        return exc
    unsupported(f"generator.throw of {args[0]}, not an exception", BreakCode.GENERATOR)


def _handlers_reason(name: str) -> str:
    return (
        f"generator {name} has a try or with block and outlives the trace suspended: made again after the graph, "
        "its handlers would not run when it is thrown into, closed or collected"
    )


def dropped_while_handling(generators: list[GeneratorVariable], reached: set[int]) -> None:
    """A generator the frame drops while it is suspended inside a try or with block: Python closes it when it is
    collected, running its handlers. They are run now (close()); that is right only if they write nothing that
    existed before and raise nothing (a cleanup that restores the exception being handled, a `finally` on new
    values); otherwise the trace stops."""
    for gen in generators:
        if id(gen) in reached or not gen.suspended_in_handler or gen.rest is not None:
            continue
        effects = gen.frame.output.side_effects
        checkpoint = effects.checkpoint()
        why = f"generator {gen.name} is dropped suspended inside a try or with block, and its handlers "
        try:
            if gen.throw(None, GeneratorExit()) is not None:
                unsupported(why + "yield again when Python closes it", BreakCode.GENERATOR)
        except ObservedException as e:
            if not isinstance(e.exc, (GeneratorExit, StopIteration)):
                unsupported(why + f"raise {type(e.exc).__name__} when Python closes it", BreakCode.GENERATOR)
        except Unsupported as e:
            unsupported(why + f"cannot be traced ({e.msg})", BreakCode.GENERATOR)
        if effects.wrote_older_state(checkpoint):
            unsupported(why + "write state when Python closes it", BreakCode.GENERATOR)
