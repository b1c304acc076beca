"""3.11 facts a graph break needs about the instruction it stops at: how many stack values it consumes
(`dis.stack_effect` gives only the net effect), the forward form of a conditional jump (the break code places
the jump's target after it), and the instruction written again into the break code (`reemit`)."""

from __future__ import annotations

from typing import Any

from bytecode import BinaryOp, Compare, Instr, Label

from framejit.codeobj.reading import Inst

_ONE_INPUT = frozenset(
    {
        "LOAD_ATTR",
        "LOAD_METHOD",
        "UNARY_NEGATIVE",
        "UNARY_POSITIVE",
        "UNARY_INVERT",
        "UNARY_NOT",
        "GET_ITER",
        "UNPACK_SEQUENCE",
        "UNPACK_EX",
        "STORE_GLOBAL",
        "BEFORE_WITH",
        "DELETE_ATTR",
        "POP_JUMP_FORWARD_IF_TRUE",
        "POP_JUMP_FORWARD_IF_FALSE",
        "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_FALSE",
        "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_FORWARD_IF_NOT_NONE",
        "POP_JUMP_BACKWARD_IF_NONE",
        "POP_JUMP_BACKWARD_IF_NOT_NONE",
    }
)
_TWO_INPUTS = frozenset(
    {"STORE_ATTR", "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "DELETE_SUBSCR", "IMPORT_NAME"}
)
_BUILDS = frozenset({"BUILD_STRING", "BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "RAISE_VARARGS"})
_POP_JUMPS = {
    "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE",
}


def stack_inputs(inst: Inst) -> int | None:
    """How many stack values instruction `inst` consumes, for the instructions a break can stop at."""
    op = inst.opname
    if op == "CALL":
        return inst.oparg + 2
    if op == "CALL_FUNCTION_EX":
        return 3 + (inst.oparg & 1)
    if op in _ONE_INPUT:
        return 1
    if op in _TWO_INPUTS:
        return 2
    if op == "STORE_SUBSCR":
        return 3
    if op == "FORMAT_VALUE":
        return 2 if inst.oparg & 4 else 1
    if op in _BUILDS:
        return inst.oparg
    if op == "LOAD_GLOBAL":
        return 0
    return None


def forward_jump(opname: str) -> str:
    """The forward form of a conditional jump: break code puts the jump's target after the jump."""
    return _POP_JUMPS.get(opname, opname)


def reemit(inst: Inst, kw_names: tuple[str, ...], jump_target: Label | None) -> list[Instr]:
    """The instruction `inst` as the break code runs it, as the original had it: a CALL with its KW_NAMES and
    PRECALL, a LOAD_METHOD as an attribute load leaving [NULL, attribute] (a known layout to store from), a
    conditional jump to `jump_target` (its continuation)."""
    op, line = inst.opname, inst.lineno
    if op == "CALL":
        # KW_NAMES takes its tuple of names as a constant; bytecode's InstrArg type omits tuples of str
        names = [Instr("KW_NAMES", kw_names, lineno=line)] if kw_names else []  # type: ignore[arg-type]
        return [*names, Instr("PRECALL", inst.oparg, lineno=line), Instr("CALL", inst.oparg, lineno=line)]
    if op == "LOAD_METHOD":
        return [
            Instr("LOAD_ATTR", inst.argval, lineno=line),
            Instr("PUSH_NULL", lineno=line),
            Instr("SWAP", 2, lineno=line),
        ]
    if op == "LOAD_GLOBAL":
        return [Instr("LOAD_GLOBAL", (bool(inst.oparg & 1), inst.argval), lineno=line)]
    if op.startswith("POP_JUMP") or op.startswith("JUMP_IF"):
        assert jump_target is not None
        return [Instr(forward_jump(op), jump_target, lineno=line)]
    if inst.arg is not None:
        return [Instr(op, _argument(inst), lineno=line)]
    return [Instr(op, lineno=line)]


def _argument(inst: Inst) -> Any:
    if inst.opname == "BINARY_OP":
        return BinaryOp(inst.oparg)
    if inst.opname == "COMPARE_OP":
        return Compare(inst.oparg)
    if inst.opname in ("LOAD_ATTR", "STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL", "IMPORT_NAME"):
        return inst.argval
    return inst.arg


def leaves_null_below(inst: Inst) -> bool:
    """Whether `inst`, as `reemit` writes it, leaves a NULL below its result."""
    return inst.opname == "LOAD_METHOD" or (inst.opname == "LOAD_GLOBAL" and bool(inst.oparg & 1))
