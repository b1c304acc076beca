"""Guards: what a cache entry assumes, compiled into one generated Python function per entry.

Each guard is recorded once, when a real value is first wrapped, as (source,
kind, value). Two renderings come from the same record: readable checks over
L[...] / G[...] names (`Guard.code_list`, used for listings and for explaining
a miss), and the fast generated function, where every source is an expression
over the function's parameters and a source shared by several guards (e.g.
`L['self']._modules['fc']`) is computed once into a local. All TENSOR_MATCH
guards of an entry are checked by one C++ call.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import types
import weakref
from collections import Counter
from typing import Any, Callable

import torch

from framejit._C import _tensor_guard
from framejit.contracts import Guard
from framejit.sources import (AttrSource, ClosureSource, ConstSource, DerivedSource, GlobalsDictSource,
                                    GlobalSource, ItemSource, LocalSource, ModuleGlobalsSource, ReduceSource, Source,
                                    WeakrefCallSource)

_dispatch_keys = torch._C._dispatch_keys
_get_default_device = torch._C._get_default_device
_INLINE_TYPES = (int, str, bytes)
_AUTOCAST_DEVICES = ("cpu", "cuda")


def _autocast_state() -> tuple[Any, ...]:
    """Which devices autocast is on for, and to which dtype: part of what a graph was traced under."""
    return tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)


_HELPERS: dict[str, Any] = {"___check_tensors": _tensor_guard.check_tensors, "___dispatch_keys": _dispatch_keys,
                            "___get_default_device": _get_default_device, "___is_grad_enabled": torch.is_grad_enabled,
                            "___copysign": math.copysign, "___get_default_dtype": torch.get_default_dtype,
                            "___any_autocast": torch._C._is_any_autocast_enabled,
                            "___autocast_state": _autocast_state}


@dataclasses.dataclass(frozen=True)
class _Record:
    source: Source | None   # None for global state (grad mode, default dtype/device)
    kind: str
    value: Any
    guard: Guard


class GuardSet:
    """The guards of one compile, in the order they were recorded."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], _Record] = {}
        self.constants: dict[str, Any] = {}
        self.watched: list[Any] = []  # objects guarded by id: their death invalidates the entry
        self._by_id: dict[int, str] = {}

    def _const(self, value: Any) -> str:
        if id(value) not in self._by_id:
            name = f"___c{len(self.constants)}"
            self.constants[name] = value
            self._by_id[id(value)] = name
        return self._by_id[id(value)]

    def add(self, source: Source, kind: str, value: Any) -> None:
        """Record a guard; for ALIAS/NOT_ALIAS `value` is the other Source."""
        if isinstance(value, Source):
            key = (source.name(), f"{kind} {value.name()}")
        elif kind in ("NO_KEY", "NO_ATTR"):  # one source, several names that must stay absent
            key = (source.name(), f"{kind} {value!r}")
        else:
            key = (source.name(), kind)
        if key in self.records:
            return
        root = source.root()
        if isinstance(root, ConstSource):
            self.constants.setdefault("K", {})[id(root.value)] = root.value
        if kind in ("ID_MATCH", "FUNCTION_MATCH") and _weakrefable(value):
            self.watched.append(value)
        code = tuple(self._code(source.name(), kind, value, lambda other: other.name()))
        self.records[key] = _Record(source, kind, value,
                                    Guard(name=source.name(), kind=kind, code_list=code, source_kind=source.kind))

    def add_global_state(self) -> None:
        for kind, check in (("GRAD_MODE", f"___is_grad_enabled() is {torch.is_grad_enabled()}"),
                            ("DEFAULT_DTYPE", f"___get_default_dtype() is {self._const(torch.get_default_dtype())}"),
                            ("DEFAULT_DEVICE", f"___get_default_device() == {_get_default_device()!r}"),
                            # one C call when autocast is off, the usual case; the full state when it is on
                            ("AUTOCAST", "___any_autocast() is False" if not torch._C._is_any_autocast_enabled()
                             else f"___autocast_state() == {self._const(_autocast_state())}")):
            self.records[("", kind)] = _Record(None, kind, None, Guard(name="", kind=kind, code_list=(check,),
                                                                       source_kind="global"))

    def add_query(self, fn: Callable[..., Any], args: tuple, result: Any) -> None:
        """A query of global state folded to `result` at trace time (torch.get_autocast_dtype("cpu")...): the
        entry holds only while the query still answers the same."""
        call = f"{self._const(fn)}(*{self._const(args)})"
        self.records[("", f"QUERY {call}")] = _Record(None, "GLOBAL_QUERY", None, Guard(
            name=f"{getattr(fn, '__name__', fn)}({', '.join(map(repr, args))})", kind="GLOBAL_QUERY",
            code_list=(f"{call} == {self._const(result)}",), source_kind="global"))

    def _code(self, x: str, kind: str, value: Any, render: Callable[[Source], str]) -> list[str]:
        """The checks of one guard over the expression `x` (`render` writes other sources)."""
        if kind == "TENSOR_MATCH":
            return [f"type({x}) is {self._const(type(value))}", f"{x}.dtype is {self._const(value.dtype)}",
                    f"{x}.device == {self._const(value.device)}", f"{x}.requires_grad is {value.requires_grad}",
                    f"{x}.shape == {tuple(value.shape)!r}", f"{x}.stride() == {tuple(value.stride())!r}",
                    f"{x}.storage_offset() == {value.storage_offset()}",
                    f"___dispatch_keys({x}) == {self._const(_dispatch_keys(value))}"]
        if kind in ("ID_MATCH", "FUNCTION_MATCH"):
            return [f"id({x}) == {id(value)}"] if _weakrefable(value) else [f"{x} is {self._const(value)}"]
        if kind == "EQUALS":
            if isinstance(value, float) and value != value:
                return [f"type({x}) is float", f"{x} != {x}"]
            checks = [f"type({x}) is {self._const(type(value))}",
                      f"{x} == {repr(value) if type(value) in _INLINE_TYPES else self._const(value)}"]
            if isinstance(value, float) and value == 0.0:  # 0.0 == -0.0, but 1/x differs
                checks.append(f"___copysign(1.0, {x}) == {math.copysign(1.0, value)}")
            return checks
        if kind == "CODE_MATCH":  # a function by its code: closures made anew each call still match
            return [f"type({x}) is {self._const(type(value))}", f"{x}.__code__ is {self._const(value.__code__)}"]
        if kind == "TYPE_MATCH":
            return [f"type({x}) is {self._const(type(value))}"]
        if kind == "LEN_MATCH":
            return [f"type({x}) is {self._const(type(value))}", f"len({x}) == {len(value)}"]
        if kind == "DICT_KEYS":
            return [f"type({x}) is {self._const(type(value))}", f"list({x}) == {list(value)!r}"]
        if kind == "NO_HOOKS":  # a module called: still no hooks (nor an instance `forward`); one check per module
            dicts, forward_from_class = value
            parts = [f"{x}.{d}" for d in dicts] + ([f"'forward' in {x}.__dict__"] if forward_from_class else [])
            return [f"not ({' or '.join(parts)})"]
        if kind == "NO_ATTR":
            return [f"not hasattr({x}, {value!r})"]
        if kind == "NO_KEY":
            return [f"{value!r} not in {x}"]
        if kind == "ALIAS":
            return [f"{x} is {render(value)}"]
        if kind == "NOT_ALIAS":
            return [f"{x} is not {render(value)}"]
        raise AssertionError(f"unknown guard kind {kind}")

    def identity(self) -> tuple[tuple[str, int], ...]:
        """(argument name, id) of the arguments guarded by identity (a module's `self`): which objects an entry
        is for. Their checks run first, and the cache size limit counts entries per such objects."""
        return tuple((r.source.local_name, id(r.value)) for r in self.records.values()
                     if r.kind == "ID_MATCH" and isinstance(r.source, LocalSource) and _weakrefable(r.value))

    def ordered(self) -> list[Guard]:
        return [r.guard for r in self.records.values()]


