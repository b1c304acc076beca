"""Assembling 3.11 code objects with the `bytecode` package: round trips and new functions.

`build_function_code` makes the replacement and continuation functions: the
template's closure layout, plain positional parameters, and the 3.11 prologue.
"""

from __future__ import annotations

import inspect
import types
from typing import Sequence, Union

from bytecode import UNSET, Bytecode, CellVar, CompilerFlags, FreeVar, Instr, Label, SetLineno, TryBegin, TryEnd

BodyItem = Union[Instr, Label, TryBegin, TryEnd, SetLineno]

# Flags a built function never has: its parameters are plain positional, and it is no generator.
_DROPPED_FLAGS = (
    inspect.CO_VARARGS
    | inspect.CO_VARKEYWORDS
    | inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
# Opcodes whose argument is a cell or free variable (bytecode.CellVar / FreeVar).
_CELL_OPNAMES = frozenset({"LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF", "MAKE_CELL"})


_PLAIN_CONST_TYPES = (type(None), type(Ellipsis), bool, int, float, complex, str, bytes, types.CodeType)


def _is_plain_const(obj: object) -> bool:
    """True for constants the compiler itself would emit, which may safely be merged when equal."""
    if type(obj) in (tuple, frozenset):
        return all(_is_plain_const(item) for item in obj)  # type: ignore[attr-defined]
    return type(obj) in _PLAIN_CONST_TYPES


class _ConstSlot:
    """Holds the place of one constant object through assembly (marshal can't encode it, so it stays unmerged)."""

    __slots__ = ()


def _assemble(bc: Bytecode, stacksize: int | None = None) -> types.CodeType:
    """`bc.to_code()`, keeping every non-plain constant by identity and the given exception-table depths.

    The bytecode package merges constants whose marshal encodings are equal, so two
    distinct but equal lists (or any marshallable object) would share one slot; a
    LOAD_CONST must load the very object it was given.
    Handler depths (TryBegin.stack_depth) are recomputed only when some TryBegin has
    none: bytecode computes the least depth inside the range, which keeps values that
    CPython's own tables pop (e.g. a return value held while an inlined `finally` runs).
    `stacksize`, when given, is used as is instead of bytecode's stack-depth pass.
    """
    slots: dict[int, _ConstSlot] = {}
    objects: dict[int, object] = {}
    for instr in bc:
        if isinstance(instr, Instr) and instr.name == "LOAD_CONST" and not _is_plain_const(instr.arg):
            slot = slots.setdefault(id(instr.arg), _ConstSlot())
            objects[id(slot)] = instr.arg
            instr.arg = slot  # type: ignore[assignment]  # any object is a constant; bytecode's InstrArg omits it
    missing_depth = any(isinstance(i, TryBegin) and i.stack_depth is UNSET for i in bc)
    code = bc.to_code(stacksize=stacksize, compute_exception_stack_depths=missing_depth)
    if not objects:
        return code
    return code.replace(co_consts=tuple(objects.get(id(c), c) for c in code.co_consts))


def roundtrip(code: types.CodeType) -> types.CodeType:
    """Disassemble `code` with the bytecode package and assemble it again."""
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    # bytecode numbers locals by first use after its argnames; naming all of them keeps co_varnames' order.
    bc.argnames = list(code.co_varnames)
    return _assemble(bc)


def arg_slot_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of the argument slots of a frame of `code`, in localsplus order (*args, then **kwargs last)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:n]


def cell_prologue(
    cellvars: Sequence[str], n_freevars: int, passed_cells: Sequence[str] = (), lineno: int | None = None
) -> list[Instr]:
    """What 3.11 code runs before RESUME: copy the closure into the free slots and make the cells.

    A parameter in `passed_cells` arrives holding a cell made by the caller (a continuation
    shares its function's cells this way). MAKE_CELL wraps it like any cell parameter,
    then the caller's cell replaces the wrapper in the slot, so the slot is a cell that
    MAKE_CELL made as far as the frame's readers know (`f_locals`, zero-argument
    `super()`), and reading it empty raises UnboundLocalError as in the function itself.
    """
    out = [Instr("COPY_FREE_VARS", n_freevars, lineno=lineno)] if n_freevars else []
    out.extend(Instr("MAKE_CELL", CellVar(name), lineno=lineno) for name in cellvars)
    for name in passed_cells:
        out.append(Instr("LOAD_DEREF", CellVar(name), lineno=lineno))
        out.append(Instr("STORE_FAST", name, lineno=lineno))
    return out


def _prepare(item: BodyItem, template: types.CodeType) -> BodyItem:
    """A copy of a body instruction with a line number, and its cell/free argument checked against `template`."""
    if not isinstance(item, Instr):
        return item  # labels and try markers are matched by identity: keep them
    out = item.copy()
    if item.name in _CELL_OPNAMES:
        assert isinstance(item.arg, (CellVar, FreeVar))
        name = item.arg.name
        if name in template.co_cellvars:
            out.arg = CellVar(name)
        elif name in template.co_freevars:
            out.arg = FreeVar(name)
        else:
            raise ValueError(f"{item.name} {name!r}: not a cell or free variable of {template.co_qualname}")
    if item.location is None:
        out.lineno = template.co_firstlineno
    return out


def build_function_code(
    template: types.CodeType,
    body: list[BodyItem],
    *,
    name: str | None = None,
    argnames: tuple[str, ...] | None = None,
    extra_varnames: tuple[str, ...] = (),
    passed_cells: tuple[str, ...] = (),
) -> types.CodeType:
    """A function's code with `template`'s file, lines, qualname and closure layout, running `body`.

    Parameters are `argnames` (default: the template's argument slots), all plain
    positional. The 3.11 prologue (COPY_FREE_VARS, MAKE_CELL, RESUME) is prepended;
    a cellvar that is also a parameter becomes a cell around the argument, as in 3.11, unless
    it is one of `passed_cells`: the template's parameters that arrive as cells (see `cell_prologue`).
    The function must be made with the template's closure (a tuple of cells for its freevars).
    """
    args = arg_slot_names(template) if argnames is None else tuple(argnames)
    if len(set(args)) != len(args):
        raise ValueError(f"duplicate parameter names: {args}")
    if set(args) & set(template.co_freevars):
        raise ValueError(f"parameters {args} overlap the free variables {template.co_freevars}")
    bc = Bytecode()
    bc.name = template.co_name if name is None else name
    bc.qualname = template.co_qualname
    bc.filename = template.co_filename
    bc.first_lineno = template.co_firstlineno
    bc.argcount = len(args)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    # Locals after the parameters: naming them here puts them in co_varnames even if unused.
    bc.argnames = list(args) + [n for n in dict.fromkeys(extra_varnames) if n not in args]
    bc.cellvars = list(template.co_cellvars)
    bc.freevars = list(template.co_freevars)
    bc.flags = CompilerFlags((template.co_flags & ~_DROPPED_FLAGS) | inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS)
    bc.docstring = None  # co_consts[0] is the docstring in 3.11: never let a body string become one
    bc.extend(cell_prologue(template.co_cellvars, len(template.co_freevars), passed_cells))
    bc.append(Instr("RESUME", 0, lineno=template.co_firstlineno))
    bc.extend(_prepare(item, template) for item in body)
    return _assemble(bc)
