"""Opcode handlers: building and unpacking containers, subscripts, operators and comparisons."""
from __future__ import annotations

import operator

from framejit.codeobj import Inst
from framejit.trace.translator import Translator, handler
from framejit.variables.base import unsupported
from framejit.variables.builtins import call_operator
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import DictVariable, ListVariable, SetVariable, SliceVariable, TupleVariable
from framejit.variables.tensor import TensorVariable

# BINARY_OP's argument indexes this table (CPython 3.11 Include/opcode.h NB_*), in-place forms from 13.
_BINARY_OPS = [operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul, operator.mul,
               operator.mod, operator.or_, operator.pow, operator.rshift, operator.sub, operator.truediv,
               operator.xor,
               operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
               operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift, operator.isub,
               operator.itruediv, operator.ixor]
_COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
                ">=": operator.ge}
_UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert,
              "UNARY_NOT": operator.not_}


@handler("BUILD_TUPLE")
def BUILD_TUPLE(tx: Translator, inst: Inst) -> None:
    tx.push(TupleVariable(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def BUILD_LIST(tx: Translator, inst: Inst) -> None:
    tx.push(ListVariable(tx.popn(inst.arg)))


@handler("BUILD_SET")
def BUILD_SET(tx: Translator, inst: Inst) -> None:
    tx.push(SetVariable(tx.popn(inst.arg)))


@handler("BUILD_MAP")
def BUILD_MAP(tx: Translator, inst: Inst) -> None:
    flat = tx.popn(2 * inst.arg)
    tx.push(DictVariable({flat[i].as_python_constant(): flat[i + 1] for i in range(0, len(flat), 2)}))


@handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(tx: Translator, inst: Inst) -> None:
    keys = tx.pop().as_python_constant()
    tx.push(DictVariable(dict(zip(keys, tx.popn(inst.arg)))))


@handler("BUILD_SLICE")
def BUILD_SLICE(tx: Translator, inst: Inst) -> None:
    tx.push(SliceVariable(tx.popn(inst.arg)))


@handler("BUILD_STRING")
def BUILD_STRING(tx: Translator, inst: Inst) -> None:
    tx.push(ConstantVariable("".join(p.as_python_constant() for p in tx.popn(inst.arg))))


@handler("FORMAT_VALUE")
def FORMAT_VALUE(tx: Translator, inst: Inst) -> None:
    spec = tx.pop().as_python_constant() if inst.arg & 4 else ""
    value = tx.pop()
    if isinstance(value, TensorVariable):
        unsupported("formatting a tensor into a string reads its data", "data_dependent")
    const = value.as_python_constant()
    conv = {0: lambda v: v, 1: str, 2: repr, 3: ascii}[inst.arg & 3]
    tx.push(ConstantVariable(format(conv(const), spec)))


@handler("LIST_APPEND")
def LIST_APPEND(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "append", [value], {})


@handler("LIST_EXTEND")
def LIST_EXTEND(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "extend", [value], {})


@handler("SET_ADD")
def SET_ADD(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "add", [value], {})


@handler("SET_UPDATE")
def SET_UPDATE(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "update", [value], {})


@handler("MAP_ADD")
def MAP_ADD(tx: Translator, inst: Inst) -> None:
    value, key = tx.pop(), tx.pop()
    tx.stack[-inst.arg].call_method(tx, "__setitem__", [key, value], {})


@handler("DICT_UPDATE", "DICT_MERGE")
def DICT_UPDATE(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    target = tx.stack[-inst.arg]
    if inst.opname == "DICT_MERGE" and isinstance(value, DictVariable) and set(value.items) & set(target.items):
        unsupported("got multiple values for a keyword argument", "bad_call")
    target.call_method(tx, "update", [value], {})


@handler("LIST_TO_TUPLE")
def LIST_TO_TUPLE(tx: Translator, inst: Inst) -> None:
    tx.push(TupleVariable(tx.pop().unpack(tx)))


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx: Translator, inst: Inst) -> None:
    items = tx.pop().unpack(tx)
    if len(items) != inst.arg:
        unsupported(f"cannot unpack {len(items)} values into {inst.arg}", "unpack")
    tx.stack.extend(reversed(items))


@handler("UNPACK_EX")
def UNPACK_EX(tx: Translator, inst: Inst) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = tx.pop().unpack(tx)
    if len(items) < before + after:
        unsupported("not enough values to unpack", "unpack")
    star = ListVariable(items[before:len(items) - after])
    tx.stack.extend(reversed([*items[:before], star, *items[len(items) - after:]]))


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(tx: Translator, inst: Inst) -> None:
    key, obj = tx.pop(), tx.pop()
    tx.push(call_operator(tx, operator.getitem, [obj, key]))


@handler("STORE_SUBSCR")
def STORE_SUBSCR(tx: Translator, inst: Inst) -> None:
    key, obj, value = tx.pop(), tx.pop(), tx.pop()
    if isinstance(obj, TensorVariable):
        call_operator(tx, operator.setitem, [obj, key, value])
    else:
        obj.call_method(tx, "__setitem__", [key, value], {})


@handler("DELETE_SUBSCR")
def DELETE_SUBSCR(tx: Translator, inst: Inst) -> None:
    key, obj = tx.pop(), tx.pop()
    obj.call_method(tx, "__delitem__", [key], {})


@handler("BINARY_OP")
def BINARY_OP(tx: Translator, inst: Inst) -> None:
    b, a = tx.pop(), tx.pop()
    tx.push(call_operator(tx, _BINARY_OPS[inst.arg], [a, b]))


@handler("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT")
def UNARY(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    if inst.opname == "UNARY_NOT":
        tx.push(ConstantVariable(not value.truth(tx)))
    else:
        tx.push(call_operator(tx, _UNARY_OPS[inst.opname], [value]))


@handler("COMPARE_OP")
def COMPARE_OP(tx: Translator, inst: Inst) -> None:
    b, a = tx.pop(), tx.pop()
    tx.push(call_operator(tx, _COMPARE_OPS[inst.argval], [a, b]))


@handler("IS_OP")
def IS_OP(tx: Translator, inst: Inst) -> None:
    b, a = tx.pop(), tx.pop()
    tx.push(call_operator(tx, operator.is_not if inst.arg else operator.is_, [a, b]))


@handler("CONTAINS_OP")
def CONTAINS_OP(tx: Translator, inst: Inst) -> None:
    container, item = tx.pop(), tx.pop()
    result = call_operator(tx, operator.contains, [container, item])
    tx.push(ConstantVariable(not result.as_python_constant()) if inst.arg else result)


