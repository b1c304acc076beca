"""framejit.codeobj.build_function_code: functions built from a template's code and a new body."""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable

import pytest
from bytecode import CellVar, FreeVar, Instr, Label

from framejit.codeobj import arg_slot_names, build_function_code

from tests.codeobj.corpus import closure_over_arg, fib, generator_fn, kwonly, make_counter, posonly, varargs


# ---------------------------------------------------------------- build_function_code


def make(template: Callable, body: list, **kw: Any) -> Callable:
    code = build_function_code(template.__code__, body, **kw)
    return types.FunctionType(code, template.__globals__, code.co_name, None, template.__closure__)


def test_arg_slot_names() -> None:
    assert arg_slot_names(varargs.__code__) == ("a", "args", "kwargs")
    assert arg_slot_names(kwonly.__code__) == ("a", "b", "c")
    assert arg_slot_names(posonly.__code__) == ("a", "b", "c", "d")
    assert arg_slot_names(closure_over_arg.__code__) == ("a", "b")
    assert arg_slot_names(make_counter(0).__code__) == ("step",)


def test_build_returns_argument() -> None:
    f = make(kwonly, [Instr("LOAD_FAST", "b"), Instr("RETURN_VALUE")], name="__resume_at_0_0")
    code = f.__code__
    assert f(1, 2, 3) == 2
    assert code.co_argcount == 3 and code.co_kwonlyargcount == 0 and code.co_posonlyargcount == 0
    assert code.co_varnames[:3] == ("a", "b", "c")
    assert code.co_name == "__resume_at_0_0" and code.co_qualname == kwonly.__code__.co_qualname
    assert code.co_filename == kwonly.__code__.co_filename
    assert code.co_firstlineno == kwonly.__code__.co_firstlineno
    assert {line for _, _, line in code.co_lines()} == {kwonly.__code__.co_firstlineno}
    assert code.co_flags & (inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS) == inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS


def test_build_calls_any_object_as_constant() -> None:
    class Compiled:
        def __call__(self, x: int, y: int, k: int = 0) -> tuple:
            return (x, y, k)

        def __eq__(self, other: object) -> bool:
            return True  # equality must not merge constants

        __hash__ = object.__hash__

    fn0, fn1 = Compiled(), Compiled()
    body = [
        Instr("PUSH_NULL"),
        Instr("LOAD_CONST", fn0),
        Instr("LOAD_FAST", "a"),
        Instr("LOAD_FAST", "b"),
        Instr("PRECALL", 2),
        Instr("CALL", 2),
        Instr("STORE_FAST", "tmp"),
        Instr("PUSH_NULL"),
        Instr("LOAD_CONST", fn1),
        Instr("LOAD_FAST", "tmp"),
        Instr("LOAD_CONST", 1),
        Instr("LOAD_CONST", 7),
        Instr("KW_NAMES", ("k",)),
        Instr("PRECALL", 3),
        Instr("CALL", 3),
        Instr("LOAD_GLOBAL", (True, "len")),
        Instr("LOAD_FAST", "tmp"),
        Instr("PRECALL", 1),
        Instr("CALL", 1),
        Instr("BUILD_TUPLE", 2),
        Instr("RETURN_VALUE"),
    ]
    f = make(posonly, body, argnames=("a", "b"), extra_varnames=("tmp",))
    assert f(1, 2) == (((1, 2, 0), 1, 7), 3)
    consts = [c for c in f.__code__.co_consts if isinstance(c, Compiled)]
    assert consts[0] is fn0 and consts[1] is fn1
    assert "tmp" in f.__code__.co_varnames


def test_build_reads_free_variable() -> None:
    counter = make_counter(5)
    body = [
        Instr("LOAD_DEREF", FreeVar("count")),
        Instr("LOAD_FAST", "step"),
        Instr("BINARY_OP", 0),
        Instr("RETURN_VALUE"),
    ]
    f = make(counter, body)
    assert f.__code__.co_freevars == ("count",)
    assert f(1) == 6
    counter(10)
    assert f(1) == 16  # the same cell as the template's closure
    # a CellVar given for a free variable is corrected from the template
    g = make(counter, [Instr("LOAD_DEREF", CellVar("count")), Instr("RETURN_VALUE")])
    assert g(0) == 15


