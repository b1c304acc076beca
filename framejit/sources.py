"""Where a traced value came from: each Source names its guard expression and reloads the value."""

from __future__ import annotations

import dataclasses
import operator
import re
import sys
from typing import Any, ClassVar

from framejit.contracts import Emitter, GuardScope
from framejit.numpy_graph_ops import tensor_of_array


@dataclasses.dataclass(frozen=True)
class Source:
    def name(self) -> str:
        raise NotImplementedError

    def guard_load(self, program: GuardScope) -> int:
        """Load this value in the guard program; returns its register."""
        raise NotImplementedError

    def reconstruct(self, cg: Emitter) -> None:
        raise NotImplementedError

    kind: ClassVar[str]
    """What the root of the source is: 'local', 'global', 'closure' or 'constant' (shown in guard listings)."""

    def root(self) -> "Source":
        return self


@dataclasses.dataclass(frozen=True)
class DerivedSource(Source):
    """A value reached from another source (an attribute, an item...): it has that source's root."""

    base: Source

    def wrap(self, base: str) -> str:
        """This value's expression in guard text, given its base's."""
        raise NotImplementedError

    def name(self) -> str:
        # memoised: guards, the wrap cache and graph input names all key on it, and a deep source (a
        # parameter of a submodule) would otherwise rebuild its whole chain each time
        text = self.__dict__.get("_name")
        if text is None:
            text = self.wrap(self.base.name())
            object.__setattr__(self, "_name", text)
        return text

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.base.kind

    def root(self) -> Source:
        return self.base.root()


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.argument(self.local_name)

    def reconstruct(self, cg: Emitter) -> None:
        # an argument captured by an inner function is a cell once the frame starts
        cg.emit("LOAD_DEREF" if self.local_name in cg.cell_names else "LOAD_FAST", self.local_name)

    kind = "local"


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.item(GlobalsDictSource(), self.global_name)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("LOAD_GLOBAL", (False, self.global_name))

    kind = "global"


@dataclasses.dataclass(frozen=True)
class GlobalsDictSource(Source):
    """The captured function's globals dict itself (for guards that a name is absent)."""

    def name(self) -> str:
        return "G"

    def guard_load(self, program: GuardScope) -> int:
        return program.globals_dict()

    def reconstruct(self, cg: Emitter) -> None:
        raise NotImplementedError("the globals dict is never reloaded")

    kind = "global"


@dataclasses.dataclass(frozen=True)
class ModuleGlobalsSource(Source):
    """The globals dict of an imported module (for globals read by inlined functions of other modules)."""

    module: str

    def name(self) -> str:
        return f"M[{self.module!r}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.const(vars(sys.modules[self.module]))

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit_const(vars(sys.modules[self.module]))

    kind = "global"


@dataclasses.dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of a cell the captured frame did not make: a free variable's (its closure cell), or a
    continuation's cell parameter's."""

    var_name: str

    def name(self) -> str:
        return f"C[{self.var_name!r}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.closure_cell(self.var_name)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("LOAD_DEREF", self.var_name)

    kind = "closure"


@dataclasses.dataclass(frozen=True, eq=False)
class ConstSource(Source):
    """An object known by identity that no frame variable names (a function's mutable default,
    a class found through the MRO): guards name it K[id], the transformed code loads it as a constant."""

    value: Any

    def name(self) -> str:
        return f"K[{id(self.value)}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.const(self.value)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit_const(self.value)

    kind = "constant"


@dataclasses.dataclass(frozen=True)
class AttrSource(DerivedSource):
    attr: str

    def wrap(self, base: str) -> str:
        return f"{base}.{self.attr}"

    def guard_load(self, program: GuardScope) -> int:
        return program.attr(self.base, self.attr)

    def reconstruct(self, cg: Emitter) -> None:
        self.base.reconstruct(cg)
        cg.emit("LOAD_ATTR", self.attr)


@dataclasses.dataclass(frozen=True)
class GenericAttrSource(DerivedSource):
    """object.__getattribute__(base, attr): an attribute read past the class's own __getattribute__, so that
    checking a guard or reloading the value never runs the user's lookup (it may count, log or raise)."""

    attr: str

    def wrap(self, base: str) -> str:
        return f"___object_getattr({base}, {self.attr!r})"

    def guard_load(self, program: GuardScope) -> int:
        return program.attr(self.base, self.attr, generic=True)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(object.__getattribute__)
        self.base.reconstruct(cg)
        cg.emit_const(self.attr)
        cg.call(2)


@dataclasses.dataclass(frozen=True)
class DictItemSource(DerivedSource):
    """dict.__getitem__(base, key): an item of a dict subclass whose own __getitem__ is Python, read past it, so
    that checking a guard or reloading the value never runs that code (it may build a new object each time)."""

    key: Any

    def wrap(self, base: str) -> str:
        return f"___dict_getitem({base}, {self.key!r})"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, dict.__getitem__, self.key)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(dict.__getitem__)
        self.base.reconstruct(cg)
        cg.emit_const(self.key)
        cg.call(2)


