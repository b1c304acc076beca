"""A dis-like listing of a code object, with named constants, for debug output.

Reads like TorchDynamo's MODIFIED BYTECODE: a compiled graph held in a LOAD_CONST
shows as `__compiled_fn_0` rather than as its repr.
"""

from __future__ import annotations

import types

from framejit.codeobj.reading import dis_instructions, exception_table, safe_repr


def format_code(code: types.CodeType, *, const_names: dict[int, str] | None = None) -> str:
    """One line per instruction (no CACHE entries): line, `>>` on jump targets, offset, opname, arg, (argval).

    As in `dis.dis`, exception except_targets count as jump targets.
    `const_names` maps id(constant) to the name shown for it. No header line.
    """
    names = const_names or {}

    def const_repr(obj: object) -> str:
        return names[id(obj)] if id(obj) in names else safe_repr(obj)

    except_targets = {entry.target for entry in exception_table(code)}
    lines = []
    for ins in dis_instructions(code, const_repr):
        fields = [
            f"{ins.starts_line:>4}" if ins.starts_line is not None else " " * 4,
            ">>" if ins.is_jump_target or ins.offset in except_targets else "  ",
            f"{ins.offset:>4}",
            f"{ins.opname:<24}",
        ]
        if ins.arg is not None:
            fields.append(f"{ins.arg:>4}")
            if ins.argrepr:
                fields.append(f"({ins.argrepr})")
        lines.append(" ".join(fields).rstrip())
    return "\n".join(lines)
