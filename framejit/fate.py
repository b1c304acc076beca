"""What became of each graph handed to a backend: which compiler made its code, or which parts of it run as their
own torch ops instead, and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from typing import Iterator


@dataclasses.dataclass
class GraphFate:
    """One graph's record: `compiled_by` names each compiler that made code for it (or a part of it),
    `torch_ops` says why each part that did not runs as its torch ops."""

    backend: str
    compiled_by: list[str] = dataclasses.field(default_factory=list)
    torch_ops: list[str] = dataclasses.field(default_factory=list)
    pieces: list[str] = dataclasses.field(default_factory=list)  # split at DDP's buckets: what each piece holds

    @property
    def fell_back(self) -> bool:
        """Whether some of the graph runs as its torch ops where the backend would have compiled it."""
        return bool(self.torch_ops)

    @property
    def compiled(self) -> bool:
        """Whether all of the graph runs as the backend's code."""
        return bool(self.compiled_by) and not self.torch_ops

    def __str__(self) -> str:
        if self.pieces:
            return f"{self._compiled()}; in {len(self.pieces)} pieces at DDP's buckets ({', '.join(self.pieces)})"
        return self._compiled()

    def _compiled(self) -> str:
        if not self.torch_ops:
            return f"compiled by {', '.join(dict.fromkeys(self.compiled_by)) or self.backend}"
        reasons = "; ".join(dict.fromkeys(self.torch_ops))
        if not self.compiled_by:
            return f"runs as torch ops, not compiled by {self.backend}: {reasons}"
        return (
            f"{len(self.compiled_by)} part(s) compiled by {', '.join(dict.fromkeys(self.compiled_by))}, "
            f"{len(self.torch_ops)} run as torch ops: {reasons}"
        )


_local = threading.local()
_log = logging.getLogger("framejit.backends")


@contextlib.contextmanager
def recording(backend: str) -> Iterator[GraphFate]:
    """Collect what the backend reports while it compiles one graph (nested recordings each get their own)."""
    outer = getattr(_local, "fate", None)
    _local.fate = fate = GraphFate(backend)
    try:
        yield fate
    finally:
        _local.fate = outer


def compiled_by(compiler: str) -> None:
    """A compiler made code for the graph being compiled (or for one of its parts)."""
    fate = getattr(_local, "fate", None)
    if fate is not None:
        fate.compiled_by.append(compiler)


def ran_as_torch_ops(reason: str) -> None:
    """The graph being compiled (or one of its parts) runs as its own torch ops, for `reason`."""
    _log.info("a graph runs as its torch ops: %s", reason)
    fate = getattr(_local, "fate", None)
    if fate is not None:
        fate.torch_ops.append(reason)


def adopt(record: GraphFate) -> None:
    """Report what `record` (a recording of another backend's compile of this graph) found, as this one's."""
    fate = getattr(_local, "fate", None)
    if fate is not None:
        fate.compiled_by += record.compiled_by
        fate.torch_ops += record.torch_ops
