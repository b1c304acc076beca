"""Code objects for CPython 3.11 as instruction lists and back."""

from __future__ import annotations

import sys

if sys.version_info[:2] != (3, 11):
    raise ImportError(f"framejit supports CPython 3.11 only, not {sys.version.split()[0]}")

from framejit.codeobj.assemble import arg_slot_names, build_function_code, roundtrip
from framejit.codeobj.listing import format_code
from framejit.codeobj.liveness import live_locals_at, live_locals_table
from framejit.codeobj.names import GRAPH_OUT, compiled_fn_name, resume_fn_name, stack_arg_name, temp_name
from framejit.codeobj.reading import (
    ExceptionEntry,
    Inst,
    exception_table,
    offset_to_index,
    read_instructions,
)
from framejit.codeobj.resume import (
    build_resume_code,
    code_label,
    is_continuation,
    original_code,
    original_location,
    own_cells,
    passed_cells,
    resume_parameters,
)
from framejit.codeobj.break_instruction import forward_jump, leaves_null_below, reemit, stack_inputs

__all__ = [
    "GRAPH_OUT",
    "ExceptionEntry",
    "Inst",
    "arg_slot_names",
    "build_function_code",
    "build_resume_code",
    "compiled_fn_name",
    "exception_table",
    "format_code",
    "forward_jump",
    "code_label",
    "is_continuation",
    "leaves_null_below",
    "live_locals_at",
    "live_locals_table",
    "offset_to_index",
    "original_code",
    "original_location",
    "own_cells",
    "passed_cells",
    "read_instructions",
    "reemit",
    "resume_fn_name",
    "resume_parameters",
    "roundtrip",
    "stack_arg_name",
    "stack_inputs",
    "temp_name",
]
