"""A cache entry's guard as a C++ program (`_tensor_guard.make_guard_program`, guard_program.cpp), built from the
guards' records.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from typing import Any, Callable

from framejit import shapes
from framejit._C import _tensor_guard
from framejit.contracts import MODULE_HOOK_DICTS, GuardKind
from framejit.guards import HELPERS, GuardRecord, GuardSet, weakrefable
from framejit.sources import AttrSource, ItemSource, LocalSource, Source


def _value_groups(records: list[GuardRecord]) -> dict[int, tuple[Source, list[GuardRecord], list[tuple]]]:
    """Two or more value guards on one object's attributes and items, or keys it must not have (a convolution's
    stride, padding...; a config's fields; the functions and classes a module's globals hold and the builtins
    they must not shadow), by the id of each record: `values_match` checks each group in one call."""
    by_base: dict[str, tuple[Source, list[GuardRecord], list[tuple]]] = {}
    for r in records:
        base = _value_base(r)
        entry = _value_entry(r) if base is not None else None
        if base is not None and entry is not None:
            group = by_base.setdefault(base.name(), (base, [], []))
            group[1].append(r)
            group[2].append(entry)
    return {id(r): group for group in by_base.values() if len(group[1]) > 1 for r in group[1]}


def _value_base(r: GuardRecord) -> Source | None:
    source = r.source  # None for a global-state guard
    if r.kind == GuardKind.NO_KEY:
        return source
    return source.base if type(source) is AttrSource or type(source) is ItemSource else None


# values_match's spec (tensor_guard.cpp): how the value is read, and how it is compared
_ATTRIBUTE, _ITEM, _ABSENT_KEY = 0, 1, 2
_EQUAL, _IDENTICAL, _WEAKLY_IDENTICAL, _SAME_CODE = 0, 1, 2, 3


def _value_entry(r: GuardRecord) -> tuple[int, Any, int, Any, type | None] | None:
    """(how, name or key, mode, expected, exact type) of a guard `values_match` checks as its Python checks
    do; None for others (a float 0.0 or NaN: their extra checks)."""
    if r.kind == GuardKind.NO_KEY:
        return _ABSENT_KEY, r.value, _IDENTICAL, None, None
    source = r.guarded_source()  # an item or an attribute (see _value_base)
    if type(source) is ItemSource:
        how, name = _ITEM, source.key
    else:
        assert isinstance(source, AttrSource)
        how, name = _ATTRIBUTE, source.attr
    value = r.value
    if r.kind == GuardKind.EQUALS and not (isinstance(value, float) and (value != value or value == 0.0)):
        return how, name, _EQUAL, value, type(value)
    if r.kind in (GuardKind.ID_MATCH, GuardKind.FUNCTION_MATCH):
        # by a weak reference where it can be (the guard then holds no strong one)
        return (
            (how, name, _WEAKLY_IDENTICAL, weakref.ref(value), None)
            if weakrefable(value)
            else (how, name, _IDENTICAL, value, None)
        )
    if r.kind == GuardKind.CODE_MATCH:
        return how, name, _SAME_CODE, value.__code__, type(value)
    return None


def _no_hooks_flags(dicts: tuple[str, ...], forward_from_class: bool) -> int:
    """The flags of one module for `modules_without_hooks` (tensor_guard.cpp): 1 when its forward hook dicts are
    checked too (the backward ones always are), 2 when no instance `forward` may appear."""
    if tuple(dicts) not in (MODULE_HOOK_DICTS, MODULE_HOOK_DICTS[2:]):
        raise AssertionError(f"NO_HOOKS of other dicts than modules_without_hooks checks: {dicts}")
    return (1 if len(dicts) == 4 else 0) | (2 if forward_from_class else 0)


# guard_program.cpp's instructions: (op, out, in, obj, regs)
LOAD_ATTR, LOAD_GENERIC_ATTR, LOAD_ITEM, LOAD_CALL, LOAD_CONST, LOAD_GLOBALS, LOAD_FREE, LOAD_CELL_CONTENTS = range(8)
(
    TYPE_IS,
    IS,
    ID_IS,
    EQUALS,
    FALSY,
    LIST_EQUALS,
    LEN_IS,
    CODE_IS,
    NO_ATTR,
    NO_KEY,
    SAME,
    NOT_SAME,
    ALL_DISTINCT,
    TENSORS,
    VALUES,
    NO_HOOKS,
    CALL_IS,
    CALL_EQUALS,
    PY_CHECK,
) = range(10, 29)
_GLOBAL_STATE = (
    GuardKind.GRAD_MODE,
    GuardKind.DEFAULT_DTYPE,
    GuardKind.DEFAULT_DEVICE,
    GuardKind.AUTOCAST,
    GuardKind.GLOBAL_QUERY,
)


class ProgramBuilder:
    """The instructions of one guard program, and its listing (one line each, Python-like, for debugging).

    Sources load themselves through it (contracts.GuardScope); each is loaded once, into its own register."""

    def __init__(self, guard_set: GuardSet, code: types.CodeType, argnames: tuple[str, ...]) -> None:
        self.guard_set = guard_set
        self.nargs = 1 + len(argnames)  # the function, then its argument slots
        self.slot_of = {name: 1 + i for i, name in enumerate(argnames)}
        self.freevars = code.co_freevars
        self.registers: dict[str, int] = {}  # source name -> register (a memoised string, hashed once)
        self.instructions: list[tuple] = []
        self.listing: list[str] = []
        self.nregs = self.nargs
        self._globals: int | None = None
        self._py_checks = 0

    # -- loads (contracts.GuardScope) -------------------------------------------------------------------------
    def __call__(self, source: Source) -> int:
        name = source.name()
        reg = self.registers.get(name)
        if reg is None:
            reg = self.registers[name] = source.guard_load(self)
        return reg

    def argument(self, local_name: str) -> int:
        return self.slot_of[local_name]

    def closure_cell(self, var_name: str) -> int:
        if var_name in self.freevars:
            index = self.freevars.index(var_name)
            return self._load(LOAD_FREE, 0, index, f"___fn.__closure__[{index}].cell_contents")
        # a continuation's cell parameter holds the cell
        reg = self.argument(var_name)
        return self._load(LOAD_CELL_CONTENTS, reg, None, f"r{reg}.cell_contents")

    def globals_dict(self) -> int:
        if self._globals is None:
            self._globals = self._load(LOAD_GLOBALS, 0, None, "___fn.__globals__")
        return self._globals

    def const(self, value: Any) -> int:
        return self._load(LOAD_CONST, -1, value, self.guard_set._const(value))

    def attr(self, base: Source, name: str, generic: bool = False) -> int:
        reg = self(base)
        if generic:
            return self._load(LOAD_GENERIC_ATTR, reg, name, f"___object_getattr(r{reg}, {name!r})")
        return self._load(LOAD_ATTR, reg, name, f"r{reg}.{name}")

    def item(self, base: Source, key: Any) -> int:
        reg = self(base)
        return self._load(LOAD_ITEM, reg, key, f"r{reg}[{self._text(key)}]")

    def call(self, base: Source, fn: Callable[..., Any], *args: Any) -> int:
        reg = self(base)
        call = (lambda value: fn(value, *args)) if args else fn
        return self._load(
            LOAD_CALL,
            reg,
            call,
            f"{getattr(fn, '__qualname__', fn)}(r{reg}" + "".join(f", {self._text(a)}" for a in args) + ")",
        )

    def _load(self, op: int, base: int, obj: Any, text: str) -> int:
        out = self.nregs
        self.nregs += 1
        self.instructions.append((op, out, base, obj, ()))
        self.listing.append(f"r{out} = {text}")
        return out

    def _text(self, value: Any) -> str:
        return repr(value) if type(value) in (str, int, bool, type(None)) else self.guard_set._const(value)

    # -- checks -----------------------------------------------------------------------------------------------
    def check(
        self, op: int, text: str, source: Source | None = None, obj: Any = None, regs: tuple[int, ...] = ()
    ) -> None:
        reg = -1 if source is None else self(source)
        self.instructions.append((op, -1, reg, obj, regs))
        self.listing.append(text.replace("\x00", f"r{reg}"))

    def record(self, r: GuardRecord) -> None:
        """The checks of one guard (other than those checked in groups)."""
        x, value, const = r.source, r.value, self.guard_set._const
        match r.kind:
            case GuardKind.ID_MATCH | GuardKind.FUNCTION_MATCH if weakrefable(value):
                # by id: the guard holds no strong reference (the entry is dropped when the object dies)
                self.check(ID_IS, f"id(\x00) == {id(value)}", x, id(value))
            case GuardKind.ID_MATCH | GuardKind.FUNCTION_MATCH:
                self.check(IS, f"\x00 is {const(value)}", x, value)
            case GuardKind.TYPE_MATCH:
                self._type_is(x, value)
            case GuardKind.EQUALS if not (isinstance(value, float) and (value != value or value == 0.0)):
                self._type_is(x, value)
                self.check(EQUALS, f"\x00 == {self._text(value)}", x, value)
            case GuardKind.CODE_MATCH:
                self._type_is(x, value)
                self.check(CODE_IS, f"\x00.__code__ is {const(value.__code__)}", x, value.__code__)
            case GuardKind.LEN_MATCH:
                self._type_is(x, value)
                self.check(LEN_IS, f"len(\x00) == {len(value)}", x, len(value))
            case GuardKind.DICT_KEYS:
                self._type_is(x, value)
                keys = list(value)
                if keys:
                    self.check(LIST_EQUALS, f"list(\x00) == {self._text(keys)}", x, keys)
                else:
                    self.check(FALSY, "not \x00", x)
            case GuardKind.NO_ATTR:
                self.check(NO_ATTR, f"not hasattr(\x00, {value!r})", x, value)
            case GuardKind.NO_KEY:
                self.check(NO_KEY, f"{self._text(value)} not in \x00", x, value)
            case GuardKind.ALIAS | GuardKind.NOT_ALIAS:
                other = self(value)
                same = r.kind == GuardKind.ALIAS
                self.check(SAME if same else NOT_SAME, f"\x00 {'is' if same else 'is not'} r{other}", x, regs=(other,))
            case kind if kind in _GLOBAL_STATE and r.value is not None:
                (fn, args), check = r.value, r.guard.checks[0]
                self.check(
                    CALL_IS if check.op == "is" else CALL_EQUALS, r.guard.code_list[0], obj=(fn, args, check.expected)
                )
            case GuardKind.SHAPE_ENV:
                exprs, tokens = r.value
                self.python_check(lambda reg: [shapes.render(e, tokens, reg) for e in exprs])
            case _:  # in Python: its checks over the registers
                self.python_check(lambda reg: [c.text("" if x is None else reg(x), reg) for c in r.guard.checks])

    def _type_is(self, source: Source | None, value: Any) -> None:
        assert source is not None, "a type check of no value"
        self.check(TYPE_IS, f"type(\x00) is {self.guard_set._const(type(value))}", source, type(value))

    def python_check(self, write: Callable[[Callable[[Source], str]], list[str]]) -> None:
        """A check that stays Python: a function of the registers its expressions read. `write(reg)` writes
        them, `reg(source)` naming a source's register."""
        used: set[int] = set()

        def reg(source: Source) -> str:
            n = self(source)
            used.add(n)
            return f"r{n}"

        exprs = write(reg)
        params = ", ".join(f"r{n}" for n in sorted(used))
        name = f"___check{self._py_checks}"
        self._py_checks += 1
        body = " and ".join(f"({e})" for e in exprs) or "True"
        source = f"def {name}({params}):\n    return {body}\n"
        namespace = dict(HELPERS, **self.guard_set.constants)
        exec(compile(source, f"<framejit guard check {name}>", "exec"), namespace)
        self.instructions.append((PY_CHECK, -1, -1, namespace[name], tuple(sorted(used))))
        self.listing.append(f"{name}({params}): {body}")

    def build(self) -> Callable[..., bool]:
        return _tensor_guard.make_guard_program(self.nargs, self.nregs, tuple(self.instructions))