def _weakrefable(value: Any) -> bool:
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


class _Renderer:
    """Sources as expressions over the guard function's parameters; shared ones hoisted into locals."""

    def __init__(self, guard_set: GuardSet, code: types.CodeType, argnames: tuple[str, ...],
                 sources: list[Source]) -> None:
        self.guard_set = guard_set
        self.slot_of = {name: i for i, name in enumerate(argnames)}
        self.freevars = code.co_freevars
        self.uses: Counter[Source] = Counter()
        for source in sources:
            self._count(source)
        self.memo: dict[Source, str] = {}
        self.prologue: list[str] = []

    def _count(self, source: Source) -> None:
        self.uses[source] += 1
        if isinstance(source, DerivedSource):
            self._count(source.base)

    def __call__(self, source: Source) -> str:
        if source in self.memo:
            return self.memo[source]
        expr = self._expr(source)
        if self.uses[source] > 1 and not expr.isidentifier():
            local = f"___s{len(self.prologue)}"
            self.prologue.append(f"    {local} = {expr}")
            expr = local
        self.memo[source] = expr
        return expr

    def _expr(self, source: Source) -> str:
        if isinstance(source, AttrSource):
            return f"{self(source.base)}.{source.attr}"
        if isinstance(source, ItemSource):
            return f"{self(source.base)}[{source.key!r}]"
        if isinstance(source, ReduceSource):
            return f"{self(source.base)}.__reduce__()"
        if isinstance(source, WeakrefCallSource):
            return f"{self(source.base)}()"
        if isinstance(source, LocalSource):
            return f"___a{self.slot_of[source.local_name]}"
        if isinstance(source, GlobalSource):
            return f"___G[{source.global_name!r}]"
        if isinstance(source, GlobalsDictSource):
            return "___G"
        if isinstance(source, ClosureSource):
            return f"___fn.__closure__[{self.freevars.index(source.var_name)}].cell_contents"
        if isinstance(source, ModuleGlobalsSource):
            return self.guard_set._const(vars(sys.modules[source.module]))
        if isinstance(source, ConstSource):
            return self.guard_set._const(source.value)
        raise AssertionError(f"no guard expression for {source}")


