"""Opcode handlers: building and unpacking containers, subscripts, operators and comparisons."""

from __future__ import annotations

import operator
from typing import Any, Callable, cast

from framejit.codeobj import Inst
from framejit.exc import BreakCode, unsupported
from framejit.trace.frame_state import FrameState
from framejit.trace.opcode_table import handles
from framejit.variables.operators import call_operator
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import ListVariable, SliceVariable, TupleVariable
from framejit.variables.sets import SetVariable
from framejit.variables.mappings import DictVariable, dict_key
from framejit.variables.lazy_string import LazyStringVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.container_subclasses import merged_mapping, text_operand

# BINARY_OP's argument indexes this table (CPython 3.11 Include/opcode.h NB_*), in-place forms from 13.
_BINARY_OPS = [
    operator.add,
    operator.and_,
    operator.floordiv,
    operator.lshift,
    operator.matmul,
    operator.mul,
    operator.mod,
    operator.or_,
    operator.pow,
    operator.rshift,
    operator.sub,
    operator.truediv,
    operator.xor,
    operator.iadd,
    operator.iand,
    operator.ifloordiv,
    operator.ilshift,
    operator.imatmul,
    operator.imul,
    operator.imod,
    operator.ior,
    operator.ipow,
    operator.irshift,
    operator.isub,
    operator.itruediv,
    operator.ixor,
]
_COMPARE_OPS = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
# FORMAT_VALUE's conversion (its argument & 3): none, !s, !r, !a
_CONVERSIONS: list[Callable[[Any], Any]] = [lambda v: v, str, repr, ascii]
_UNARY_OPS: dict[str, Callable[[Any], Any]] = {
    "UNARY_NEGATIVE": operator.neg,
    "UNARY_POSITIVE": operator.pos,
    "UNARY_INVERT": operator.invert,
    "UNARY_NOT": operator.not_,
}


