"""Closure cells during tracing: a box holding a Variable, shared by the functions that close over it."""

from __future__ import annotations

import types
from typing import Any, Callable

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.base import Variable


EMPTY = object()  # the contents of a cell that holds no value yet


class Cell:
    """A cell of the traced code. `load` builds the initial value lazily for cells that live
    outside the trace (closure of the captured function, or of a real function being inlined);
    `on_store` decides what a write means for them (a replayed side effect, or Unsupported)."""

    __slots__ = ("value", "load", "on_store", "rebuilt")

    def __init__(
        self,
        value: Variable | None = None,
        load: Callable[[], Variable] | None = None,
        on_store: Callable[[Variable], None] | None = None,
    ) -> None:
        self.value = value
        self.load = load
        self.on_store = on_store
        self.rebuilt: Variable | None = None  # a cell of an inlined function, made again after the graph

    def get(self) -> Variable:
        if self.value is None and self.load is not None:
            self.value = self.load()
        if self.value is None:
            unsupported("read of an empty closure cell (NameError)", BreakCode.UNBOUND)
        return self.value

    def set(self, value: Variable) -> None:
        if self.on_store is not None:
            self.on_store(value)
        self.value = value


class CellVariable(Variable):
    """What LOAD_CLOSURE pushes: a cell, to be put in a new function's closure."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell

    def python_type(self) -> type:
        return types.CellType

    def __repr__(self) -> str:
        return "CellVariable()"


def outside_cell(tx: Tracer, contents: Any, source: Any, writable_name: str | None, cell_source: Any = None) -> Cell:
    """A cell whose value lives outside the trace: wrapped on first read, writes replayed (into the captured
    frame's free variable `writable_name`, or into the cell object at `cell_source`) or refused."""

    def on_store(value: Variable) -> None:
        if writable_name is not None:
            tx.output.side_effects.store_cell(writable_name, value)
        elif cell_source is not None:
            tx.output.side_effects.store_closure_cell(cell_source, value)
        else:
            unsupported(
                "writing a closure variable of a function whose closure the trace cannot name", BreakCode.CLOSURE_WRITE
            )

    return Cell(load=None if contents is EMPTY else lambda: tx.wrap(contents, source), on_store=on_store)
