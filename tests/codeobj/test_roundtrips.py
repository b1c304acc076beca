"""framejit.codeobj.roundtrip over the corpus: the code object comes back the same and behaves the same."""

from __future__ import annotations

import dis
import types
from typing import Callable

import pytest
from bytecode import Instr

from framejit.codeobj import build_function_code, exception_table, read_instructions, roundtrip

from tests.codeobj import corpus
from tests.codeobj.corpus import CORPUS, CORPUS_IDS, fib, nested_try, outcome, raise_from, with_block


def deep_roundtrip(code: types.CodeType) -> types.CodeType:
    """Round trip `code` and every code object nested in its constants."""
    consts = tuple(deep_roundtrip(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return roundtrip(code.replace(co_consts=consts))


def rebuild(fn: Callable, code: types.CodeType) -> Callable:
    """A function like `fn` running `code`, with its own copies of `fn`'s closure cells."""
    closure = None if fn.__closure__ is None else tuple(types.CellType(c.cell_contents) for c in fn.__closure__)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


def merged_lines(code: types.CodeType) -> list[tuple[int, int, int | None]]:
    """co_lines with adjacent ranges of one line merged (the line table may split them differently)."""
    out: list[tuple[int, int, int | None]] = []
    for start, end, line in code.co_lines():
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def _code_key(code: types.CodeType) -> tuple:
    return (code.co_qualname, code.co_firstlineno, next(code.co_positions()))


def _norm(value: object) -> object:
    """A comparable stand-in for an instruction argument (nested code objects by identity of source)."""
    return ("code",) + _code_key(value) if isinstance(value, types.CodeType) else (type(value), value)


def assert_same_code(a: types.CodeType, b: types.CodeType) -> None:
    """Equal but for co_consts: bytecode numbers constants by first use and drops unused ones
    (CPython keeps the parts of folded constants, e.g. the names of an annotations tuple)."""
    for attr in (
        "co_exceptiontable",
        "co_varnames",
        "co_cellvars",
        "co_freevars",
        "co_names",
        "co_flags",
        "co_argcount",
        "co_posonlyargcount",
        "co_kwonlyargcount",
        "co_nlocals",
        "co_stacksize",
        "co_name",
        "co_qualname",
        "co_filename",
        "co_firstlineno",
    ):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert len(a.co_code) == len(b.co_code)
    steps_a = [(i.opname, i.offset, _norm(i.argval)) for i in dis.get_instructions(a, show_caches=True)]
    steps_b = [(i.opname, i.offset, _norm(i.argval)) for i in dis.get_instructions(b, show_caches=True)]
    assert steps_a == steps_b
    assert list(a.co_positions()) == list(b.co_positions())
    assert merged_lines(a) == merged_lines(b)
    assert {repr(_norm(c)) for c in b.co_consts} <= {repr(_norm(c)) for c in a.co_consts}
    assert [_norm(c) for c in a.co_consts[:1]] == [_norm(c) for c in b.co_consts[:1]]  # the docstring slot
    nested_a = sorted((c for c in a.co_consts if isinstance(c, types.CodeType)), key=_code_key)
    nested_b = sorted((c for c in b.co_consts if isinstance(c, types.CodeType)), key=_code_key)
    for ca, cb in zip(nested_a, nested_b, strict=True):
        assert_same_code(ca, cb)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_roundtrip_keeps_code(fn: Callable, calls: list) -> None:
    assert_same_code(fn.__code__, roundtrip(fn.__code__))
    assert_same_code(fn.__code__, deep_roundtrip(fn.__code__))


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_roundtrip_behaves_the_same(fn: Callable, calls: list) -> None:
    for code in (roundtrip(fn.__code__), deep_roundtrip(fn.__code__)):
        new = rebuild(fn, code)
        for call in calls:
            corpus.COUNTER = 0  # global_write's counter
            expected = outcome(fn, call)
            corpus.COUNTER = 0
            assert outcome(new, call) == expected, call


def test_corpus_is_broad() -> None:
    assert len(CORPUS) >= 25
    opnames = set()
    for fn, _ in CORPUS:
        stack = [fn.__code__]
        while stack:
            code = stack.pop()
            opnames |= {inst.opname for inst in read_instructions(code)}
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    for needed in (
        "FOR_ITER",
        "SEND",
        "PUSH_EXC_INFO",
        "BEFORE_WITH",
        "MAKE_CELL",
        "COPY_FREE_VARS",
        "MATCH_SEQUENCE",
        "PREP_RERAISE_STAR",
        "EXTENDED_ARG",
        "RETURN_GENERATOR",
        "JUMP_IF_FALSE_OR_POP",
        "LOAD_CLASSDEREF",
        "FORMAT_VALUE",
    ):
        assert needed in opnames, needed


def test_roundtrip_catches_in_the_right_handler() -> None:
    new = rebuild(nested_try, roundtrip(nested_try.__code__))
    assert new("key") == "outer-key finally-ran"  # raised in the inner try, caught by the outer one
    assert new("value") == "inner-key 'missing'"  # caught inside the inner handler
    assert new("x") == "inner-key 'missing'"
    assert new("12") == 12
    assert rebuild(raise_from, roundtrip(raise_from.__code__))(0) == "wrapped <- ZeroDivisionError"
    with_new = rebuild(with_block, roundtrip(with_block.__code__))
    assert with_new(2) == ["enter", True, ("exit", "KeyError"), "after"]  # __exit__ swallowed it
    with pytest.raises(TypeError):
        with_new([])  # __exit__ lets it through
    assert exception_table(new.__code__) == exception_table(nested_try.__code__)


def test_roundtrip_keeps_unmergeable_constants_by_identity() -> None:
    a, b = [1], [1]
    body = [Instr("LOAD_CONST", a), Instr("LOAD_CONST", b), Instr("BUILD_TUPLE", 2), Instr("RETURN_VALUE")]
    code = roundtrip(build_function_code(fib.__code__, body, argnames=()))
    got = types.FunctionType(code, {})()
    assert got[0] is a and got[1] is b
