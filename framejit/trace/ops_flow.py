"""Opcode handlers: jumps (on trace-time constants only) and for-loops (unrolled)."""
from __future__ import annotations

from framejit.codeobj import Inst
from framejit.trace.translator import Translator, handler
from framejit.variables.base import unsupported
from framejit.variables.containers import DictVariable, IteratorVariable, ListVariable


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def JUMP(tx: Translator, inst: Inst) -> None:
    tx.jump(inst)


@handler("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE")
def POP_JUMP_IF_TRUE(tx: Translator, inst: Inst) -> None:
    if tx.pop().truth(tx):
        tx.jump(inst)


@handler("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE")
def POP_JUMP_IF_FALSE(tx: Translator, inst: Inst) -> None:
    if not tx.pop().truth(tx):
        tx.jump(inst)


def _is_none(tx: Translator) -> bool:
    value = tx.pop()
    return value.is_python_constant() and value.as_python_constant() is None


@handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE")
def POP_JUMP_IF_NONE(tx: Translator, inst: Inst) -> None:
    if _is_none(tx):
        tx.jump(inst)


@handler("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")
def POP_JUMP_IF_NOT_NONE(tx: Translator, inst: Inst) -> None:
    if not _is_none(tx):
        tx.jump(inst)


@handler("JUMP_IF_TRUE_OR_POP")
def JUMP_IF_TRUE_OR_POP(tx: Translator, inst: Inst) -> None:
    if tx.stack[-1].truth(tx):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP")
def JUMP_IF_FALSE_OR_POP(tx: Translator, inst: Inst) -> None:
    if not tx.stack[-1].truth(tx):
        tx.jump(inst)
    else:
        tx.pop()


@handler("GET_ITER")
def GET_ITER(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    if isinstance(value, IteratorVariable):
        tx.push(value)
    elif type(value) is ListVariable:  # live: appending to the list while looping over it is seen
        tx.push(IteratorVariable([], live=value))
    elif isinstance(value, DictVariable):
        tx.push(IteratorVariable.over(tx, value))
    else:
        tx.push(IteratorVariable(value.unpack(tx)))


@handler("FOR_ITER")
def FOR_ITER(tx: Translator, inst: Inst) -> None:
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        unsupported(f"iterating over {iterator} inside the trace", "iter")
    item = iterator.next()
    if item is None:
        tx.pop()
        tx.jump(inst)
    else:
        tx.push(item)