@dataclasses.dataclass(frozen=True)
class DictListSource(DerivedSource):
    """list(dict.keys(base)) or list(dict.values(base)): a dict's keys or values in order, for a dict whose keys
    are objects compared by identity (a tensor, an instance), which no guard text or constant can name; or
    list(base) of a set or frozenset ("members"), whose type is guarded first (so no Python __iter__ runs)."""

    part: str  # "keys", "values" or "members"

    def wrap(self, base: str) -> str:
        return f"list({base})" if self.part == "members" else f"list(dict.{self.part}({base}))"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, _DICT_LISTS[self.part])

    def reconstruct(self, cg: Emitter) -> None:
        def load() -> None:
            cg.emit("PUSH_NULL")
            cg.emit_const(_DICT_LISTS[self.part])
            self.base.reconstruct(cg)
            cg.call(1)

        cg.shared(self.name(), load)  # one list for all the values a graph reads of it


def _dict_keys_list(d: dict) -> list:
    return list(dict.keys(d))


def _dict_values_list(d: dict) -> list:
    return list(dict.values(d))


def _set_members_list(s: Any) -> list:
    return list(frozenset.__iter__(s) if isinstance(s, frozenset) else set.__iter__(s))  # never a Python __iter__


_DICT_LISTS = {"keys": _dict_keys_list, "values": _dict_values_list, "members": _set_members_list}


@dataclasses.dataclass(frozen=True)
class ReduceSource(DerivedSource):
    """base.__reduce__(): how an iterator a continuation receives says what it has left."""

    def wrap(self, base: str) -> str:
        return f"{base}.__reduce__()"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, operator.methodcaller("__reduce__"))

    def reconstruct(self, cg: Emitter) -> None:
        self.base.reconstruct(cg)
        cg.emit("LOAD_METHOD", "__reduce__")
        cg.call(0)


@dataclasses.dataclass(frozen=True)
class WeakrefCallSource(DerivedSource):
    """base(): the object a weak reference points to (nn.RNN keeps its flat weights through weakrefs)."""

    def wrap(self, base: str) -> str:
        return f"{base}()"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, operator.call)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        self.base.reconstruct(cg)
        cg.call(0)


@dataclasses.dataclass(frozen=True)
class IndexSource(DerivedSource):
    """base.__index__(): a numpy integer as the Python int a graph takes for a symbolic int input."""

    def wrap(self, base: str) -> str:
        return f"{base}.__index__()"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, operator.methodcaller("__index__"))

    def reconstruct(self, cg: Emitter) -> None:
        self.base.reconstruct(cg)
        cg.emit("LOAD_METHOD", "__index__")
        cg.call(0)


@dataclasses.dataclass(frozen=True)
class FromNumpySource(DerivedSource):
    """The tensor sharing a numpy array's memory, which a graph takes for the array (torch.from_numpy's, on the
    storage of the tensor the memory belongs to where there is one: numpy_graph_ops.tensor_of_array)."""

    def wrap(self, base: str) -> str:
        return f"tensor_of_array({base})"

    def guard_load(self, program: GuardScope) -> int:
        return program.call(self.base, tensor_of_array)

    def reconstruct(self, cg: Emitter) -> None:
        cg.emit("PUSH_NULL")
        cg.emit_const(tensor_of_array)
        self.base.reconstruct(cg)
        cg.call(1)


@dataclasses.dataclass(frozen=True)
class ItemSource(DerivedSource):
    """base[key] for a constant key (list/tuple index, dict key, _modules/_parameters name)."""

    key: Any

    def wrap(self, base: str) -> str:
        return f"{base}[{self.key!r}]"

    def guard_load(self, program: GuardScope) -> int:
        return program.item(self.base, self.key)

    def reconstruct(self, cg: Emitter) -> None:
        self.base.reconstruct(cg)
        cg.emit_const(self.key)
        cg.emit("BINARY_SUBSCR")


def written_inline(key: Any) -> bool:
    """Whether repr(key) is Python that evaluates to the key (a dict key or an item index in guard code)."""
    if isinstance(key, tuple):
        return all(map(written_inline, key))
    return type(key) in (str, int, bool, bytes, type(None))


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def graph_input_name(source: Source) -> str:
    """A readable placeholder name: L['x'] -> x, L['self']._modules['fc']._parameters['weight'] -> self_fc_weight."""
    text = source.name()
    for noise in ("._modules", "._parameters", "._buffers", "L[", "G[", "C[", "M[", "K["):
        text = text.replace(noise, "_" if noise.startswith(".") else "")
    name = re.sub("_+", "_", _IDENT.sub("_", text)).strip("_") or "arg"
    return "_" + name if name[0].isdigit() else name
