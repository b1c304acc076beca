"""Graph breaks: run the graph traced so far, the unsupported instruction as Python, then a continuation."""

from __future__ import annotations

import dis
import types

import torch
from bytecode import Instr, Label, TryBegin, TryEnd

from framejit._C import _hook
from framejit.codegen import PyCodegen
from framejit.codeobj import (
    GRAPH_OUT,
    Inst,
    build_resume_code,
    exception_table,
    leaves_null_below,
    live_locals_table,
    original_location,
    own_cells,
    reemit,
    resume_fn_name,
    resume_parameters,
    stack_inputs,
)
from framejit.codeobj.reading import exception_entry_at
from framejit.exc import BreakCode, unsupported
from framejit.output_graph import CompileGraph, FinishedTrace, OutputGraph, reachable as _reachable
from framejit.trace.translator import Translator
from framejit.variables.base import NULL, ExcInfoVariable, Variable
from framejit.variables.builtins import BuiltinVariable
from framejit.variables.containers import BoundMethod
from framejit.variables.tensor import TensorVariable
from framejit.variables.torch_special import GradModeVariable, WithExitVariable
from framejit.weak_identity import WeakIdentityKeyDict

_LIVENESS: "WeakIdentityKeyDict[types.CodeType, dict[int, frozenset[str]]]" = WeakIdentityKeyDict()
# original code -> {(offset, stack NULL layout, live locals): continuation code}
_RESUME_CODES: "WeakIdentityKeyDict[types.CodeType, dict[tuple, types.CodeType]]" = WeakIdentityKeyDict()


def resume_code_for(
    code: types.CodeType, offset: int, nulls: tuple[bool, ...], local_names: tuple[str, ...]
) -> types.CodeType:
    """The continuation of `code` at `offset` for this stack layout; one per key, reused."""
    per_code = _RESUME_CODES.setdefault(code, {})
    key = (offset, nulls, local_names)
    if key not in per_code:
        per_code[key] = build_resume_code(code, offset, nulls, local_names, resume_fn_name(offset))
    return per_code[key]


def clear_resume_codes() -> None:
    _RESUME_CODES.clear()
    _LIVENESS.clear()


class _Successor:
    """Where control goes after K: an original offset, with `n_out` of K's results on the stack."""

    def __init__(self, offset: int, n_out: int, label: Label | None = None) -> None:
        self.offset = offset
        self.n_out = n_out
        self.label = label


# (not numpy(): it refuses a tensor that requires grad)
_DATA_READS = frozenset({int, bool, float, complex})
_DATA_READ_METHODS = frozenset({"item", "tolist", "__bool__", "__int__", "__index__", "__float__"})


def _data_read_only(inst: Inst, inputs: list[Variable], kept: list[Variable]) -> frozenset[int]:
    """The tensors (by `id` of their fake) that the break's instruction only reads the data of (`t.item()`,
    `int(t)`, `if t:`) and that nothing else the frame keeps holds: the graph returns them detached. Eager
    never differentiates them; returned as they are, the graph's autograd node gets a zero gradient for each,
    and 0 x inf is NaN in an input's gradient where eager's op never ran backward (fuzz 7343 of seed 2200000,
    which reads it with `float()`)."""
    read = []
    if inst.opname.startswith("POP_JUMP") and "NONE" not in inst.opname:
        read = inputs[-1:]
    elif inst.opname in ("CALL", "PRECALL"):
        for value in inputs:
            if isinstance(value, BoundMethod) and value.name in _DATA_READ_METHODS:
                read.append(value.obj)
        callables = [v for v in inputs if isinstance(v, BuiltinVariable)]
        if callables and callables[0].fn in _DATA_READS:
            read.extend(v for v in inputs if isinstance(v, TensorVariable))
    read = [v for v in read if isinstance(v, TensorVariable) and v.example.requires_grad]
    if not read:
        return frozenset()
    held = {
        id(v.example)
        for v in _reachable([*kept, *(v for v in inputs if not isinstance(v, (TensorVariable, BoundMethod)))])
        if isinstance(v, TensorVariable)
    }
    return frozenset(id(v.example) for v in read) - held


