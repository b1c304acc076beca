"""Where an exception raised while a compiled graph ran came from in the user's code."""

from __future__ import annotations

import dis
import types
import weakref

import torch

from framejit.codeobj import GRAPH_OUT

_MARK = "framejit: the compiled graph raised this"
# id(replacement code) -> (a weak reference to it, the user lines its graph's ops were traced from), for backends
# whose code is not FX's. By id: code objects hash and compare by value (and a dict constant is unhashable).
_GRAPH_LINES: dict[int, tuple[weakref.ref, tuple[str, ...]]] = {}


def remember_graph_lines(code: types.CodeType, graphs: list[torch.fx.GraphModule]) -> None:
    """`code` calls these graphs: keep the user lines of their ops, for a note if one raises."""
    lines = dict.fromkeys(n.meta["stack_trace"] for gm in graphs for n in gm.graph.nodes if n.meta.get("stack_trace"))
    if lines:
        key = id(code)
        _GRAPH_LINES[key] = (weakref.ref(code, lambda _: _GRAPH_LINES.pop(key, None)), tuple(lines))


def _graph_lines(code: types.CodeType) -> tuple[str, ...] | None:
    ref, lines = _GRAPH_LINES.get(id(code), (None, None))
    return lines if ref is not None and ref() is code else None


def add_user_line_note(exc: BaseException) -> None:
    """If `exc` was raised by a graph op, note the user's file and line that op was traced from."""
    if any(note.startswith(_MARK) for note in getattr(exc, "__notes__", ())):
        return
    where = graph_lines = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost graph frame names the op: AOTAutograd's graphs keep the stack traces
        where = _traced_from(tb.tb_frame, tb.tb_lineno) or where
        lines = _graph_lines(tb.tb_frame.f_code)
        if lines and _calls_graph(tb.tb_frame.f_code, tb.tb_lasti):
            graph_lines = lines
        tb = tb.tb_next
    if where:
        exc.add_note(f"{_MARK} at an op traced from:\n{where.rstrip()}")
    elif graph_lines:
        exc.add_note(f"{_MARK}; its ops were traced from:\n" + "".join(graph_lines).rstrip())


def _traced_from(frame: types.FrameType, lineno: int) -> str | None:
    """The stack trace recorded on the FX node that generated code line `lineno` of `frame` runs, if any."""
    if not frame.f_code.co_filename.startswith("<eval_with_key>"):
        return None
    gm = frame.f_locals.get("self")
    lines = getattr(gm, "_lineno_map", None)
    if not isinstance(gm, torch.fx.GraphModule) or not lines:
        return None
    index = lines.get(lineno - frame.f_code.co_firstlineno)
    if index is None:
        return None
    nodes = list(gm.graph.nodes)
    return nodes[index].meta.get("stack_trace") if 0 <= index < len(nodes) else None


def _calls_graph(code: types.CodeType, lasti: int) -> bool:
    """Whether instruction `lasti` of replacement code is its call of the compiled graph (the one whose result
    it stores in GRAPH_OUT), rather than a Python part of the frame."""
    instructions = list(dis.get_instructions(code))
    for here, after in zip(instructions, instructions[1:]):
        if here.offset == lasti:
            return after.opname == "STORE_FAST" and after.argval == GRAPH_OUT
    return False
