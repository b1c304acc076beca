"""Code objects for the frame-hook tests: replacements marked SKIP, as the Python side would make them."""

from __future__ import annotations

import types

from framejit._C import _hook

SKIP = _hook.SKIP


def code_of(src: str, name: str) -> types.CodeType:
    """Compiles `src` and returns the code object named `name`, searching nested consts."""
    todo = [compile(src, f"<{name}>", "exec")]
    while todo:
        code = todo.pop()
        if code.co_name == name:
            return code
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    raise LookupError(name)


def replacement(src: str, name: str) -> types.CodeType:
    """A replacement code object, marked SKIP as the Python side would do."""
    code = code_of(src, name)
    _hook.set_extra(code, SKIP)
    return code


def make_hit_code(nargs: int = 2) -> types.CodeType:
    """A replacement returning ('hit', *its arguments)."""
    params = ", ".join(f"a{i}" for i in range(nargs))
    return replacement(f"def hit({params}):\n    return ('hit', {params})\n", "hit")