def finish_at_break(
    output: OutputGraph,
    tx: Translator,
    inst: Inst,
    compile_graph: CompileGraph,
    raise_instead: BaseException | None = None,
) -> FinishedTrace:
    """Replacement code for a frame whose trace stops before instruction `inst` (see module docstring); with
    `raise_instead`, what eager raises at `inst`, the code raises that (a new one of its type and message) in
    `inst`'s place."""
    n_in = stack_inputs(inst)
    if n_in is None or n_in > len(tx.stack):
        unsupported(f"cannot resume a function after a graph break at {inst.opname}", BreakCode.BREAK_UNSUPPORTED)
    orig_code, orig_offset = original_location(tx.code, inst.offset)
    successors = _successors(tx, inst, n_in) if raise_instead is None else []
    deep, inputs = tx.stack[: len(tx.stack) - n_in], tx.stack[len(tx.stack) - n_in :]
    live = {s.offset: _live_locals(tx, orig_code, s.offset) for s in successors}
    entry = exception_entry_at(exception_table(orig_code), orig_offset)
    except_target = _Successor(entry.target, 0) if entry is not None else None
    if except_target is not None:
        if entry.depth > len(deep):
            unsupported(
                "a graph break inside a try block opened in the middle of an expression", BreakCode.BREAK_UNSUPPORTED
            )
        live[except_target.offset] = _live_locals(tx, orig_code, except_target.offset)
    local_values = {name: tx.symbolic_locals[name] for names in live.values() for name in names}
    cell_values = {name: tx.cells[name].value for name in own_cells(tx.code) if tx.cells[name].value is not None}
    for value in reversed(deep):  # autocast blocks end with the graph; the code after it enters them again
        if isinstance(value, WithExitVariable):
            value.ctx.exit_before_break(tx)
    output.side_effects.drop_unreachable_objects([*local_values.values(), *deep, *cell_values.values(), *inputs])
    kept = [*local_values.values(), *deep, *cell_values.values(), *output.side_effects.values()]
    roots = [*kept, *inputs]
    cg = output.emit_graph_call(tx, roots, compile_graph, read_only=_data_read_only(inst, inputs, kept))
    deep_temps = _store_deep_stack(cg, deep)
    local_temps = {name: cg.store_temp(lambda v=value: cg.load(v)) for name, value in local_values.items()}
    # K's inputs too are read before the writes are replayed: one may be loaded from where a replayed write
    # changes what is found (`u = xs.pop(); f(u)`, u read as `xs[-1]`)
    input_temps = [None if value is NULL else cg.store_temp(lambda v=value: cg.load(v)) for value in inputs]
    # the frame's cells are written after the replay, which may read what a cell held at the frame's start
    # (`log.append(z)` before `z = ...`, z a cell: the append's value is loaded from z)
    cell_temps = {name: cg.store_temp(lambda v=value: cg.load(v)) for name, value in cell_values.items()}
    output.side_effects.codegen(cg)
    for name, temp in cell_temps.items():
        cg.emit("LOAD_FAST", temp)
        cg.emit("STORE_DEREF", name)
    for temp in input_temps:
        if temp is None:
            cg.emit("PUSH_NULL")
        else:
            cg.emit("LOAD_FAST", temp)
    # K keeps the original's except/finally block: an exception it raises continues in the original except/finally
    try_start = TryBegin(Label(), push_lasti=entry.lasti, stack_depth=0) if entry is not None else None
    if try_start is not None:
        cg.instructions.append(try_start)
    if raise_instead is None:
        cg.instructions.extend(reemit(inst, tx.kw_names, successors[1].label if len(successors) > 1 else None))
    else:  # K's inputs stay on the stack: raising clears it, down to the handler's depth
        cg.emit("PUSH_NULL")
        cg.emit_const(type(raise_instead))
        cg.emit_const(str(raise_instead))
        cg.call(1)
        cg.instructions.append(Instr("RAISE_VARARGS", 1, lineno=inst.lineno))
    if try_start is not None:
        cg.instructions.append(TryEnd(try_start))
    for succ in successors:
        if succ.label is not None:
            cg.instructions.append(succ.label)
        _call_continuation(
            cg,
            orig_code,
            succ,
            deep_temps,
            live[succ.offset],
            local_temps,
            _store_outputs(cg, succ.n_out, leaves_null_below(inst)),
        )
    if except_target is not None:
        cg.instructions.append(try_start.target)
        # the exception (and lasti) are on the stack: the original except/finally block runs in a continuation
        outs = _store_outputs(cg, 1 + int(entry.lasti), False)
        _call_continuation(
            cg, orig_code, except_target, deep_temps[: entry.depth], live[except_target.offset], local_temps, outs
        )
    return FinishedTrace(instructions=cg.instructions, temps=(GRAPH_OUT, *cg.temps))


def _successors(tx: Translator, inst: Inst, n_in: int) -> list[_Successor]:
    next_offset = (
        original_location(tx.code, tx.instructions[tx.ip + 1].offset)[1] if tx.ip + 1 < len(tx.instructions) else None
    )
    op = inst.opname
    if op == "RAISE_VARARGS":
        return []
    if op.startswith("POP_JUMP") or op.startswith("JUMP_IF"):
        target = original_location(tx.code, tx.instructions[inst.target_index].offset)[1]
        kept = 1 if op.startswith("JUMP_IF") else 0
        return [_Successor(next_offset, 0), _Successor(target, kept, Label())]
    # dis counts 3.11's PRECALL and CALL separately; together they leave one result
    n_out = 1 if op == "CALL" else n_in + dis.stack_effect(inst.opcode, inst.arg, jump=False)
    return [_Successor(next_offset, n_out)]