def compile_guard_fn(guard_set: GuardSet, code: types.CodeType, argnames: tuple[str, ...]
                     ) -> tuple[Callable[..., bool], str]:
    """Generate `guard(fn, *arg_slots) -> bool` for these guards; returns it and its source."""
    records = list(guard_set.records.values())
    sources = [r.source for r in records if r.source is not None]
    sources += [r.value for r in records if isinstance(r.value, Source)]
    render = _Renderer(guard_set, code, argnames, sources)
    tensors = [r for r in records if r.kind == "TENSOR_MATCH"]
    # identity checks of arguments first: one compare rejects the entries of other module instances
    first = [r for r in records if r.kind == "ID_MATCH" and isinstance(r.source, LocalSource)]
    exprs = [e for r in first for e in guard_set._code(render(r.source), r.kind, r.value, render)]
    done = {id(r) for r in first}
    if tensors:
        spec = guard_set._const(_tensor_guard.make_spec([r.value for r in tensors]))
        exprs.append(f"___check_tensors({spec}, " + ", ".join(render(r.source) for r in tensors) + ")")
    for r in records:
        if r.kind == "TENSOR_MATCH" or id(r) in done:
            continue
        exprs += r.guard.code_list if r.source is None else guard_set._code(render(r.source), r.kind, r.value, render)
    params = ", ".join(["___fn", *[f"___a{i}" for i in range(len(argnames))]])
    body = " and ".join(f"({e})" for e in exprs) or "True"
    prologue = ["    ___G = ___fn.__globals__"] if "___G" in body + "".join(render.prologue) else []
    source = "\n".join([f"def ___guard({params}):", *prologue, *render.prologue, f"    return {body}"]) + "\n"
    namespace = dict(_HELPERS, **guard_set.constants)
    exec(compile(source, f"<framejit guards for {code.co_name}>", "exec"), namespace)
    return namespace["___guard"], source


