"""3.11 facts a graph break needs about the instruction it stops at: how many stack values it consumes
(`dis.stack_effect` gives only the net effect), and the forward form of a conditional jump (the break code
places the jump's target after it)."""
from __future__ import annotations

from framejit.codeobj.reading import Inst

_ONE_INPUT = frozenset({"LOAD_ATTR", "LOAD_METHOD", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT",
                        "UNARY_NOT", "GET_ITER", "UNPACK_SEQUENCE", "UNPACK_EX", "STORE_GLOBAL", "BEFORE_WITH",
                        "DELETE_ATTR",
                        "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE",
                        "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
                        "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"})
_TWO_INPUTS = frozenset({"STORE_ATTR", "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "IS_OP", "CONTAINS_OP",
                         "DELETE_SUBSCR", "IMPORT_NAME"})
_BUILDS = frozenset({"BUILD_STRING", "BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "RAISE_VARARGS"})
_POP_JUMPS = {"POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
              "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
              "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
              "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE"}


def stack_inputs(inst: Inst) -> int | None:
    """How many stack values instruction `inst` consumes, for the instructions a break can stop at."""
    op = inst.opname
    if op == "CALL":
        return inst.arg + 2
    if op == "CALL_FUNCTION_EX":
        return 3 + (inst.arg & 1)
    if op in _ONE_INPUT:
        return 1
    if op in _TWO_INPUTS:
        return 2
    if op == "STORE_SUBSCR":
        return 3
    if op == "FORMAT_VALUE":
        return 2 if inst.arg & 4 else 1
    if op in _BUILDS:
        return inst.arg
    if op == "LOAD_GLOBAL":
        return 0
    return None


def forward_jump(opname: str) -> str:
    """The forward form of a conditional jump: break code puts the jump's target after the jump."""
    return _POP_JUMPS.get(opname, opname)