def compile_guard_fn(
    guard_set: GuardSet, code: types.CodeType, argnames: tuple[str, ...]
) -> tuple[Callable[..., bool], str]:
    """The guard program `guard(fn, *arg_slots) -> bool` for these guards, and its listing."""
    records = list(guard_set.records.values())
    program = ProgramBuilder(guard_set, code, argnames)
    # identity checks of arguments first: one compare rejects the entries of other module instances
    first = [r for r in records if r.kind == GuardKind.ID_MATCH and isinstance(r.source, LocalSource)]
    for r in first:
        program.record(r)
    done = {id(r) for r in first}
    tensors = [r for r in records if r.kind == GuardKind.TENSOR_MATCH]
    if tensors:
        dynamic = [sorted(guard_set.dynamic_dims.get(r.guarded_source().name(), ())) for r in tensors]
        strides = [sorted(guard_set.dynamic_strides.get(r.guarded_source().name(), ())) for r in tensors]
        offsets = [i for i, r in enumerate(tensors) if r.guarded_source().name() in guard_set.dynamic_offsets]
        spec = _tensor_guard.make_spec([r.value for r in tensors], dynamic, strides, offsets)
        regs = tuple(program(r.guarded_source()) for r in tensors)
        program.check(
            TENSORS,
            f"___check_tensors({guard_set._const(spec)}, {', '.join(f'r{n}' for n in regs)})",
            obj=spec,
            regs=regs,
        )
    distinct = _distinct_groups(records)
    values = _value_groups(records)
    hooked: list[tuple[Source, int]] = []  # NO_HOOKS: (module, flags), one check after the rest
    for r in records:
        if r.kind in (GuardKind.TENSOR_MATCH, GuardKind.STORAGE_SHARING) or id(r) in done:
            continue
        if r.kind == GuardKind.NO_HOOKS:
            hooked.append((r.guarded_source(), _no_hooks_flags(*r.value)))
            continue
        same_object = values.get(id(r))
        if same_object is not None:  # the value guards of one object's attributes and items: one check
            base, grouped, entries = same_object
            spec = _tensor_guard.make_value_spec(tuple(entries))
            program.check(VALUES, f"___values_match({guard_set._const(spec)}, \x00)", base, spec)
            done.update(id(g) for g in grouped)
            continue
        group = distinct.get(id(r))
        if group is not None:  # one check for a set of objects that must all stay distinct
            regs = tuple(program(s) for s in group.sources)
            program.check(ALL_DISTINCT, f"___all_distinct({', '.join(f'r{n}' for n in regs)})", regs=regs)
            done.update(group.records)
            continue
        program.record(r)
    if hooked:  # (last: every module's type is checked before its dicts are read)
        flags = bytes(f for _, f in hooked)
        regs = tuple(program(s) for s, _ in hooked)
        program.check(
            NO_HOOKS, f"___modules_without_hooks({flags!r}, {', '.join(f'r{n}' for n in regs)})", obj=flags, regs=regs
        )
    return program.build(), "\n".join(program.listing) + "\n"


