"""Functions user code calls to talk to the compiler: graph_break() and is_compiling(). Eagerly they do nothing
and answer False; the trace recognises them (policy.py) and never calls them."""

from __future__ import annotations


def graph_break(msg: str = "") -> None:
    """A graph break here: the graph so far runs, then the rest of the frame is captured again. Under
    fullgraph=True it is an error naming this call; `msg` is added to the recorded reason. Eagerly: nothing."""


def is_compiling() -> bool:
    """True in code framejit traces (answered at trace time, so a branch on it is folded), False eagerly."""
    return False
