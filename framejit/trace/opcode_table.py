"""The opcode table: handlers declare the opcodes they handle, and the translator builds its table from them.

A handler is a method named after its opcode (or opcode family) on one of the translator's handler classes
(ops_basic, ops_data, ops_call, ops_flow); `@handles` checks each name against `dis.opmap` at import.
"""

from __future__ import annotations

import dis
import sys
from typing import Any, Callable, TypeVar

Handler = Callable[[Any, Any], None]  # handler(translator, instruction)
H = TypeVar("H", bound=Handler)


def handles(*opnames: str) -> Callable[[H], H]:
    """Mark a method as the handler of these opcodes, named exactly as in `dis.opmap`."""

    def mark(fn: H) -> H:
        for name in opnames:
            if name not in dis.opmap:
                raise AssertionError(f"no opcode named {name} in CPython {sys.version_info[:2]}")
        fn.opnames = opnames  # type: ignore[attr-defined]
        return fn

    return mark


def build_table(classes: tuple[type, ...]) -> list[Handler | None]:
    """The handler of each opcode number, from the marked methods of `classes` (one handler per opcode)."""
    table: list[Handler | None] = [None] * 256
    for cls in classes:
        for fn in vars(cls).values():
            for name in getattr(fn, "opnames", ()):
                if table[dis.opmap[name]] is not None:
                    raise AssertionError(f"two handlers for opcode {name}")
                table[dis.opmap[name]] = fn
    return table
