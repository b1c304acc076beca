"""Opcode handlers: calls, function creation, with-blocks, generators and return."""
from __future__ import annotations

from typing import Sequence

from framejit.codeobj import Inst
from framejit.trace.translator import ReturnValue, Translator, handler
from framejit.variables.base import NULL, ExcInfoVariable, Variable, unsupported
from framejit.variables.callables import NestedFunctionVariable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import DictVariable, IteratorVariable
from framejit.variables.torch_special import WithExitVariable


def _call(tx: Translator, fn: Variable, args: list[Variable], kw_names: Sequence[str]) -> None:
    kwargs: dict[str, Variable] = {}
    if kw_names:
        kwargs = dict(zip(kw_names, args[-len(kw_names):]))
        args = args[:-len(kw_names)]
    tx.push(fn.call(tx, args, kwargs))


@handler("PRECALL")
def PRECALL(tx: Translator, inst: Inst) -> None:
    """3.11 splits calls in PRECALL + CALL; all the work happens at CALL."""


@handler("KW_NAMES")
def KW_NAMES(tx: Translator, inst: Inst) -> None:
    tx.kw_names = tuple(inst.argval)


@handler("CALL")
def CALL(tx: Translator, inst: Inst) -> None:
    args = tx.popn(inst.arg)
    callable_or_self, below = tx.pop(), tx.pop()
    if below is NULL:
        fn = callable_or_self
    else:  # a method: [method, self, args...]
        fn, args = below, [callable_or_self, *args]
    kw_names, tx.kw_names = tx.kw_names, ()
    _call(tx, fn, args, kw_names)


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(tx: Translator, inst: Inst) -> None:
    kwargs = tx.pop() if inst.arg & 1 else DictVariable({})
    args, fn = tx.pop(), tx.pop()
    tx.pop()  # 3.11 always pushes a NULL below the callable of CALL_FUNCTION_EX
    if not isinstance(kwargs, DictVariable):
        unsupported("**kwargs that is not a dict", "call")
    arg_list = args.unpack(tx)
    tx.push(fn.call(tx, arg_list, dict(kwargs.items)))


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(tx: Translator, inst: Inst) -> None:
    code = tx.pop().as_python_constant()
    closure = [c.cell for c in tx.pop().unpack(tx)] if inst.arg & 0x08 else None  # type: ignore[attr-defined]
    if inst.arg & 0x04:
        tx.pop()  # annotations are not needed to run the function
    kwdefaults = tx.pop().items if inst.arg & 0x02 else {}  # type: ignore[attr-defined]
    defaults = tx.pop().unpack(tx) if inst.arg & 0x01 else []
    tx.push(NestedFunctionVariable(code, code.co_qualname, tx.f_globals, defaults, dict(kwdefaults), closure))


@handler("RETURN_VALUE")
def RETURN_VALUE(tx: Translator, inst: Inst) -> None:
    value = tx.pop()
    if tx.code.co_name == "<genexpr>":
        value = IteratorVariable(tx.generated)
    raise ReturnValue(value)


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(tx: Translator, inst: Inst) -> None:
    """An inlined generator expression is run to completion and its values collected (see YIELD_VALUE)."""
    tx.push(ConstantVariable(None))


@handler("YIELD_VALUE")
def YIELD_VALUE(tx: Translator, inst: Inst) -> None:
    tx.generated.append(tx.pop())
    tx.push(ConstantVariable(None))


@handler("BEFORE_WITH")
def BEFORE_WITH(tx: Translator, inst: Inst) -> None:
    ctx = tx.pop()
    if not hasattr(ctx, "enter"):
        unsupported(f"with-block on {ctx}, which is not a supported context manager", "context_manager")
    tx.push(WithExitVariable(ctx))
    tx.push(ctx.enter(tx))  # type: ignore[attr-defined]


@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx: Translator, inst: Inst) -> None:
    exc = tx.pop()
    tx.push(ExcInfoVariable(exc))
    tx.push(exc)


@handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(tx: Translator, inst: Inst) -> None:
    expected = tx.pop().as_python_constant()
    tx.push(ConstantVariable(issubclass(tx.stack[-1].python_type(), expected)))


@handler("POP_EXCEPT")
def POP_EXCEPT(tx: Translator, inst: Inst) -> None:
    saved = tx.pop()
    if not isinstance(saved, ExcInfoVariable):  # a real PUSH_EXC_INFO ran before this continuation
        tx.output.side_effects.restore_exc_info(saved)


@handler("RAISE_VARARGS", "RERAISE", "WITH_EXCEPT_START", "SETUP_ANNOTATIONS")
def RAISE(tx: Translator, inst: Inst) -> None:
    unsupported(f"{inst.opname}: raising or handling an exception inside a compiled region", "exception")