@dataclasses.dataclass
class _DistinctGroup:
    sources: list[Source]
    records: set[int]  # ids of its NOT_ALIAS records


def _distinct_groups(records: list[GuardRecord]) -> dict[int, _DistinctGroup]:
    """Sets of three or more sources every two of which a NOT_ALIAS guard keeps apart (the builder guards each
    object against every earlier one of its type: quadratic in them), by the id of each record a set covers;
    the sets are grown greedily, in the order the sources were first guarded, and pairs left over stay pairs."""
    pairs = [r for r in records if r.kind == GuardKind.NOT_ALIAS]
    if len(pairs) < 3:
        return {}
    by_name: dict[str, Source] = {}
    apart: dict[str, set[str]] = {}
    for r in pairs:
        source = r.guarded_source()
        a, b = source.name(), r.value.name()
        by_name.setdefault(b, r.value)
        by_name.setdefault(a, source)
        apart.setdefault(a, set()).add(b)
        apart.setdefault(b, set()).add(a)
    cliques: list[list[str]] = []
    for name in by_name:
        home = next((c for c in cliques if apart[name].issuperset(c)), None)
        if home is None:
            cliques.append([name])
        else:
            home.append(name)
    clique_of = {name: i for i, c in enumerate(cliques) if len(c) >= 3 for name in c}
    groups = {i: _DistinctGroup([by_name[n] for n in cliques[i]], set()) for i in set(clique_of.values())}
    found: dict[int, _DistinctGroup] = {}
    for r in pairs:
        i = clique_of.get(r.guarded_source().name())
        if i is not None and i == clique_of.get(r.value.name()):
            groups[i].records.add(id(r))
            found[id(r)] = groups[i]
    return found