# names of calls that read a frame's variables, dead ones too (`locals()`, `inspect.currentframe().f_locals`): a
# function naming one passes every bound variable to its continuations
_NAMESPACE_READERS = frozenset({"locals", "vars", "dir", "currentframe", "_getframe"})


def _live_locals(tx: Translator, orig_code: types.CodeType, offset: int) -> tuple[str, ...]:
    """Live locals at `offset` that the trace has a value for (unbound ones stay unbound)."""
    table = _LIVENESS.get(orig_code)
    if table is None:
        table = _LIVENESS[orig_code] = live_locals_table(orig_code)
    reads_namespace = not _NAMESPACE_READERS.isdisjoint(orig_code.co_names)
    names = set(orig_code.co_varnames if reads_namespace else table[offset])
    if "__class__" in orig_code.co_freevars and orig_code.co_argcount:
        names.add(orig_code.co_varnames[0])  # zero-argument super() reads the first local
    return tuple(n for n in orig_code.co_varnames if n in names and n in tx.symbolic_locals)


def _store_deep_stack(cg: PyCodegen, deep: list[Variable]) -> list[str | None]:
    """Temporaries for the stack below K's inputs (None for NULLs); with-blocks are re-entered for real."""
    temps: list[str | None] = []
    grad_blocks = [v for v in deep if isinstance(v, WithExitVariable) and isinstance(v.ctx, GradModeVariable)]
    if grad_blocks:  # the graph left grad mode as inside the blocks: step out, then re-enter them
        cg.emit("PUSH_NULL")
        cg.emit_const(torch._C._set_grad_enabled)
        cg.emit_const(grad_blocks[0].ctx.previous)
        cg.call(1)
        cg.emit("POP_TOP")
    for value in deep:
        if value is NULL:
            temps.append(None)
        elif isinstance(value, ExcInfoVariable):  # inside an except clause: handle the exception for real
            cg.load(value.exc)
            cg.emit("PUSH_EXC_INFO")  # -> [the exception handled before, exc]; exc is current
            cg.emit("POP_TOP")
            temps.append(cg.store_temp(lambda: None))
        elif isinstance(value, WithExitVariable):
            temps.append(cg.store_temp(lambda v=value: v.ctx.reconstruct_entered(cg)))
        else:
            temps.append(cg.store_temp(lambda v=value: cg.load(v)))
    return temps


def _store_outputs(cg: PyCodegen, n_out: int, null_at_bottom: bool) -> list[str | None]:
    """Pop K's results into temporaries (bottom first); a NULL result stays, as the continuation call's NULL."""
    null_at_bottom = null_at_bottom and n_out > 0
    temps: list[str | None] = []
    for _ in range(n_out - int(null_at_bottom)):
        temps.insert(0, cg.new_temp())
        cg.emit("STORE_FAST", temps[0])
    return [None, *temps] if null_at_bottom else temps


def _call_continuation(
    cg: PyCodegen,
    orig_code: types.CodeType,
    succ: _Successor,
    deep_temps: list[str | None],
    local_names: tuple[str, ...],
    local_temps: dict[str, str],
    out_temps: list[str | None],
) -> None:
    slots = [*deep_temps, *out_temps]
    nulls = tuple(t is None for t in slots)
    code = resume_code_for(orig_code, succ.offset, nulls, local_names)
    if not (out_temps and out_temps[0] is None):
        cg.emit("PUSH_NULL")  # else K's own NULL result is still on the stack, in the callable's place
    cg.emit_const(_hook.tail_call)  # the hook calls the continuation once this frame is gone
    for name in orig_code.co_freevars:
        cg.emit("LOAD_CLOSURE", name)
    if orig_code.co_freevars:
        cg.emit("BUILD_TUPLE", len(orig_code.co_freevars))
    cg.emit_const(code)
    cg.emit("MAKE_FUNCTION", 8 if orig_code.co_freevars else 0)
    params = resume_parameters(orig_code, local_names)
    for name in params:
        if name in orig_code.co_cellvars:
            cg.emit("LOAD_CLOSURE", name)  # the cell itself, which the continuation shares
        else:
            cg.emit("LOAD_FAST", local_temps[name])
    for temp in slots:
        if temp is not None:
            cg.emit("LOAD_FAST", temp)
    cg.call(1 + len(params) + sum(t is not None for t in slots))
    cg.emit("RETURN_VALUE")