def test_build_keeps_argument_cells() -> None:
    # closure_over_arg's `a` and `b` are cells that are also arguments
    assert set(closure_over_arg.__code__.co_cellvars) == {"a", "b"}
    body = [
        Instr("LOAD_DEREF", CellVar("a")),
        Instr("LOAD_DEREF", CellVar("b")),
        Instr("BINARY_OP", 0),
        Instr("STORE_FAST", "s"),
        # build `lambda: a * 10 + b` over the argument cells, as the template's inner function does
        Instr("LOAD_CLOSURE", CellVar("a")),
        Instr("LOAD_CLOSURE", CellVar("b")),
        Instr("BUILD_TUPLE", 2),
        Instr("LOAD_CONST", _inner_code()),
        Instr("MAKE_FUNCTION", 8),
        Instr("STORE_FAST", "inner"),
        Instr("PUSH_NULL"),
        Instr("LOAD_FAST", "inner"),
        Instr("PRECALL", 0),
        Instr("CALL", 0),
        Instr("LOAD_FAST", "s"),
        Instr("BUILD_TUPLE", 2),
        Instr("RETURN_VALUE"),
    ]
    f = make(closure_over_arg, body)
    assert f(3, 4) == (34, 7)
    assert f.__code__.co_cellvars == closure_over_arg.__code__.co_cellvars


def _inner_code() -> types.CodeType:
    def outer(a: int, b: int) -> Callable[[], int]:
        return lambda: a * 10 + b

    return next(c for c in outer.__code__.co_consts if isinstance(c, types.CodeType))


def test_build_varargs_become_positional() -> None:
    body = [
        Instr("LOAD_FAST", "a"),
        Instr("LOAD_FAST", "args"),
        Instr("LOAD_FAST", "kwargs"),
        Instr("BUILD_TUPLE", 3),
        Instr("RETURN_VALUE"),
    ]
    f = make(varargs, body)
    assert f.__code__.co_argcount == 3
    assert not f.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    assert f(1, (2, 3), {"k": 4}) == (1, (2, 3), {"k": 4})


def test_build_generator_template_is_plain_function() -> None:
    f = make(generator_fn, [Instr("LOAD_FAST", "n"), Instr("RETURN_VALUE")])
    assert not f.__code__.co_flags & inspect.CO_GENERATOR
    assert f(3) == 3


def test_build_with_jumps_labels_and_lines() -> None:
    loop, done = Label(), Label()
    body = [
        Instr("LOAD_CONST", 0, lineno=101),
        Instr("STORE_FAST", "acc"),
        Instr("LOAD_GLOBAL", (True, "range")),
        Instr("LOAD_FAST", "n"),
        Instr("PRECALL", 1),
        Instr("CALL", 1),
        Instr("GET_ITER"),
        loop,
        Instr("FOR_ITER", done),
        Instr("LOAD_FAST", "acc"),
        Instr("BINARY_OP", 13),
        Instr("STORE_FAST", "acc"),
        Instr("JUMP_BACKWARD", loop),
        done,
        Instr("LOAD_FAST", "acc"),
        Instr("RETURN_VALUE"),
    ]
    f = make(fib, body, argnames=("n",))
    assert f(5) == 10
    lines = {line for _, _, line in f.__code__.co_lines()}
    assert lines == {fib.__code__.co_firstlineno, 101}


def test_build_rejects_unknown_cell() -> None:
    with pytest.raises(ValueError, match="not a cell or free variable"):
        build_function_code(fib.__code__, [Instr("LOAD_DEREF", CellVar("zz")), Instr("RETURN_VALUE")])
