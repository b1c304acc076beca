"""Writes the trace made to state outside the frame; the transformed code replays them after the graph."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import torch

from framejit.codegen import PyCodegen
from framejit.exc import BreakCode, raise_observed, unsupported
from framejit.variables.base import Variable, lookup_class_attr
from framejit.variables.containers import birth_mark
from framejit.variables.generators import dropped_while_handling
from framejit.variables.nn_module import NNModuleVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable, UserObjectVariable, instance_dict, is_slot


class AttrWrite(NamedTuple):
    obj: Variable
    name: str
    value: Variable
    generic: bool  # object.__setattr__ (the class's own __setattr__, traced, asked for it): replayed the same way


class Speculation(NamedTuple):
    """What SideEffects.speculation noted: the log's extent before a speculative read."""

    checkpoint: tuple[int, int]
    container_births: int
    writes: tuple[dict, ...]  # containers, attrs, globals, cells, closure_cells
    exc_info: Variable | None
    calls: int
    iterators: list[tuple[Any, int]]
    generators: list[tuple[Any, int]]  # each generator made in the trace and how many times it was advanced


_ABSENT = object()
TENSOR_WRITE = -2  # the birth mark an in-place op of the graph logs: a write into some tensor, older or not


class SideEffects:
    def __init__(self, f_globals: dict) -> None:
        self.f_globals = f_globals
        # every write the trace made, local or not, as the birth mark of what was written (-1: state that existed
        # before the trace); lazy constructs evaluated at once (generator expressions, map) check it
        self.write_log: list[int] = []
        self.containers: dict[int, Variable] = {}  # source-backed lists/dicts mutated
        self.attrs: dict[tuple[int, str], AttrWrite] = {}  # by (id(obj), name): the last write wins
        self.globals: dict[str, Variable] = {}  # of the captured frame's module
        self.cells: dict[str, Variable] = {}  # free variables of the captured frame
        # closure cells of functions the trace called (`nonlocal` writes): by the cell's source, `fn.__closure__[i]`
        self.closure_cells: dict[str, tuple[Any, Variable]] = {}
        self.exc_info: Variable | None = None  # POP_EXCEPT of a handler entered before this frame
        self.iterators: list[Any] = []  # IteratorVariables over real iterators: advanced as far as the trace did
        self.calls: list[Any] = []  # warnings and log calls (variables/reports.py), replayed first, in order
        # the birth mark of every container mutated in place (-1: one from outside): such a write changes the
        # container's Variable itself, so a speculative read (`speculation`) cannot take it back
        self.container_births: list[int] = []
        self.generators: list[Any] = []  # generators made in the trace (variables/generators.py)
        self.settling = False  # a generator's remaining items are being taken for its rebuild
        self.local_classes: dict[int, Variable] = {}  # classes made by class statements in the trace, by id

    def is_empty(self) -> bool:
        return not (
            self.containers
            or self.attrs
            or self.globals
            or self.cells
            or self.closure_cells
            or self.exc_info
            or self.calls
            or any(it.consumed for it in self.iterators)
        )

    def record_call(self, call: Any) -> None:
        """A report (reports.ReplayedCall) the replay makes, after the graph, before the writes."""
        self.calls.append(call)

    def track_iterator(self, iterator: Any) -> None:
        """A real iterator the trace reads: the replay advances it past the items the trace consumed."""
        self.iterators.append(iterator)

    def note_write(self, born: int = -1) -> None:
        """A write to something made at birth mark `born` (containers.birth_mark), or to older state (-1)."""
        self.write_log.append(born)

    def checkpoint(self) -> tuple[int, int]:
        # (the mark is past the last container made: that one is older than what comes next)
        return len(self.write_log), birth_mark() + 1

    def wrote_older_state(self, checkpoint: tuple[int, int], tensors: bool = True) -> bool:
        """Whether a write since `checkpoint` touched something that existed before it (a visible side effect);
        with `tensors=False`, in-place writes into tensors (TENSOR_WRITE) are left to the caller."""
        start, mark = checkpoint
        return any(born < mark and (tensors or born != TENSOR_WRITE) for born in self.write_log[start:])

    def speculation(self) -> "Speculation":
        """The log as it is now, for a speculative read of code (an autograd.Function's backward) whose writes
        are then forgotten (`forget_since`)."""
        return Speculation(
            self.checkpoint(),
            len(self.container_births),
            (dict(self.containers), dict(self.attrs), dict(self.globals), dict(self.cells), dict(self.closure_cells)),
            self.exc_info,
            len(self.calls),
            [(it, it.consumed) for it in self.iterators],
            [(gen, gen.advances) for gen in self.generators],
        )

    def forgettable_since(self, mark: "Speculation") -> bool:
        """Whether every write since `mark` can be forgotten: none changed a container the trace had before it
        in place, nor advanced an iterator or a generator (those change Variables the rest of the trace reads)."""
        born_before = mark.checkpoint[1]
        return (
            all(born >= born_before for born in self.container_births[mark.container_births :])
            and all(it.consumed == consumed for it, consumed in mark.iterators)
            and all(gen.advances == advances for gen, advances in mark.generators)
        )

    def reported_since(self, mark: "Speculation") -> bool:
        """Whether a warning or log call was recorded since `mark`."""
        return len(self.calls) > mark.calls

    def forget_since(self, mark: "Speculation") -> None:
        """Forget the writes made since `mark` (which `forgettable_since` allowed)."""
        del self.write_log[mark.checkpoint[0] :]
        del self.container_births[mark.container_births :]
        del self.calls[mark.calls :]
        del self.iterators[len(mark.iterators) :]
        del self.generators[len(mark.generators) :]
        self.containers, self.attrs, self.globals, self.cells, self.closure_cells = (dict(d) for d in mark.writes)
        self.exc_info = mark.exc_info

    def restore_exc_info(self, saved: Variable) -> None:
        self.exc_info = saved
        self.note_write()

    def mutated_container(self, var: Variable) -> None:
        # a container read from outside the frame existed before any checkpoint, whenever the trace first read it
        born = -1 if var.source is not None else getattr(var, "born", -1)
        self.note_write(born)
        self.container_births.append(born)
        if var.source is not None:
            self.containers[id(var)] = var

    def store_attr(self, obj: Variable, name: str, value: Variable, generic: bool = False) -> None:
        """obj.name = value; `generic`: by object.__setattr__, which a class's own __setattr__ defers to."""
        if isinstance(obj, NewObjectVariable):  # made in the trace: a plain class (user_object.constructible)
            descriptor = lookup_class_attr(obj.cls, name)[1]
            if hasattr(type(descriptor), "__set__") and not is_slot(obj.cls, name):
                unsupported(f"setting {obj.cls.__name__}.{name} runs a descriptor", BreakCode.SIDE_EFFECT)
            if not obj.cls.__dictoffset__ and not is_slot(obj.cls, name):  # __slots__ and no __dict__
                raise_observed(AttributeError(f"{obj.cls.__name__!r} object has no attribute {name!r}"))
            custom = lookup_class_attr(obj.cls, "__setattr__")[1] is not object.__setattr__
            self.attrs[(id(obj), name)] = AttrWrite(obj, name, value, custom)
            self.note_write(obj.born)
            return
        if not isinstance(obj, (UserObjectVariable, NNModuleVariable)) or obj.source is None:
            unsupported(f"setting attribute {name!r} on {obj}", BreakCode.SIDE_EFFECT)
        if isinstance(obj, NNModuleVariable) and (
            isinstance(value, NNModuleVariable)
            or (isinstance(value, TensorVariable) and issubclass(value.python_type(), torch.nn.Parameter))
        ):
            unsupported(f"assigning a module or parameter to {type(obj.module).__name__}.{name}", BreakCode.SIDE_EFFECT)
        cls = obj.python_type()
        setattr_impl = lookup_class_attr(cls, "__setattr__")[1]
        descriptor = lookup_class_attr(cls, name)[1]
        if setattr_impl is torch.nn.RNNBase.__setattr__ and name not in getattr(obj.module, "_flat_weights_names", ()):
            setattr_impl = torch.nn.Module.__setattr__  # what RNNBase's does for anything but a weight
        if (
            not generic
            and setattr_impl not in (object.__setattr__, torch.nn.Module.__setattr__)
            or hasattr(type(descriptor), "__set__")
        ):
            unsupported(f"setting {cls.__name__}.{name} runs a __setattr__ or descriptor", BreakCode.SIDE_EFFECT)
        self.attrs[(id(obj), name)] = AttrWrite(obj, name, value, generic)
        self.note_write()

    def rewrites_held_value(self, obj: Variable, name: str, value: Variable) -> bool:
        """Whether `obj.name = value` stores what obj's own __dict__ holds already (an int, str, bool or None of
        the same type; no write pending, no descriptor): it changes nothing, so nothing need be replayed (a
        checkpointed block that sets its window size on every call stays whole). The caller guards the value."""
        real = (
            obj.value
            if isinstance(obj, UserObjectVariable)
            else obj.module
            if isinstance(obj, NNModuleVariable)
            else None
        )
        if real is None or obj.source is None or not value.is_python_constant() or (id(obj), name) in self.attrs:
            return False
        new = value.as_python_constant()
        held = instance_dict(real).get(name, _ABSENT)
        descriptor = lookup_class_attr(type(real), name)[1]
        # (not float: 0.0 == -0.0, and the guard could not tell them apart)
        return (
            type(new) in (bool, int, str, type(None))
            and type(held) is type(new)
            and held == new
            and not hasattr(type(descriptor), "__set__")
        )

    def delete_attr(self, obj: NewObjectVariable, name: str) -> bool:
        """del obj.name of an object made in the trace: its write is dropped (False if it has none)."""
        if self.attrs.pop((id(obj), name), None) is None:
            return False
        self.note_write(obj.born)
        return True

    def attribute_names(self, obj: Variable) -> list[str]:
        """The attributes written on `obj` so far, in the order first written."""
        return [write.name for write in self.attrs.values() if write.obj is obj]

    def pending_attr(self, obj: Variable, name: str) -> Variable | None:
        entry = self.attrs.get((id(obj), name))
        return entry.value if entry else None

    def store_global(self, f_globals: dict, name: str, value: Variable) -> None:
        self.globals[name] = value
        self.note_write()

    def pending_global(self, f_globals: dict, name: str) -> Variable | None:
        return self.globals.get(name) if f_globals is self.f_globals else None

    def store_cell(self, name: str, value: Variable) -> None:
        self.cells[name] = value
        self.note_write()

    def store_closure_cell(self, cell_source: Any, value: Variable) -> None:
        """A `nonlocal` write in a function the trace called, into a cell made before the trace: replayed as
        `cell.cell_contents = value`."""
        self.closure_cells[cell_source.name()] = (cell_source, value)
        self.note_write()

    def drop_unreachable_objects(self, live: Iterable[Variable]) -> None:
        """Forget the attribute writes of objects made in the trace that nothing outliving the frame reaches, as
        eager's collector forgets the objects: they are not made after the graph, and the tensors only they held
        are no graph outputs (a model's cache or output record built and dropped inside the forward). `live`:
        what the code after the graph uses; what the replay writes into older state is live too. An object of
        a class with `__del__` is kept: eager runs it."""
        writes_of: dict[int, list[Variable]] = {}
        roots: list[Variable] = list(live)
        for write in self.attrs.values():
            if isinstance(write.obj, NewObjectVariable):
                writes_of.setdefault(id(write.obj), []).append(write.value)
                if lookup_class_attr(write.obj.cls, "__del__")[1] is not None:
                    roots.append(write.obj)
            else:
                roots.append(write.value)
        roots += [
            *self.containers.values(),
            *self.globals.values(),
            *self.cells.values(),
            *(value for _, value in self.closure_cells.values()),
        ]
        if self.exc_info is not None:
            roots.append(self.exc_info)
        seen: set[int] = set()
        while roots:
            var = roots.pop()
            if id(var) not in seen:
                seen.add(id(var))
                roots += var.children()
                roots += writes_of.get(id(var), ())
        dropped_while_handling(self.generators, seen)
        for key, write in list(self.attrs.items()):
            if isinstance(write.obj, NewObjectVariable) and id(write.obj) not in seen:
                write.obj.dropped = True  # (loading it after all would be a bug: it errs rather than lose writes)
                del self.attrs[key]

    def values(self) -> list[Variable]:
        """Every value the replay will need (to decide graph outputs)."""
        out: list[Variable] = list(self.containers.values())
        out += [write.value for write in self.attrs.values()]
        return (
            out
            + list(self.globals.values())
            + list(self.cells.values())
            + [value for _, value in self.closure_cells.values()]
        )

    def codegen(self, cg: PyCodegen) -> None:
        """Replay: first compute every new value into a temporary, then write them all,
        so that no replayed write changes what a later value is computed from."""
        for call in self.calls:
            _emit_report(cg, call)
        writes: list[tuple[str, Any, str]] = []
        for var in self.containers.values():
            writes.append(("container", var, cg.store_temp(lambda v=var: cg.build_fresh(v))))
        for write in self.attrs.values():
            writes.append(("attr", write, cg.store_temp(lambda v=write.value: cg.load(v))))
        for name, value in self.globals.items():
            writes.append(("global", name, cg.store_temp(lambda v=value: cg.load(v))))
        for name, value in self.cells.items():
            writes.append(("cell", name, cg.store_temp(lambda v=value: cg.load(v))))
        for cell_source, value in self.closure_cells.values():
            writes.append(("closure_cell", cell_source, cg.store_temp(lambda v=value: cg.load(v))))
        # every target as it is before any write (a write may change the path another target's source reads); an
        # object made in the trace is made now, while the sources its contents come from still read as they did
        for var in [
            *self.containers.values(),
            *(w.obj for w in self.attrs.values()),
            *(it for it in self.iterators if it.consumed),
        ]:
            if var.source is not None:
                cg.pin(var)
            else:
                cg.load(var)
                cg.emit("POP_TOP")
        if self.exc_info is not None:  # the exception handled before the except clause is current again
            cg.load(self.exc_info)
            cg.emit("POP_EXCEPT")
        for kind, target, temp in writes:
            if kind == "container":
                target.replace_contents(cg, temp)
                continue
            if kind == "attr" and target.generic:  # object.__setattr__(obj, name, value): no custom __setattr__
                cg.emit("PUSH_NULL")
                cg.emit_const(object.__setattr__)
                cg.load(target.obj)
                cg.emit_const(target.name)
                cg.emit("LOAD_FAST", temp)
                cg.call(3)
                cg.emit("POP_TOP")
                continue
            cg.emit("LOAD_FAST", temp)
            if kind == "attr":
                cg.load(target.obj)  # its source, or an object made in the trace (built once)
                cg.emit("STORE_ATTR", target.name)
            elif kind == "global":
                cg.emit("STORE_GLOBAL", target)
            elif kind == "closure_cell":
                target.reconstruct(cg)
                cg.emit("STORE_ATTR", "cell_contents")
            else:
                cg.emit("STORE_DEREF", target)
        # after the lists they iterate got their new contents: a list iterator may have read appended items
        for iterator in self.iterators:
            if iterator.consumed:
                cg.load_source(iterator)
                cg.emit("LOAD_METHOD", "__setstate__")  # list/tuple/range iterators: set the position
                cg.emit_const(iterator.position)
                cg.call(1)
                cg.emit("POP_TOP")


def _emit_report(cg: PyCodegen, call: Any) -> None:
    """`target(*args, **kwargs)` (or `target.method(...)`), its result dropped, on the line of the call."""
    start = len(cg.instructions)
    if call.method is None:
        cg.emit("PUSH_NULL")
        cg.emit_const(call.target)
    else:
        cg.load(call.target)
        cg.load_method(call.method, len(call.args) + len(call.kwargs))
    for value in (*call.args, *call.kwargs.values()):
        cg.emit_const(value)
    cg.call(len(call.args) + len(call.kwargs), tuple(call.kwargs))
    cg.emit("POP_TOP")
    for instruction in cg.instructions[start:]:
        instruction.lineno = call.lineno
