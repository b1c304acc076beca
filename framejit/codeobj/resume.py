"""Continuation functions: `__resume_at_<offset>_<n>` runs the rest of a function from an offset."""

from __future__ import annotations

import dis
import inspect
import types
import weakref

from bytecode import Bytecode, CompilerFlags, Instr, Label

from framejit.codeobj.assemble import _assemble, cell_prologue
from framejit.codeobj.names import stack_arg_name
from framejit.weak_identity import WeakIdentityKeyDict

_PROLOGUE_OPS = frozenset({"MAKE_CELL", "COPY_FREE_VARS"})
_DROPPED_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


# resume code -> (the code it continues, {offset in the resume code: offset in that code}, label). The code it
# continues is held weakly: it holds its continuations (break_resume._RESUME_CODES), and a strong reference back
# would keep both alive for good, whatever dies.
_ORIGINS: "WeakIdentityKeyDict[types.CodeType, tuple[weakref.ref, dict[int, int], str]]" = WeakIdentityKeyDict()


def original_location(code: types.CodeType, offset: int) -> tuple[types.CodeType, int]:
    """Where an instruction of a continuation came from: (original code, original offset).

    A continuation of a continuation is built from the original code, so breaks in a
    loop keep reusing one continuation instead of nesting new code objects forever.
    An EXTENDED_ARG stands for the instruction it prefixes (a jump to it lands there too):
    the prefixes are re-encoded in every code object, only instructions are mapped.
    """
    while code.co_code[offset] == _EXTENDED_ARG:
        offset += 2
    origin = _ORIGINS.get(code)
    original = origin[0]() if origin is not None else None
    if original is None:
        return code, offset
    return original, origin[1][offset]


def is_continuation(code: types.CodeType) -> bool:
    return code in _ORIGINS


def code_label(code: types.CodeType) -> str:
    """The name the debug view and logs give `code`: `__resume_at_<offset>_<n>` for a continuation
    (whose co_name is the user's function's, for tracebacks and `inspect`)."""
    origin = _ORIGINS.get(code)
    return code.co_name if origin is None else origin[2]


def original_code(code: types.CodeType) -> types.CodeType:
    """The function a continuation continues (the code itself for an ordinary function)."""
    origin = _ORIGINS.get(code)
    original = origin[0]() if origin is not None else None
    return code if original is None else original


def passed_cells(code: types.CodeType) -> tuple[str, ...]:
    """The parameters of `code` that arrive holding a cell: a continuation's cell variables."""
    return code.co_cellvars if code in _ORIGINS else ()


def own_cells(code: types.CodeType) -> tuple[str, ...]:
    """The cell variables a frame of `code` makes itself (not a continuation's, which its caller made)."""
    return () if code in _ORIGINS else code.co_cellvars


def resume_parameters(code: types.CodeType, local_names: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters of a continuation of `code` before its stack values: the live locals
    `local_names` and the cells, in `code`'s local order (a method's `self` first, cell or
    not), then cells that are no argument of `code`."""
    names = set(local_names) | set(code.co_cellvars)
    ordered = [n for n in code.co_varnames if n in names]
    return (*ordered, *(n for n in code.co_cellvars if n not in ordered))


def build_resume_code(
    code: types.CodeType, offset: int, stack_nulls: tuple[bool, ...], local_names: tuple[str, ...], label: str
) -> types.CodeType:
    """A code object `(*locals, *stack_values)` that continues `code` at `offset`.

    It has `code`'s name, file and line numbers, so its frame reads as the user's frame
    (tracebacks, `inspect`, `warnings` stack levels); `label` names it in the debug view.

    Its parameters are `resume_parameters(code, local_names)` (the live locals and the
    original's cells), then one per stack slot that is not a NULL (`stack_nulls[i]`: slot i,
    bottom first, is a NULL). Call it with the original's closure (its free variables).
    """
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    target = Label()
    real = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    index = next(k for k, ins in enumerate(real) if ins.offset == offset)
    body: list = []
    seen = 0
    for item in bc:
        if isinstance(item, Instr):
            if seen == index:
                body.append(target)
            seen += 1
            if item.name in _PROLOGUE_OPS:
                continue
        body.append(item)
    stack_params = [stack_arg_name(i) for i, null in enumerate(stack_nulls) if not null]
    prologue = cell_prologue(code.co_cellvars, len(code.co_freevars), code.co_cellvars, code.co_firstlineno)
    prologue.append(Instr("RESUME", 0, lineno=code.co_firstlineno))
    params = iter(stack_params)
    for null in stack_nulls:
        prologue.append(
            Instr("PUSH_NULL", lineno=code.co_firstlineno)
            if null
            else Instr("LOAD_FAST", next(params), lineno=code.co_firstlineno)
        )
    # the stack values are no variables of the user's function: gone from the frame's `f_locals`
    prologue.extend(Instr("DELETE_FAST", name, lineno=code.co_firstlineno) for name in stack_params)
    prologue.append(Instr("JUMP_FORWARD", target, lineno=code.co_firstlineno))
    out = Bytecode(prologue + body)
    out.name, out.qualname = code.co_name, code.co_qualname
    out.filename = code.co_filename
    out.first_lineno = code.co_firstlineno
    out.argnames = [*resume_parameters(code, local_names), *stack_params]
    out.argcount = len(out.argnames)
    out.posonlyargcount = out.kwonlyargcount = 0
    out.cellvars = list(code.co_cellvars)
    out.freevars = list(code.co_freevars)
    out.flags = CompilerFlags(code.co_flags & ~_DROPPED_FLAGS)
    out.docstring = None
    # The body is the original's and the prologue rebuilds a stack the original had at `offset`, so the
    # original's stack size bounds it. bytecode's own pass can't be used: it takes the depth at which a try
    # block's handler is entered from the path through its TryBegin, which the jump into the block skips.
    resume = _assemble(out, stacksize=code.co_stacksize)
    kept = [i.offset for i in real if i.opname not in _PROLOGUE_OPS]
    body_offsets = [i.offset for i in dis.get_instructions(resume) if i.opname != "EXTENDED_ARG"][-len(kept) :]
    _ORIGINS[resume] = (weakref.ref(code), dict(zip(body_offsets, kept)), label)
    return resume
