"""Bytecode for the transformed function: call the compiled graph, rebuild Python values, replay writes, and run
the frame again as Python where the graph raises (`as_eager/rerun.py`)."""

from __future__ import annotations

import contextlib
import types
import weakref
from typing import Any, Callable, Iterator

from bytecode import CellVar, Instr, Label, TryBegin, TryEnd

from framejit._C import _hook
from framejit.as_eager.rerun import run_as_python
from framejit.codeobj import GRAPH_OUT, arg_slot_names, passed_cells, temp_name
from framejit.variables.base import Variable

_NO_ARG = object()
# CPython 3.11's specialised PRECALL for C functions skips the CALL after it by a fixed length, so an EXTENDED_ARG
# in front of that CALL sends the interpreter into CALL's inline cache: more arguments than fit in one byte go as a
# tuple (CALL_FUNCTION_EX), as CPython's own compiler passes them
MAX_CALL_ARGS = 255


class PyCodegen:
    """Emits instructions that leave a Variable's real value on the stack.

    Tensors computed by the graph come from its output tuple (`output_index`);
    values with a source are reloaded from it; containers made during the trace
    are rebuilt (once: mutable ones are kept in a temporary so identity holds).
    """

    def __init__(
        self,
        output_index: dict[int, int],
        cell_names: frozenset[str] = frozenset(),
        root_cells: dict[int, str] | None = None,
    ) -> None:
        self.output_index = output_index
        self.cell_names = cell_names  # the frame's cellvars (arguments among them are cells)
        self.root_cells = root_cells or {}  # id(trace Cell) -> name of that cell in the frame
        self.instructions: list[Instr] = []
        self.temps: list[str] = []
        self._built: dict[int, str] = {}
        self._pinned: dict[int, str] = {}  # id(var) -> the temporary its source was loaded into (pin)
        self._shared: dict[str, str] | None = None  # while loading a graph's inputs: expensive loads, by name

    @contextlib.contextmanager
    def sharing_loads(self) -> Iterator[None]:
        """Within: a load that asks to be shared (`shared`) is made once, into a temporary; no user code runs
        between the loads (a graph's inputs), so what they read cannot change."""
        self._shared = {}
        try:
            yield
        finally:
            self._shared = None

    def shared(self, key: str, emit: Callable[[], None]) -> None:
        """Emit `emit`'s load, or, within sharing_loads, reload what it loaded the first time."""
        if self._shared is None:
            emit()
        elif key in self._shared:
            self.emit("LOAD_FAST", self._shared[key])
        else:
            emit()
            self.emit("COPY", 1)
            self._shared[key] = self.new_temp()
            self.emit("STORE_FAST", self._shared[key])

    def emit(self, opname: str, arg: Any = _NO_ARG) -> None:
        if opname in ("LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE") and isinstance(arg, str):
            arg = CellVar(arg)  # build_function_code turns it into a FreeVar where the name is free
        self.instructions.append(Instr(opname) if arg is _NO_ARG else Instr(opname, arg))

    def emit_const(self, value: Any) -> None:
        self.instructions.append(Instr("LOAD_CONST", value))

    def call(self, nargs: int, kw_names: tuple[str, ...] = ()) -> None:
        """Call the callable below `nargs` values, the last `len(kw_names)` of them by keyword. Past
        MAX_CALL_ARGS the callable must sit on a NULL (PUSH_NULL, not LOAD_METHOD), as this module emits it."""
        if nargs <= MAX_CALL_ARGS:
            if kw_names:
                self.emit("KW_NAMES", tuple(kw_names))
            self.emit("PRECALL", nargs)
            self.emit("CALL", nargs)
            return
        if kw_names:
            self.emit_const(tuple(kw_names))
            self.emit("BUILD_CONST_KEY_MAP", len(kw_names))
            kwargs = self.new_temp()
            self.emit("STORE_FAST", kwargs)
        self.emit("BUILD_TUPLE", nargs - len(kw_names))
        if kw_names:
            self.emit("LOAD_FAST", kwargs)
        self.emit("CALL_FUNCTION_EX", int(bool(kw_names)))

    def load_method(self, name: str, nargs: int) -> None:
        """`obj.name` for a call of `nargs` arguments, `obj` on the stack: LOAD_METHOD, or the bound method on a
        NULL where `call` needs that layout."""
        if nargs <= MAX_CALL_ARGS:
            self.emit("LOAD_METHOD", name)
        else:
            self.emit("LOAD_ATTR", name)
            self.emit("PUSH_NULL")
            self.emit("SWAP", 2)

    def new_temp(self) -> str:
        name = temp_name(len(self.temps))
        self.temps.append(name)
        return name

    def store_temp(self, produce: Callable[[], None]) -> str:
        produce()
        name = self.new_temp()
        self.emit("STORE_FAST", name)
        return name

    def pin(self, var: Variable) -> None:
        """Load `var` from its source now, into a temporary that later loads use: the replayed writes about to
        follow may change what the source's path reads (`kwargs.pop(k)` before a write to `kwargs[k]`'s object)."""
        if var.source is not None and id(var) not in self._pinned:
            var.source.reconstruct(self)
            self._pinned[id(var)] = self.new_temp()
            self.emit("STORE_FAST", self._pinned[id(var)])

    def load_source(self, var: Variable) -> None:
        """`var` as its source gives it (or gave it when pinned)."""
        if id(var) in self._pinned:
            self.emit("LOAD_FAST", self._pinned[id(var)])
        else:
            var.source.reconstruct(self)

    def load(self, var: Variable) -> None:
        if id(var) in self.output_index:
            numpy_type = getattr(var, "numpy_type", None)  # a number the graph computed, held as a numpy scalar
            if numpy_type is not None:
                self.emit("PUSH_NULL")
                self.emit_const(numpy_type)
            self.emit("LOAD_FAST", GRAPH_OUT)
            self.emit_const(self.output_index[id(var)])
            self.emit("BINARY_SUBSCR")
            if numpy_type is not None:
                self.call(1)
        elif var.source is not None:
            self.load_source(var)
        elif id(var) in self._built:
            self.emit("LOAD_FAST", self._built[id(var)])
        else:
            self.build_fresh(var)

    def build_fresh(self, var: Variable) -> None:
        """Build `var` from its items (ignoring its source): each kind rebuilds itself (Variable.rebuild)."""
        var.rebuild(self)
        # one object per Variable: a list (or an iterator) loaded twice is the same object both times
        if var.rebuilt_once and var.source is None:
            name = self.new_temp()
            self.emit("COPY", 1)
            self.emit("STORE_FAST", name)
            self._built[id(var)] = name

    def frame_cell_name(self, cell: Any) -> str | None:
        return self.root_cells.get(id(cell))


