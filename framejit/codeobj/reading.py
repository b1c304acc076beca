"""Reading 3.11 code objects: instructions with resolved jump targets, and the exception table.

Also the opcode families the rest of the package (and the tracer) needs: jumps,
unconditional jumps, and instructions that end a basic block.
"""

from __future__ import annotations

import dataclasses
import dis
import reprlib
import types
from typing import Any, Callable, Iterator

JUMP_OPNAMES: frozenset[str] = frozenset(dis.opname[op] for op in dis.hasjrel + dis.hasjabs)
# Jumps that never fall through to the next instruction.
UNCONDITIONAL_JUMPS: frozenset[str] = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"})
# Instructions after which control never reaches the next instruction (other than by a jump).
TERMINATORS: frozenset[str] = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE"}) | UNCONDITIONAL_JUMPS


@dataclasses.dataclass(frozen=True, slots=True)
class Inst:
    """One instruction of a code object, as the symbolic interpreter reads it.

    `lineno` is never None (inherited from the previous line start, or the
    code's first line); `target_index` is the list index of a jump's target.
    `argval` is what `arg` means for the opcode: a name, a constant, a jump's target offset...
    """

    opname: str
    opcode: int
    arg: int | None
    argval: Any
    offset: int
    starts_line: int | None
    lineno: int
    is_jump_target: bool
    target_index: int | None

    @property
    def oparg(self) -> int:
        """`arg` of an instruction whose opcode takes one (which the caller knows it does)."""
        assert self.arg is not None, f"{self.opname} has no argument"
        return self.arg


@dataclasses.dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """One row of co_exceptiontable, in byte offsets: instructions at start <= offset < end go to target."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool

    def covers(self, offset: int) -> bool:
        return self.start <= offset < self.end


class _ConstView:
    """Stands in for a constant while dis reads a code object, so dis never calls the real repr."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _make_repr() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxstring, r.maxother, r.maxtuple, r.maxlist, r.maxdict = 120, 200, 30, 30, 30
    return r


_REPR = _make_repr()


def safe_repr(obj: object) -> str:
    """A bounded repr that never raises (constants may be arbitrary objects, e.g. compiled graphs)."""
    try:
        return _REPR.repr(obj)
    except Exception:  # noqa: BLE001 - a user object's __repr__ may raise anything
        return f"<{type(obj).__name__} object at {id(obj):#x}>"


def dis_instructions(code: types.CodeType, const_repr: Callable[[object], str]) -> Iterator[dis.Instruction]:
    """dis.get_instructions (no CACHE entries), with constants shown by `const_repr` and argval kept real."""
    viewed = code.replace(co_consts=tuple(_ConstView(const_repr(c)) for c in code.co_consts))
    for ins in dis.get_instructions(viewed):
        if ins.opcode in dis.hasconst:
            assert ins.arg is not None
            ins = ins._replace(argval=code.co_consts[ins.arg])
        yield ins


def read_instructions(code: types.CodeType) -> list[Inst]:
    """The instructions of `code` without CACHE entries, with line numbers and jump targets resolved."""
    raw = list(dis_instructions(code, lambda _c: ""))
    index_of = {ins.offset: i for i, ins in enumerate(raw)}
    out: list[Inst] = []
    lineno = code.co_firstlineno
    for ins in raw:
        if ins.starts_line is not None:
            lineno = ins.starts_line
        target = index_of[ins.argval] if ins.opname in JUMP_OPNAMES else None
        out.append(
            Inst(
                opname=ins.opname,
                opcode=ins.opcode,
                arg=ins.arg,
                argval=ins.argval,
                offset=ins.offset,
                starts_line=ins.starts_line,
                lineno=lineno,
                is_jump_target=ins.is_jump_target,
                target_index=target,
            )
        )
    return out


def offset_to_index(insts: list[Inst]) -> dict[int, int]:
    """Map each instruction's byte offset to its index in `insts`."""
    return {inst.offset: i for i, inst in enumerate(insts)}


def _varints(data: bytes) -> Iterator[int]:
    """The big-endian 6-bit varints of co_exceptiontable (bit 6: more follows; bit 7: entry start)."""
    value = 0
    for byte in data:
        value = (value << 6) | (byte & 63)
        if not byte & 64:
            yield value
            value = 0


def exception_table(code: types.CodeType) -> list[ExceptionEntry]:
    """The exception table of `code`, in the order CPython searches it (innermost ranges first)."""
    nums = list(_varints(code.co_exceptiontable))
    entries = []
    for i in range(0, len(nums), 4):
        start, length, target, depth_lasti = nums[i : i + 4]
        entries.append(
            ExceptionEntry(
                start=start * 2,
                end=(start + length) * 2,
                target=target * 2,
                depth=depth_lasti >> 1,
                lasti=bool(depth_lasti & 1),
            )
        )
    return entries


def exception_entry_at(entries: list[ExceptionEntry], offset: int) -> ExceptionEntry | None:
    """The entry CPython would use for an exception raised at `offset` (the first covering one)."""
    for entry in entries:
        if entry.covers(offset):
            return entry
    return None