def explain_failure(guards: list[Guard], constants: dict[str, Any], fn: types.FunctionType,
                    argnames: tuple[str, ...], args: tuple) -> tuple[Guard, str] | None:
    """The first guard that fails for these arguments, with a readable reason (slow path)."""
    closure = {name: cell for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
    ns = dict(_HELPERS, **constants, L=dict(zip(argnames, args)), G=fn.__globals__,
              C=_CellContents(closure), M=_ModuleDicts())
    for guard in guards:
        for check in guard.code_list:
            try:
                ok = bool(eval(check, ns))
            except Exception as e:  # a missing name or attribute is a failed guard
                return guard, f"{guard.name or guard.kind}: {type(e).__name__}: {e}"
            if not ok:
                return guard, _describe(guard, check, ns)
    return None


class _ModuleDicts(dict):
    def __missing__(self, name: str) -> dict:
        return vars(sys.modules[name])


class _CellContents(dict):
    def __init__(self, cells: dict[str, Any]) -> None:
        super().__init__({k: c.cell_contents for k, c in cells.items() if _has_contents(c)})


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


_TENSOR_FIELDS = ("dtype", "device", "requires_grad", "shape", "stride", "storage_offset")


def _describe(guard: Guard, check: str, ns: dict[str, Any]) -> str:
    if guard.kind == "GRAD_MODE":
        return f"grad mode changed to {torch.is_grad_enabled()}"
    if guard.kind == "DEFAULT_DTYPE":
        return f"default dtype changed to {torch.get_default_dtype()}"
    if guard.kind == "DEFAULT_DEVICE":
        return f"default device changed to {_get_default_device()!r}"
    if guard.kind == "GLOBAL_QUERY":
        return f"{guard.name} now returns {eval(check.rsplit(' == ', 1)[0], ns)!r}"
    if guard.kind == "AUTOCAST":
        on = [f"{d} ({str(dtype).removeprefix('torch.')})" for d, enabled, dtype in _autocast_state() if enabled]
        return f"autocast changed: now {'on for ' + ', '.join(on) if on else 'off'}"
    try:
        actual = eval(guard.name, ns)
    except Exception as e:
        return f"{guard.name}: {type(e).__name__}: {e}"
    if guard.kind == "TENSOR_MATCH":
        if check.startswith("type("):
            return f"{guard.name}: expected a {eval(check.split(' is ')[1], ns).__name__}, got {type(actual).__name__}"
        if check.startswith("___dispatch_keys"):
            return f"{guard.name}: dispatch keys changed to {_dispatch_keys(actual)}"
        field = next(f for f in _TENSOR_FIELDS if f".{f}" in check)
        expected = eval(check.rsplit(" is " if " is " in check else " == ", 1)[1], ns)
        got = getattr(actual, field)
        return f"{guard.name}: {field} mismatch, expected {expected}, got {got() if callable(got) else got}"
    if guard.kind in ("ID_MATCH", "FUNCTION_MATCH"):
        return f"{guard.name}: a different object ({type(actual).__name__}) than when compiled"
    if guard.kind == "EQUALS":
        return f"{guard.name}: value changed to {actual!r} (failed `{check}`)"
    if guard.kind == "NO_HOOKS":
        added = [d for d in check.removeprefix("not (").rstrip(")").split(" or ") if eval(d, ns)]
        if any(d.startswith("'forward' in") for d in added):
            return f"{guard.name}: forward was replaced on the instance"
        return f"{guard.name}: hooks were registered ({', '.join(d.rsplit('.', 1)[1] for d in added)})"
    return f"{guard.name}: failed `{check}`"
