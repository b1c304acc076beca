"""framejit.codeobj.live_locals_at / live_locals_table: which locals are live at each instruction."""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterator

import pytest

from framejit.codeobj import live_locals_at, live_locals_table, offset_to_index, read_instructions

from tests.codeobj.corpus import CORPUS, CORPUS_IDS, closure_over_arg, make_counter, outcome


# ---------------------------------------------------------------- liveness


def _offset(fn: Callable, opname: str, argval: Any = None, nth: int = 0) -> int:
    hits = [
        i.offset
        for i in read_instructions(fn.__code__)
        if i.opname == opname and (argval is None or i.argval == argval)
    ]
    return hits[nth]


def live_example(a: int, b: int) -> int:
    x = a + 1
    total = 0
    for i in range(b):
        total += i
    unused = 3
    return total + x + unused


def live_in_handler(a: int) -> int:
    fallback = a * 2
    try:
        r = 10 // a
    except ZeroDivisionError:
        return fallback
    return r


def test_live_written_before_use_is_not_live() -> None:
    code = live_example.__code__
    assert live_locals_at(code, 0) == {"a", "b"}
    start_loop = _offset(live_example, "FOR_ITER")
    live = live_locals_at(code, start_loop)
    assert {"total", "x"} <= live and "i" not in live and "unused" not in live and "a" not in live
    assert live_locals_at(code, _offset(live_example, "STORE_FAST", "unused")) == {"total", "x"}


def test_live_used_after_loop_is_live_inside_loop() -> None:
    body_load = _offset(live_example, "LOAD_FAST", "total")
    assert live_locals_at(live_example.__code__, body_load) == {"x", "total", "i"}
    # `total` is on the stack by the time `i` is loaded, and is written next
    assert live_locals_at(live_example.__code__, _offset(live_example, "LOAD_FAST", "i")) == {"x", "i"}


def test_live_read_in_handler_is_live_in_try() -> None:
    code = live_in_handler.__code__
    div = _offset(live_in_handler, "BINARY_OP", nth=1)
    assert live_locals_at(code, div) == {"fallback"}
    # after the try body the handler can no longer run: only `r` is needed
    ret = _offset(live_in_handler, "LOAD_FAST", "r")
    assert live_locals_at(code, ret) == {"r"}


def test_live_cells_and_free_vars() -> None:
    code = closure_over_arg.__code__
    assert live_locals_at(code, 0) == {"a", "b"}  # MAKE_CELL reads the argument slots
    counter = make_counter(0).__code__
    assert live_locals_at(counter, _offset(make_counter(0), "RESUME")) == {"step", "count"}


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_live_is_sound_on_straight_reads(fn: Callable, calls: list) -> None:
    # every local read by an instruction is live at that instruction
    code = fn.__code__
    table = live_locals_table(code)
    insts = read_instructions(code)
    assert set(table) == {inst.offset for inst in insts}
    for inst in insts:
        if inst.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
            assert inst.argval in table[inst.offset]
    assert live_locals_at(code, insts[-1].offset) == table[insts[-1].offset]
    with pytest.raises(ValueError):
        live_locals_at(code, 1)


def _all_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_codes(const)


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_live_over_approximates_dynamic_reads(fn: Callable, calls: list) -> None:
    # Run with opcode tracing. On each frame's executed path, a local read after an
    # instruction, with no write to it in between, must be live at that instruction.
    codes = set(_all_codes(fn.__code__))
    paths: dict[types.FrameType, list[int]] = {}

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            if event == "opcode":
                paths.setdefault(frame, []).append(frame.f_lasti)
        return tracer

    for call in calls:
        sys.settrace(tracer)
        try:
            outcome(fn, call)
        finally:
            sys.settrace(None)
    assert paths
    for frame, offsets in paths.items():
        code = frame.f_code
        insts = read_instructions(code)
        index = offset_to_index(insts)
        live_at = live_locals_table(code)
        read_later: set[str] = set()  # read on the rest of this path before any write
        for inst in reversed([insts[index[o]] for o in offsets]):
            if inst.opname == "STORE_FAST":
                read_later.discard(inst.argval)
            if inst.opname in ("LOAD_FAST", "LOAD_DEREF"):
                read_later.add(inst.argval)
            assert read_later <= live_at[inst.offset], (code.co_qualname, inst.offset)