class DataOps(FrameState):
    """Opcode handlers of the translator: building containers, unpacking, subscripts and operators."""

    @handles("BUILD_TUPLE")
    def BUILD_TUPLE(self, inst: Inst) -> None:
        self.push(TupleVariable(self.popn(inst.oparg)))

    @handles("BUILD_LIST")
    def BUILD_LIST(self, inst: Inst) -> None:
        self.push(ListVariable(self.popn(inst.oparg)))

    @handles("BUILD_SET")
    def BUILD_SET(self, inst: Inst) -> None:
        self.push(SetVariable.of(self, self.popn(inst.oparg)))

    @handles("BUILD_MAP")
    def BUILD_MAP(self, inst: Inst) -> None:
        flat = self.popn(2 * inst.oparg)
        self.push(DictVariable({dict_key(self, flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))

    @handles("BUILD_CONST_KEY_MAP")
    def BUILD_CONST_KEY_MAP(self, inst: Inst) -> None:
        keys = self.pop().as_python_constant()
        self.push(DictVariable(dict(zip(keys, self.popn(inst.oparg)))))

    @handles("BUILD_SLICE")
    def BUILD_SLICE(self, inst: Inst) -> None:
        self.push(SliceVariable(self.popn(inst.oparg)))

    @handles("BUILD_STRING")
    def BUILD_STRING(self, inst: Inst) -> None:
        pieces = self.popn(inst.oparg)
        if any(isinstance(p, LazyStringVariable) for p in pieces):
            self.push(LazyStringVariable.join(pieces))
            return
        self.push(ConstantVariable("".join(p.as_python_constant() for p in pieces)))

    @handles("FORMAT_VALUE")
    def FORMAT_VALUE(self, inst: Inst) -> None:
        spec = self.pop().as_python_constant() if inst.oparg & 4 else ""
        value = self.pop()
        if isinstance(value, LazyStringVariable) and not spec and inst.oparg & 3 in (0, 1):
            self.push(value)  # f"{text}" of a string is the string
            return
        if isinstance(value, (TensorVariable, LazyStringVariable)):  # formatted after the graph, if ever
            self.push(LazyStringVariable.formatted(value, inst.oparg, spec))
            return
        const = text_operand(value)
        self.push(ConstantVariable(format(_CONVERSIONS[inst.oparg & 3](const), spec)))

    @handles("LIST_APPEND")
    def LIST_APPEND(self, inst: Inst) -> None:
        value = self.pop()
        self.stack[-inst.oparg].call_method(self, "append", [value], {})

    @handles("LIST_EXTEND")
    def LIST_EXTEND(self, inst: Inst) -> None:
        value = self.pop()
        self.stack[-inst.oparg].call_method(self, "extend", [value], {})

    @handles("SET_ADD")
    def SET_ADD(self, inst: Inst) -> None:
        value = self.pop()
        self.stack[-inst.oparg].call_method(self, "add", [value], {})

    @handles("SET_UPDATE")
    def SET_UPDATE(self, inst: Inst) -> None:
        value = self.pop()
        self.stack[-inst.oparg].call_method(self, "update", [value], {})

    @handles("MAP_ADD")
    def MAP_ADD(self, inst: Inst) -> None:
        value, key = self.pop(), self.pop()
        self.stack[-inst.oparg].call_method(self, "__setitem__", [key, value], {})

    @handles("DICT_UPDATE", "DICT_MERGE")
    def DICT_UPDATE(self, inst: Inst) -> None:
        value = self.pop()
        merged = merged_mapping(self, value)  # an object of a dict subclass gives its items
        value = value if merged is None else merged
        target = self.stack[-inst.oparg]  # the dict BUILD_MAP made
        if (
            inst.opname == "DICT_MERGE"
            and isinstance(value, DictVariable)
            and set(value.items) & set(cast(DictVariable, target).items)
        ):
            unsupported("got multiple values for a keyword argument", BreakCode.BAD_CALL)
        target.call_method(self, "update", [value], {})

    @handles("LIST_TO_TUPLE")
    def LIST_TO_TUPLE(self, inst: Inst) -> None:
        self.push(TupleVariable(self.pop().unpack(self)))

    @handles("UNPACK_SEQUENCE")
    def UNPACK_SEQUENCE(self, inst: Inst) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.oparg:
            unsupported(f"cannot unpack {len(items)} values into {inst.oparg}", BreakCode.UNPACK)
        self.stack.extend(reversed(items))

    @handles("UNPACK_EX")
    def UNPACK_EX(self, inst: Inst) -> None:
        before, after = inst.oparg & 0xFF, inst.oparg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            unsupported("not enough values to unpack", BreakCode.UNPACK)
        star = ListVariable(items[before : len(items) - after])
        self.stack.extend(reversed([*items[:before], star, *items[len(items) - after :]]))

    @handles("BINARY_SUBSCR")
    def BINARY_SUBSCR(self, inst: Inst) -> None:
        key, obj = self.pop(), self.pop()
        self.push(call_operator(self, operator.getitem, [obj, key]))

    @handles("STORE_SUBSCR")
    def STORE_SUBSCR(self, inst: Inst) -> None:
        key, obj, value = self.pop(), self.pop(), self.pop()
        if isinstance(obj, TensorVariable):
            call_operator(self, operator.setitem, [obj, key, value])
        else:
            obj.call_method(self, "__setitem__", [key, value], {})

    @handles("DELETE_SUBSCR")
    def DELETE_SUBSCR(self, inst: Inst) -> None:
        key, obj = self.pop(), self.pop()
        obj.call_method(self, "__delitem__", [key], {})

    @handles("BINARY_OP")
    def BINARY_OP(self, inst: Inst) -> None:
        b, a = self.pop(), self.pop()
        self.push(call_operator(self, _BINARY_OPS[inst.oparg], [a, b]))

    @handles("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT")
    def UNARY(self, inst: Inst) -> None:
        value = self.pop()
        if inst.opname == "UNARY_NOT":
            self.push(ConstantVariable(not value.truth(self)))
        else:
            self.push(call_operator(self, _UNARY_OPS[inst.opname], [value]))

    @handles("COMPARE_OP")
    def COMPARE_OP(self, inst: Inst) -> None:
        b, a = self.pop(), self.pop()
        self.push(call_operator(self, _COMPARE_OPS[inst.argval], [a, b]))

    @handles("IS_OP")
    def IS_OP(self, inst: Inst) -> None:
        b, a = self.pop(), self.pop()
        op: Callable[[Any, Any], bool] = operator.is_not if inst.oparg else operator.is_
        self.push(call_operator(self, op, [a, b]))

    @handles("CONTAINS_OP")
    def CONTAINS_OP(self, inst: Inst) -> None:
        container, item = self.pop(), self.pop()
        result = call_operator(self, operator.contains, [container, item])
        self.push(ConstantVariable(not result.as_python_constant()) if inst.oparg else result)
