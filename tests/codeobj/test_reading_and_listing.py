"""Reading instructions (read_instructions, offset_to_index), exception tables and format_code."""

from __future__ import annotations

import dis
from typing import Callable

import pytest
from bytecode import Instr

from framejit.codeobj import (
    ExceptionEntry,
    Inst,
    build_function_code,
    exception_table,
    format_code,
    offset_to_index,
    read_instructions,
)

from tests.codeobj.corpus import CORPUS, CORPUS_IDS, fib, for_else, generator_fn, try_except_else_finally, walrus_chain


# ---------------------------------------------------------------- reading and listing


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_read_instructions_matches_dis(fn: Callable, calls: list) -> None:
    code = fn.__code__
    insts = read_instructions(code)
    raw = list(dis.get_instructions(code))
    assert [i.offset for i in insts] == [r.offset for r in raw]
    assert all(i.opname != "CACHE" for i in insts)
    index = offset_to_index(insts)
    line = code.co_firstlineno
    for inst, r in zip(insts, raw):
        assert (inst.opname, inst.opcode, inst.arg, inst.starts_line) == (r.opname, r.opcode, r.arg, r.starts_line)
        line = r.starts_line if r.starts_line is not None else line
        assert inst.lineno == line
        if r.opcode in dis.hasjrel or r.opcode in dis.hasjabs:
            assert inst.target_index == index[r.argval]
            assert insts[inst.target_index].is_jump_target
        else:
            assert inst.target_index is None


def test_target_index_by_jump_kind() -> None:
    insts = read_instructions(for_else.__code__)
    by_name = {i.opname: i for i in insts}
    for_iter = by_name["FOR_ITER"]
    back = [i for i in insts if i.opname == "JUMP_BACKWARD"]
    assert back and all(insts[i.target_index] is for_iter for i in back)
    # FOR_ITER exits to the `else` clause: the instruction after the loop's last JUMP_BACKWARD
    assert for_iter.target_index == max(offset_to_index(insts)[b.offset] for b in back) + 1
    cond = by_name["POP_JUMP_FORWARD_IF_FALSE"]
    assert insts[cond.target_index].offset == cond.argval > cond.offset
    gen = read_instructions(generator_fn.__code__)
    sends = [i for i in gen if i.opname == "SEND"]
    assert sends and all(gen[i.target_index].offset == i.argval > i.offset for i in sends)
    walrus = read_instructions(walrus_chain.__code__)
    short = [i for i in walrus if i.opname == "JUMP_IF_FALSE_OR_POP"]
    assert short and all(walrus[i.target_index].offset == i.argval for i in short)


def test_inst_is_frozen_slots() -> None:
    inst = read_instructions(fib.__code__)[0]
    assert isinstance(inst, Inst) and inst.opname == "RESUME"
    with pytest.raises(AttributeError):
        inst.opname = "NOP"  # type: ignore[misc]
    assert not hasattr(inst, "__dict__")


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_exception_table_matches_dis(fn: Callable, calls: list) -> None:
    expected = [
        ExceptionEntry(start=e.start, end=e.end, target=e.target, depth=e.depth, lasti=e.lasti)
        for e in dis._parse_exception_table(fn.__code__)
    ]
    assert exception_table(fn.__code__) == expected


def test_exception_table_ranges() -> None:
    entries = exception_table(try_except_else_finally.__code__)
    offsets = {i.offset: i for i in read_instructions(try_except_else_finally.__code__)}
    div = next(i for i in offsets.values() if i.opname == "BINARY_OP" and i.argval == 11)
    covering = [e for e in entries if e.covers(div.offset)]
    assert len(covering) == 1 and covering[0].depth == 0 and not covering[0].lasti
    assert offsets[covering[0].target].opname == "PUSH_EXC_INFO"
    assert exception_table(fib.__code__) == []


def test_format_code_names_constants() -> None:
    compiled = lambda x: x  # noqa: E731 - stands in for a compiled graph
    body = [
        Instr("PUSH_NULL"),
        Instr("LOAD_CONST", compiled),
        Instr("LOAD_FAST", "n"),
        Instr("PRECALL", 1),
        Instr("CALL", 1),
        Instr("RETURN_VALUE"),
    ]
    code = build_function_code(fib.__code__, body)
    text = format_code(code, const_names={id(compiled): "__compiled_fn_0"})
    lines = text.splitlines()
    assert len(lines) == len(read_instructions(code))
    assert "CACHE" not in text and "<lambda>" not in text
    call = next(line for line in lines if "LOAD_CONST" in line)
    assert call.rstrip().endswith("(__compiled_fn_0)")
    assert str(fib.__code__.co_firstlineno) in lines[0] and "RESUME" in lines[0]
    assert "(n)" in text
    assert "<lambda>" in format_code(code)


def test_format_code_marks_jump_targets() -> None:
    text = format_code(for_else.__code__)
    insts = read_instructions(for_else.__code__)
    handlers = {e.target for e in exception_table(for_else.__code__)}
    for line, inst in zip(text.splitlines(), insts):
        assert (">>" in line) == (inst.is_jump_target or inst.offset in handlers)
        assert inst.opname in line and str(inst.offset) in line
    assert "(to " in text


def test_format_code_survives_bad_repr() -> None:
    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    code = build_function_code(fib.__code__, [Instr("LOAD_CONST", Bad()), Instr("RETURN_VALUE")])
    assert "Bad instance" in format_code(code)
    assert isinstance(read_instructions(code)[1].argval, Bad)
