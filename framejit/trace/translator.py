"""The symbolic interpreter: runs a frame's bytecode on Variables, one handler per opcode."""

from __future__ import annotations

import inspect
import sys
import traceback
import types
from typing import Any

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from framejit import capture_policy
from framejit.codeobj import Inst, arg_slot_names, original_code, own_cells, passed_cells, read_instructions
from framejit.contracts import GuardKind, TraceOutput
from framejit.codeobj import exception_table
from framejit.codeobj.reading import exception_entry_at
from framejit.exc import BreakCode, BreakPoint, ObservedException, Unsupported, raise_observed, unsupported
from framejit.sources import (
    AttrSource,
    ClosureSource,
    GlobalsDictSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ModuleGlobalsSource,
    Source,
)
from framejit.trace.cells import EMPTY, Cell, outside_cell
from framejit.trace.opcode_table import build_table
from framejit.trace.ops_basic import BasicOps
from framejit.trace.ops_class import ClassOps
from framejit.trace.ops_call import CallOps, ReturnValue, Yielded
from framejit.trace.ops_data import DataOps
from framejit.trace.ops_except import ExceptOps
from framejit.trace.ops_flow import FlowOps
from framejit.variables.autograd_ctx import AutogradCtxVariable
from framejit.variables.base import LazyArg, UnreadableArg, Variable
from framejit.variables.builder import wrap_constant_result, wrap_value
from framejit.variables.callables import NestedFunctionVariable, SuperVariable
from framejit.variables.constant import ConstantVariable, ObjectVariable
from framejit.variables.generators import GeneratorVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import python_class_method
from framejit.weak_identity import WeakIdentityKeyDict

_INSTRUCTIONS: "WeakIdentityKeyDict[types.CodeType, list[Inst]]" = WeakIdentityKeyDict()


def instructions_of(code: types.CodeType) -> list[Inst]:
    insts = _INSTRUCTIONS.get(code)
    if insts is None:
        insts = _INSTRUCTIONS[code] = read_instructions(code)
    return insts


