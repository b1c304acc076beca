"""The names framejit gives to what it generates: compiled graphs, continuations, and the variables of
replacement code. The `___` prefix keeps generated locals apart from any name in user code."""

from __future__ import annotations

import itertools

GRAPH_OUT = "___graph_out"  # the local holding a compiled graph's output tuple
_graphs = itertools.count()
_continuations = itertools.count()


def compiled_fn_name() -> str:
    """`__compiled_fn_<n>`: how a compiled graph shows in listings, logs and explain()."""
    return f"__compiled_fn_{next(_graphs)}"


def resume_fn_name(offset: int) -> str:
    """`__resume_at_<offset>_<n>`: a continuation of a function from the instruction at `offset`."""
    return f"__resume_at_{offset}_{next(_continuations)}"


def stack_arg_name(i: int) -> str:
    """The parameter of a continuation that receives the i-th value of the stack at the break."""
    return f"___stack{i}"


def temp_name(i: int) -> str:
    """The i-th temporary local of a replacement function."""
    return f"___tmp_{i}"