def emit_rerun_on_error(cg: PyCodegen, code: types.CodeType, start: int) -> None:
    """Wrap the instructions from `start` on (the graph call) so that an exception they raise runs the frame
    of `code` again as Python, in the frame's place (a tail call), with the arguments it was called with."""
    handler = TryBegin(Label(), push_lasti=False, stack_depth=0)
    after = Label()
    cg.instructions.insert(start, handler)
    cg.instructions.append(TryEnd(handler))
    cg.emit("JUMP_FORWARD", after)
    cg.instructions.append(handler.target)
    error = cg.store_temp(lambda: None)  # the exception, on the stack
    cg.emit("PUSH_NULL")
    cg.emit_const(_hook.tail_call)
    cg.emit_const(run_as_python)
    cg.emit("LOAD_FAST", error)
    # by weak reference: the replacement code lives in `code`'s cache, which the garbage collector cannot see
    cg.emit_const(weakref.ref(code))
    cg.emit("PUSH_NULL")
    cg.emit_const(globals)  # called from this frame, the frame's globals
    cg.call(0)
    for name in code.co_freevars:
        cg.emit("LOAD_CLOSURE", name)
    if code.co_freevars:
        cg.emit("BUILD_TUPLE", len(code.co_freevars))
    else:
        cg.emit_const(None)
    args = arg_slot_names(code)
    for name in args:  # untouched so far: the frame's arguments (one that is a cell holds it)
        if name in passed_cells(code):
            cg.emit("LOAD_CLOSURE", name)  # a continuation's cell parameter: the cell itself
        else:
            cg.emit("LOAD_DEREF" if name in code.co_cellvars else "LOAD_FAST", name)
    cg.call(5 + len(args))
    cg.emit("RETURN_VALUE")
    cg.instructions.append(after)