class Translator(BasicOps, DataOps, CallOps, FlowOps, ExceptOps, ClassOps):
    def __init__(
        self,
        output: TraceOutput,
        code: types.CodeType,
        f_globals: dict[str, Any],
        symbolic_locals: dict[str, Variable],
        cells: dict[str, Cell],
        *,
        parent: "Translator | None" = None,
        globals_source: Source | None = None,
        break_point: BreakPoint | None = None,
    ) -> None:
        self.output = output
        self.code = code
        self.f_globals = f_globals
        builtins = f_globals.get("__builtins__", __builtins__)
        self.f_builtins: dict[str, Any] = builtins if isinstance(builtins, dict) else vars(builtins)
        self.symbolic_locals = symbolic_locals
        self.cells = cells
        self.parent: Translator | None = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.globals_source = globals_source  # None: the captured frame's own globals (G[...])
        self.instructions = instructions_of(code)
        self.stack: list[Variable] = []
        self.ip = 0
        self.current: Inst | None = None
        self.kw_names: tuple[str, ...] = ()
        self.break_point = break_point  # root frame only: where to stop (a graph break)
        # root frame only: the raise whose exception a handler of this frame is handling (its instruction index);
        # a break while handling it is made at that raise instead (the handler then runs as Python)
        self.handling: int | None = None
        self.handled: list[Variable] = []
        self.handling_stack: list[traceback.FrameSummary] = []

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> Variable | None:
        """Trace to the return; returns its value, or None when stopped at the break point (root frame only)."""
        while True:
            try:
                return self._run_until_return()
            except ObservedException as e:
                self.chain_to_handled(e)
                if not self.route_exception(e):  # else: go on at the handler
                    raise self._at_the_handled_raise(e) if self._handling(e) else self._located(e)
            except Unsupported as e:
                raise self._at_the_handled_raise(e) if self._handling(e) else self._located(e)
            except GuardOnDataDependentSymNode as e:  # a branch or a number needs an unbacked size's value
                what = (
                    str(e).split("(unhinted")[0].removeprefix("Could not guard on data-dependent expression").rstrip()
                )
                msg = f"the code needs the value of{what}, which depends on an unbacked size (data-dependent)"
                raise self._located(Unsupported(msg, code=BreakCode.DATA_DEPENDENT)) from e
            except (AttributeError, KeyError, IndexError, TypeError, ValueError, NameError) as e:
                raise self._located(
                    Unsupported(f"{type(e).__name__} while tracing: {e}", code=BreakCode.PYTHON_ERROR)
                ) from e

    def _run_until_return(self) -> Variable | None:
        insts = self.instructions
        stop = self.break_point
        try:
            while True:
                inst = insts[self.ip]
                self.current = inst
                if (
                    stop is not None
                    and self.ip == stop.index
                    and (stop.budget is None or self.output.budget - 1 == stop.budget)
                ):
                    return None
                self.ip += 1
                self.output.budget -= 1
                if self.output.budget < 0:
                    unsupported(
                        f"trace longer than {self.output.options.instruction_budget} instructions "
                        "(a long Python loop?)",
                        BreakCode.BUDGET,
                    )
                fn = OPCODE_HANDLERS[inst.opcode]
                if fn is None:
                    unsupported(f"opcode {inst.opname} is not supported", BreakCode.OPCODE)
                fn(self, inst)
        except ReturnValue as ret:
            return ret.value

    def _handling(self, e: Unsupported) -> bool:
        return self.handling is not None and not e.frame_runs_as_python

    def _at_the_handled_raise(self, e: Unsupported) -> Unsupported:
        """A break met while the root frame handles an exception it raised and caught in the trace: made at that
        raise, so that Python raises it and runs the handler (a handler's code, in a continuation, could not
        re-raise it)."""
        assert self.handling is not None
        if isinstance(e, ObservedException) and not e.user_stack:  # one leaving the frame: where it was raised
            e.user_stack = self.handling_stack
        e.user_stack = e.user_stack or self.user_stack()
        e.break_index, e.break_budget = self.handling, None
        return e

    def _located(self, e: Unsupported) -> Unsupported:
        """`e` with the user's stack (of the innermost frame) and, in the captured frame, the failing instruction."""
        if not e.user_stack:
            e.user_stack = self.user_stack()
        if self.parent is not None:
            e.frame_runs_as_python = False  # met in an inlined frame: the caller breaks at the call
        elif self.parent is None and not e.frame_runs_as_python:
            e.break_index = self.ip - 1  # the root instruction during which it happened
            e.break_budget = self.output.budget  # ...and which time it ran (a loop runs it again)
        return e

    # -- where we are, for error messages and node stack traces ---------------------------
    def frame_summary(self) -> traceback.FrameSummary:
        lineno = self.current.lineno if self.current else self.code.co_firstlineno
        return traceback.FrameSummary(self.code.co_filename, lineno, original_code(self.code).co_name)

    def user_stack(self) -> list[traceback.FrameSummary]:
        stack: list[traceback.FrameSummary] = []
        tx: Translator | None = self
        while tx is not None:
            stack.append(tx.frame_summary())
            tx = tx.parent
        return stack[::-1]

    # -- what the value kinds use (contracts.Tracer) ------------------------------------------
    def wrap(self, value: Any, source: Source | None) -> Variable:
        return wrap_value(self, value, source)

    def wrap_constant(self, value: Any) -> Variable:
        return wrap_constant_result(value)

    def global_source(self, name: str) -> Source:
        if self.f_globals is self.output.f_globals:
            return GlobalSource(name)
        if self.globals_source is None:
            unsupported(f"global {name!r} of a function whose module cannot be named", BreakCode.GLOBAL)
        return ItemSource(self.globals_source, name)

    def globals_dict_source(self) -> Source | None:
        """A source for this frame's globals dict itself (None if it cannot be named)."""
        return GlobalsDictSource() if self.f_globals is self.output.f_globals else self.globals_source

    def inline_call(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        bound: dict[str, Variable],
        *,
        closure: Any,
        fn_source: Source | None,
        fn_name: str,
    ) -> Variable:
        """Trace a call to user code inside this frame and return its result Variable."""
        reason = capture_policy.inline_refusal(code)
        if reason:  # (torch.distributed's: no advice to allow it in the graph, which would not make it a collective)
            unsupported(
                f"call to {fn_name}: {reason}",
                BreakCode.DISTRIBUTED
                if code.co_filename.startswith(capture_policy.TORCH_DISTRIBUTED_DIR)
                else BreakCode.SKIPPED_FILE,
            )
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            unsupported(f"call to coroutine function {fn_name}", BreakCode.GENERATOR)
        if self.depth + 1 > self.output.options.inline_depth_limit:
            unsupported(
                f"inlining depth limit ({self.output.options.inline_depth_limit}) reached at {fn_name}",
                BreakCode.INLINE_DEPTH,
            )
        if f_globals is self.output.f_globals:
            globals_source = None
        elif f_globals is self.f_globals:
            globals_source = self.globals_source
        else:
            globals_source = _globals_source(f_globals, fn_source)
        cells = self._make_cells(code, bound, closure, fn_source)
        child = Translator(self.output, code, f_globals, bound, cells, parent=self, globals_source=globals_source)
        if code.co_flags & inspect.CO_GENERATOR:  # its frame runs when the generator is advanced
            return GeneratorVariable(child, fn_name)
        result = child.run()
        assert result is not None  # (only the captured frame stops at a break point)
        return result

    def run_class_body(self, body: NestedFunctionVariable) -> dict[str, Variable]:
        """A class statement's body, traced in a frame whose names (STORE_NAME) are the class namespace."""
        globals_source = self.globals_source if body.f_globals is self.f_globals else None
        cells = self._make_cells(body.code, {}, body.closure, None)
        child = Translator(
            self.output, body.code, body.f_globals, {}, cells, parent=self, globals_source=globals_source
        )
        child.run()
        return child.symbolic_locals

    # -- a generator's frame (variables/generators.py) ------------------------------------------
    def resume_generator(
        self, started: bool, sent: Variable | None, thrown: BaseException | None
    ) -> tuple[bool, Variable]:
        if thrown is not None:
            if not self.route_exception(ObservedException(f"{type(thrown).__name__}: {thrown}", thrown)):
                raise_observed(thrown)  # nothing in the generator catches it: it propagates to the caller
        elif started:
            self.push(sent if sent is not None else ConstantVariable(None))
        self.depth = self.parent.depth + 1 if self.parent is not None else 0
        try:
            result = self.run()
        except Yielded as y:
            return True, y.value
        assert result is not None
        return False, result

    def sent_value_used(self) -> bool:
        if self.in_yield_from():  # the value goes to the delegate, whose own yield decides
            return False
        after = (i.opname for i in self.instructions[self.ip :] if i.opname not in ("RESUME", "NOP", "CACHE"))
        return next(after, "POP_TOP") != "POP_TOP"

    def in_yield_from(self) -> bool:
        return self.ip >= 2 and self.instructions[self.ip - 2].opname == "SEND"

    def yield_from_delegate(self) -> Variable:
        return self.stack[-1]  # (SEND left the iterator below the value it yielded)

    def leave_yield_from(self) -> None:
        """The delegate of the `yield from` it is suspended in is done: dropped, and the frame goes on after the
        SEND loop (where CPython's throw() moves it before resuming it with the value or exception)."""
        self.pop()
        self.jump(self.instructions[self.ip - 2])

    def suspended_in_try(self) -> bool:
        assert self.current is not None
        return exception_entry_at(exception_table(self.code), self.current.offset) is not None

    def _make_cells(
        self, code: types.CodeType, bound: dict[str, Variable], closure: Any, fn_source: Source | None
    ) -> dict[str, Cell]:
        cells = {name: Cell(bound.pop(name, None)) for name in code.co_cellvars}
        if not code.co_freevars:
            return cells
        if isinstance(closure, list):  # a function made during the trace: shares our Cells
            cells.update(zip(code.co_freevars, closure))
            return cells
        for i, (name, real) in enumerate(zip(code.co_freevars, closure or ())):
            if id(real) in self.output.real_cells:  # the captured frame's own cell: one Cell, so writes are seen
                cells[name] = self.output.real_cells[id(real)]
                continue
            cell_source = ItemSource(AttrSource(fn_source, "__closure__"), i) if fn_source is not None else None
            try:
                contents = real.cell_contents
            except ValueError:
                contents = EMPTY
            source = AttrSource(cell_source, "cell_contents") if cell_source is not None else None
            # one Cell per real cell: two functions closing over it (or two calls of one) see each other's writes
            cells[name] = self.output.real_cells[id(real)] = outside_cell(self, contents, source, None, cell_source)
        return cells

    def speculate_getattr(self, obj: Variable, name: str) -> Variable:
        """getattr that reports a missing attribute as AttributeError (for hasattr / getattr default)."""
        try:
            return obj.var_getattr(self, name)
        except (AttributeError, Unsupported) as e:
            if isinstance(e, Unsupported) and e.code != BreakCode.MISSING_ATTR:
                raise
            obj.guard_missing_attr(self, name)
            raise AttributeError(name) from e

    def store_attr(self, obj: Variable, name: str, value: Variable, generic: bool = False) -> None:
        """obj.name = value: a __setattr__ the class defines in Python is traced (it ends in a generic store)."""
        if isinstance(obj, TensorVariable) and name == "requires_grad":
            obj.set_requires_grad(self, value)
            return
        if isinstance(obj, (NestedFunctionVariable, AutogradCtxVariable)):  # made in the trace: its own attributes
            obj.set_attr(name, value)
            return
        if _keeps_no_traceback(obj, name, value):
            return
        if not generic:
            custom = python_class_method(self, obj, "__setattr__")
            if custom is not None:
                custom.call(self, [ConstantVariable(name), value], {})
                return
        if self.output.side_effects.rewrites_held_value(obj, name, value):
            assert obj.source is not None  # (it says True only of an object with a source)
            self.output.guards.add(AttrSource(obj.source, name), GuardKind.EQUALS, value.as_python_constant())
            return
        self.output.side_effects.store_attr(obj, name, value, generic)

    def frame_locals(self) -> dict[str, Variable]:
        """What `locals()` gives in this frame: its bound variables in the function's own order (a continuation's
        stack parameters are not among them), with the contents of its cells and free variables."""
        code = original_code(self.code)
        out: dict[str, Variable] = {}
        for name in dict.fromkeys((*code.co_varnames, *code.co_cellvars, *code.co_freevars)):
            cell = self.cells.get(name)
            if cell is not None:
                if cell.value is not None or cell.load is not None:
                    out[name] = cell.get()
            elif name in self.symbolic_locals:
                value = self.symbolic_locals[name]
                if isinstance(value, LazyArg):
                    value = self.symbolic_locals[name] = value.realize(self)
                out[name] = value
        return out

    def zero_arg_super(self) -> Variable:
        if "__class__" not in self.cells or not self.code.co_argcount:
            unsupported("super() without a __class__ cell", BreakCode.SUPER)
        first = self.code.co_varnames[0]
        obj = self.cells[first].get() if first in self.cells else self.symbolic_locals[first]
        if isinstance(obj, LazyArg):
            obj = obj.realize(self)
        return SuperVariable(self.cells["__class__"].get().as_python_constant(), obj)


