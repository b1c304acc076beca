"""The memory-checker job (tests/memcheck/run_memcheck.py) as tests: CI runs its `debug` variant (the C-extension
tests under CPython's debug allocator and -X dev) and needs it clean; the job's own detection is checked on a
planted corruption, and its reading of valgrind logs on a sample."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.memcheck import run_memcheck

SCRIPT = run_memcheck.ROOT / "tests" / "memcheck" / "run_memcheck.py"

PLANTED = textwrap.dedent("""
    import ctypes

    def test_writes_past_a_pymem_block():
        malloc, free = ctypes.pythonapi.PyMem_Malloc, ctypes.pythonapi.PyMem_Free
        malloc.restype, malloc.argtypes, free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
        block = malloc(8)
        ctypes.memset(block, 0, 16)  # 8 bytes into the debug allocator's trailing guard
        free(block)
""")


def test_the_debug_variant_reports_a_write_past_a_block(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text(PLANTED)
    outcome = run_memcheck.run_debug([str(planted)], timeout=300)
    assert not outcome.clean
    assert outcome.returncode is not None and outcome.returncode < 0  # the interpreter aborted
    assert any("are not all FORBIDDENBYTE" in f for f in outcome.findings), outcome.report()


@pytest.mark.slow
def test_the_c_extension_tests_run_clean_under_the_debug_allocator():
    """About a minute: tests/hook, tests/guards, calls of 255+ arguments, the 300-parameter DenseNet called 100
    times and the continuation tests, under PYTHONMALLOC=debug python -X dev, in a subprocess."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "debug"],
        cwd=run_memcheck.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-8000:]
    (summary,) = [line for line in proc.stdout.splitlines() if line.startswith("== debug:")]
    assert summary.startswith("== debug: clean (exit 0") and " passed" in summary and "failed" not in summary, summary


SAMPLE_LOG = """\
==7== Memcheck, a memory error detector
==7== Command: /usr/bin/python3.11 -m pytest tests/hook
==7== 
==7== Conditional jump or move depends on uninitialised value(s)
==7==    at 0x49D80C0: maybe_small_long (longobject.c:71)
==7==    by 0x49E0343: _PyLong_FromByteArray (longobject.c:922)
==7== 
==7== Invalid read of size 8
==7==    at 0x5A1B2C3: lookup (hook.c:300)
==7==    by 0x5A1B3D4: eval_hooked (hook.c:392)
==7==  Address 0x1234 is 8 bytes inside a block of size 64 free'd
==7==    at 0x48417B4: free (vg_replace_malloc.c:872)
==7== 
==7== Use of uninitialised value of size 8
==7==    at 0x49AA61C: Py_INCREF (object.h:502)
==7==    by 0x494F9C2: _PyEval_EvalFrameDefault (ceval.c:4769)
==7==    by 0x4AA2A3F: _PyEval_Vector (ceval.c:6434)
==7==    by 0x49AABA2: PyObject_Vectorcall (call.c:299)
==7==    by 0x5A1B3D4: eval_hooked (hook.c:411)
==7== 
==7== Invalid write of size 4
==7==    at 0x4C2B1A0: memset (vg_replace_strmem.c:1386)
==7==    by 0x4C2B1A0: PyList_New (listobject.c:168)
==7==  Address 0x5678 is 0 bytes after a block of size 16 alloc'd
==7==    at 0x48417B4: malloc (vg_replace_malloc.c:381)
==7==    by 0x5B00AA0: make_spec (tensor_guard.cpp:88)
==7== 
==7== ERROR SUMMARY: 4 errors from 4 contexts (suppressed: 0 from 0)
"""


def test_valgrind_errors_are_framejits_when_its_code_is_among_the_innermost_frames():
    errors = run_memcheck.valgrind_errors(SAMPLE_LOG)
    assert [e[0] for e in errors] == [
        "Conditional jump or move depends on uninitialised value(s)",
        "Invalid read of size 8",
        "Use of uninitialised value of size 8",
        "Invalid write of size 4",
    ]
    # CPython's own; in the hook's code; CPython's, only run under the hook (4 frames down); a block make_spec
    # allocated, overrun elsewhere
    assert [run_memcheck.ours(e) for e in errors] == [False, True, False, True]
