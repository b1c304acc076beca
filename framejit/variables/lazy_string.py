"""A string formatted from tensors (an error message built before a check: f"got {n_tokens}"): its text needs the
tensors' values, which the trace does not have. It stays unformatted; reading it as a value is data-dependent (a
graph break), and if it outlives the graph it is formatted then, from the graph's outputs, as eager formats it."""

from __future__ import annotations

from framejit.contracts import Emitter, Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable

_CONVERSIONS = {0: "", 1: "!s", 2: "!r", 3: "!a"}


class LazyStringVariable(Variable):
    """The pieces of an f-string: constant text, or (value, FORMAT_VALUE flags, format spec) for a tensor."""

    def __init__(self, parts: list[str | tuple[Variable, int, str]]) -> None:
        self.parts = parts

    @classmethod
    def formatted(cls, value: Variable, flags: int, spec: str) -> "LazyStringVariable":
        return cls([(value, flags & 3, spec)])

    @classmethod
    def join(cls, pieces: list[Variable]) -> "LazyStringVariable":
        parts: list[str | tuple[Variable, int, str]] = []
        for piece in pieces:
            parts.extend(piece.parts if isinstance(piece, LazyStringVariable) else [piece.as_python_constant()])
        return cls(parts)

    def python_type(self) -> type:
        return str

    def as_python_constant(self) -> str:
        unsupported("a string formatted from a tensor is read: it needs the tensor's data", BreakCode.DATA_DEPENDENT)

    def truth(self, tx: Tracer) -> bool:
        return True  # a tensor's text is never empty

    def children(self) -> list[Variable]:
        return [p[0] for p in self.parts if isinstance(p, tuple)]

    def rebuild(self, cg: Emitter) -> None:
        """The f-string's own bytecode, over the values after the graph."""
        for part in self.parts:
            if isinstance(part, str):
                cg.emit_const(part)
                continue
            value, conversion, spec = part
            cg.load(value)
            if spec:
                cg.emit_const(spec)
            cg.emit("FORMAT_VALUE", conversion | (4 if spec else 0))
        cg.emit("BUILD_STRING", len(self.parts))

    def __repr__(self) -> str:
        return (
            "LazyStringVariable("
            + "".join(p if isinstance(p, str) else "{" + repr(p[0]) + _CONVERSIONS[p[1]] + "}" for p in self.parts)
            + ")"
        )