OPCODE_HANDLERS = build_table(Translator.__mro__)


def _keeps_no_traceback(obj: Variable, name: str, value: Variable) -> bool:
    """`exc.__traceback__ = None` (contextlib's __exit__ puts back the traceback it was given) on an exception
    that has none: the trace gives its exceptions no traceback (WITH_EXCEPT_START passes None), so this changes
    nothing."""
    return (
        name == "__traceback__"
        and isinstance(obj, ObjectVariable)
        and isinstance(obj.value, BaseException)
        and obj.value.__traceback__ is None
        and value.is_python_constant()
        and value.as_python_constant() is None
    )


def _globals_source(f_globals: dict[str, Any], fn_source: Source | None) -> Source | None:
    module = sys.modules.get(f_globals.get("__name__", ""))
    if module is not None and vars(module) is f_globals:
        return ModuleGlobalsSource(module.__name__)
    return AttrSource(fn_source, "__globals__") if fn_source is not None else None


def root_translator(
    output: TraceOutput,
    fn: types.FunctionType,
    args: tuple,
    break_point: BreakPoint | None = None,
    unreadable: dict[str, Unsupported] | None = None,
) -> Translator:
    """The Translator for the captured frame: arguments become Variables with LocalSources; with `break_point`,
    it stops there (a graph break). The `unreadable` arguments (a trace before failed to read them, for that
    reason) are not read: any use of them breaks."""
    code = fn.__code__
    tx = Translator(output, code, fn.__globals__, {}, {}, break_point=break_point)
    names = arg_slot_names(code)
    values = dict(zip(names, args))
    # arguments are wrapped (and guarded) when first read: an unused argument adds no guard
    tx.symbolic_locals = {name: LazyArg(value, LocalSource(name)) for name, value in values.items()}
    for name, reason in (unreadable or {}).items():
        tx.symbolic_locals[name] = UnreadableArg(LocalSource(name), reason.msg, reason.code)
    if passed_cells(code):  # start at RESUME: the Cells below stand for what the prologue does with them
        tx.ip = next(k for k, inst in enumerate(tx.instructions) if inst.opname == "RESUME")
    for name in own_cells(code):
        tx.cells[name] = Cell(tx.symbolic_locals.pop(name, None))
    # cells made before this frame: its closure's, and a continuation's cell parameters (its caller's cells)
    outside = [(name, values[name]) for name in passed_cells(code)] + list(zip(code.co_freevars, fn.__closure__ or ()))
    for name, real in outside:
        tx.symbolic_locals.pop(name, None)
        try:
            contents = real.cell_contents
        except ValueError:

            def store(value: Variable, name: str = name) -> None:
                output.side_effects.store_cell(name, value)

            tx.cells[name] = Cell(on_store=store)
            output.real_cells[id(real)] = tx.cells[name]
            continue
        tx.cells[name] = outside_cell(tx, contents, ClosureSource(name), name)
        output.real_cells[id(real)] = tx.cells[name]
    return tx
