"""inspect.Signature.bind in the trace: binding depends only on the signature (a constant) and the shape of the
call (how many positional arguments, which keywords), so it is done now by inspect itself, on stand-in tokens
that are then mapped back to the traced values. The result is a BoundArguments the trace reads and completes."""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable, ObjectVariable
from framejit.variables.containers import BoundMethod, TupleVariable
from framejit.variables.mappings import DictVariable


class BoundArgumentsVariable(Variable):
    """An inspect.BoundArguments made in the trace: `arguments` is one dict Variable (name -> value), as the real
    object keeps one dict; `args`, `kwargs` and `apply_defaults()` follow inspect's own rules over it."""

    def __init__(self, signature: inspect.Signature, arguments: DictVariable) -> None:
        self.signature = signature
        self.arguments = arguments

    def python_type(self) -> type:
        return inspect.BoundArguments

    def children(self) -> list[Variable]:
        return [self.arguments]

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "arguments":
            return self.arguments
        if name == "signature":
            return ObjectVariable(self.signature)
        if name in ("args", "kwargs"):
            return self._args_or_kwargs(tx, name)
        if name == "apply_defaults":
            return BoundMethod(self, name)
        unsupported(f"BoundArguments.{name} in the trace", BreakCode.GETATTR)

    def call_method(self, tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name != "apply_defaults" or args or kwargs:
            unsupported(f"BoundArguments.{name}() in the trace", BreakCode.CALL)
        given, done = self.arguments.items, {}
        for param in self.signature.parameters.values():  # in the signature's order, as inspect rebuilds it
            if param.name in given:
                done[param.name] = given[param.name]
            elif param.default is not inspect.Parameter.empty:
                done[param.name] = tx.wrap_constant(param.default)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                done[param.name] = TupleVariable([])
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                done[param.name] = DictVariable({})
        given.clear()
        given.update(done)
        return ConstantVariable(None)

    def _args_or_kwargs(self, tx: Tracer, name: str) -> Variable:
        """BoundArguments.args / .kwargs by inspect's rules: positional up to the first missing or keyword-only
        parameter (a *args tuple spliced in), the rest by keyword (a **kwargs dict merged in)."""
        given, P = self.arguments.items, inspect.Parameter
        args: list[Variable] = []
        kwargs: dict[str, Variable] = {}
        positional = True
        for param in self.signature.parameters.values():
            if positional and (param.kind in (P.VAR_KEYWORD, P.KEYWORD_ONLY) or param.name not in given):
                positional = False
                if param.name not in given:
                    continue
            if param.name not in given:
                continue
            value = given[param.name]
            if positional:
                args.extend(value.unpack(tx) if param.kind is P.VAR_POSITIONAL else [value])
            elif param.kind is P.VAR_KEYWORD:
                if not isinstance(value, DictVariable):
                    unsupported(f"BoundArguments.kwargs with {param.name} = {value}", BreakCode.CALL)
                kwargs.update(value.items)
            else:
                kwargs[param.name] = value
        return TupleVariable(args) if name == "args" else DictVariable(kwargs)

    def rebuild(self, cg: Emitter) -> None:
        unsupported("a BoundArguments made in the trace that outlives it", BreakCode.RECONSTRUCT)

    def __repr__(self) -> str:
        return f"BoundArgumentsVariable({list(self.arguments.items)})"


class _Token:
    """Stands for one traced argument while inspect binds."""

    __slots__ = ()


def _bind(partial: bool) -> Callable[..., Variable]:
    def bind(tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        signature = args[0].as_python_constant()
        if not isinstance(signature, inspect.Signature):
            unsupported(f"Signature.bind on {args[0]}", BreakCode.CALL)
        stand_ins = [_Token() for _ in args[1:]]
        by_token = {id(t): v for t, v in zip(stand_ins, args[1:])}
        kw_tokens = {k: _Token() for k in kwargs}
        by_token.update({id(kw_tokens[k]): v for k, v in kwargs.items()})
        try:
            bound = (signature.bind_partial if partial else signature.bind)(*stand_ins, **kw_tokens)
        except TypeError as e:  # the call does not fit: the code may catch it
            raise_observed(e, BreakCode.BAD_CALL)
        arguments: dict[str, Variable] = {}
        for name, value in bound.arguments.items():
            if isinstance(value, tuple):  # *args
                arguments[name] = TupleVariable([by_token[id(v)] for v in value])
            elif isinstance(value, dict):  # **kwargs
                arguments[name] = DictVariable({k: by_token[id(v)] for k, v in value.items()})
            else:
                arguments[name] = by_token[id(value)]
        return BoundArgumentsVariable(signature, DictVariable(arguments))

    return bind


RULES = {inspect.Signature.bind: _bind(False), inspect.Signature.bind_partial: _bind(True)}
