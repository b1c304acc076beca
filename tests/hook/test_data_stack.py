"""Calls on a data-stack chunk of the thread's own: a compiler's (`_hook.call_compiler`, capture off) and a compiled
function's (the outermost `call_with_callback` with a callback). CPython 3.11 maps a 16 KiB chunk when a call needs
one and unmaps it when that call returns, so a loop calling across a chunk's end faults a fresh page in on every
call; framejit's traces, compiles and compiled calls start at the bottom of a roomy chunk instead."""

from __future__ import annotations

import resource
import sys

import pytest

from framejit._C import _hook


def _leaf(a, b, c, d, e, f, g, h):
    return a


def _faults_of_a_loop_at_depth(depth: int, calls: int = 500) -> int:
    if depth:
        return _faults_of_a_loop_at_depth(depth - 1, calls)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(calls):
        _leaf(1, 2, 3, 4, 5, 6, 7, 8)
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def test_a_loop_at_any_depth_maps_no_chunk_per_call() -> None:
    depths = range(200)  # (deeper than one 16 KiB chunk holds of these frames)
    plain = [_faults_of_a_loop_at_depth(d) for d in depths]
    assert max(plain) >= 400, "the chunk boundary this test guards against was not found: CPython changed?"
    compiling = [_hook.call_compiler(_faults_of_a_loop_at_depth, d) for d in depths]
    assert max(compiling) < 50, compiling
    compiled_call = [_hook.call_with_callback(False, _faults_of_a_loop_at_depth, d) for d in depths]
    assert max(compiled_call) < 50, compiled_call


def test_call_compiler_runs_with_capture_off_and_passes_everything_through() -> None:
    seen = []

    def cb(func, args):
        seen.append(func.__name__)

    def inner(a, *, b):
        return _hook.get_callback(), a + b

    def fails():
        raise KeyError("k")

    assert _hook.call_with_callback(cb, _hook.call_compiler, inner, 1, b=2) == (None, 3)
    assert seen == []
    with pytest.raises(KeyError):
        _hook.call_compiler(fails)
    assert _hook.call_compiler(_hook.call_compiler, inner, 2, b=3) == (None, 5)  # nested
    assert _hook.call_with_callback(False, _hook.call_compiler, inner, 3, b=4) == (None, 7)


def test_recursion_deeper_than_the_chunk_unwinds_to_it() -> None:
    def down(n: int) -> int:
        return n if n == 0 else 1 + down(n - 1)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(60_000)
    try:
        assert _hook.call_compiler(down, 40_000) == 40_000  # (several chunks above ours, freed on the way back)
        assert _hook.call_compiler(down, 10) == 10
        assert _hook.call_with_callback(False, down, 6_000) == 6_000  # (hooked calls take C stack too)
    finally:
        sys.setrecursionlimit(limit)


def test_generator_made_inside_resumes_outside() -> None:
    def make():
        def gen():
            x = yield 1
            yield x * 2

        g = gen()
        next(g)
        return g

    g = _hook.call_compiler(make)
    assert g.send(21) == 42


def test_thread_that_ran_on_its_chunk_ends_cleanly() -> None:
    import threading

    t = threading.Thread(target=lambda: _hook.call_with_callback(False, _faults_of_a_loop_at_depth, 3))
    t.start()
    t.join(10)
    assert not t.is_alive()
