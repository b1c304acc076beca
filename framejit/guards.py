"""Guards: what a cache entry assumes, compiled into one generated Python function per entry.

Each guard is recorded once, when a real value is first wrapped. The fast
path is a single generated boolean expression; on a miss, `explain_failure`
re-checks guards one by one to say which failed and why (guard_fail_fn,
recompile logs).
"""
from __future__ import annotations

import math
import re
import sys
import types
import weakref
from typing import Any, Callable

import torch

from framejit._C import _tensor_guard
from framejit.contracts import Guard
from framejit.trace.sources import ConstSource, Source

_dispatch_keys = torch._C._dispatch_keys
_get_default_device = torch._C._get_default_device
_is_grad_enabled = torch.is_grad_enabled

_NAME = re.compile(r"([LGCM])\[('(?:[^'\\]|\\.)*')\]|K\[(\d+)\]")
_BARE_G = re.compile(r"(?<!['\w])G(?![\w'\[])")  # the globals dict itself, as in `'abs' not in G`
_INLINE_TYPES = (int, str, bytes)


class GuardSet:
    """The guards of one compile, in the order they were recorded."""

    def __init__(self) -> None:
        self.guards: dict[tuple[str, str], Guard] = {}
        self.constants: dict[str, Any] = {}
        self.watched: list[Any] = []  # objects guarded by id: their death invalidates the entry
        self.tensors: list[tuple[str, torch.Tensor]] = []  # TENSOR_MATCH, checked in one C++ call
        self._by_id: dict[int, str] = {}

    def _const(self, value: Any) -> str:
        if id(value) not in self._by_id:
            name = f"___c{len(self.constants)}"
            self.constants[name] = value
            self._by_id[id(value)] = name
        return self._by_id[id(value)]

    def add(self, source: Source, kind: str, value: Any) -> None:
        root = source.root()
        if isinstance(root, ConstSource):
            self.constants.setdefault("K", {})[id(root.value)] = root.value
        name = source.name()
        if (name, kind) in self.guards:
            return
        self.guards[(name, kind)] = Guard(name=name, kind=kind, code_list=tuple(self._code(name, kind, value)),
                                          source_kind=source.kind)

    def add_global_state(self) -> None:
        self.guards[("", "GRAD_MODE")] = Guard(
            name="", kind="GRAD_MODE", code_list=(f"___is_grad_enabled() is {torch.is_grad_enabled()}",),
            source_kind="global")
        self.guards[("", "DEFAULT_DTYPE")] = Guard(
            name="", kind="DEFAULT_DTYPE", code_list=(f"___get_default_dtype() is {self._const(torch.get_default_dtype())}",),
            source_kind="global")
        self.guards[("", "DEFAULT_DEVICE")] = Guard(
            name="", kind="DEFAULT_DEVICE", code_list=(f"___get_default_device() == {_get_default_device()!r}",),
            source_kind="global")

    def _code(self, x: str, kind: str, value: Any) -> list[str]:
        if kind == "TENSOR_MATCH":
            self.tensors.append((x, value))
            return [f"type({x}) is {self._const(type(value))}", f"{x}.dtype is {self._const(value.dtype)}",
                    f"{x}.device == {self._const(value.device)}",
                    f"{x}.requires_grad is {value.requires_grad}",
                    f"{x}.shape == {tuple(value.shape)!r}", f"{x}.stride() == {tuple(value.stride())!r}",
                    f"{x}.storage_offset() == {value.storage_offset()}",
                    f"___dispatch_keys({x}) == {self._const(_dispatch_keys(value))}"]
        if kind in ("ID_MATCH", "FUNCTION_MATCH"):
            try:
                weakref.ref(value)
            except TypeError:
                return [f"{x} is {self._const(value)}"]
            self.watched.append(value)
            return [f"id({x}) == {id(value)}"]
        if kind == "EQUALS":
            literal = repr(value) if type(value) in _INLINE_TYPES else self._const(value)
            if isinstance(value, float) and value != value:
                return [f"type({x}) is float", f"{x} != {x}"]
            if isinstance(value, float) and value == 0.0:  # 0.0 == -0.0, but 1/x differs
                return [f"type({x}) is float", f"{x} == 0.0", f"___copysign(1.0, {x}) == {math.copysign(1.0, value)}"]
            return [f"type({x}) is {self._const(type(value))}", f"{x} == {literal}"]
        if kind == "TYPE_MATCH":
            return [f"type({x}) is {self._const(type(value))}"]
        if kind == "LEN_MATCH":
            return [f"type({x}) is {self._const(type(value))}", f"len({x}) == {len(value)}"]
        if kind == "DICT_KEYS":
            return [f"type({x}) is {self._const(type(value))}", f"list({x}) == {list(value)!r}"]
        if kind == "NO_ATTR":
            return [f"not hasattr({x}, {value!r})"]
        if kind == "NO_KEY":
            return [f"{value!r} not in {x}"]
        if kind == "ALIAS":  # value: the name of the source this one must be the same object as
            return [f"{x} is {value}"]
        if kind == "NOT_ALIAS":
            return [f"{x} is not {value}"]
        raise AssertionError(f"unknown guard kind {kind}")

    def ordered(self) -> list[Guard]:
        return list(self.guards.values())


_HELPERS: dict[str, Any] = {"___check_tensors": _tensor_guard.check_tensors, "___dispatch_keys": _dispatch_keys, "___get_default_device": _get_default_device,
                            "___is_grad_enabled": _is_grad_enabled, "___copysign": math.copysign,
                            "___get_default_dtype": torch.get_default_dtype}


def compile_guard_fn(guard_set: GuardSet, code: types.CodeType, argnames: tuple[str, ...]
                     ) -> tuple[Callable[..., bool], str]:
    """Generate `guard(fn, *arg_slots) -> bool` for these guards; returns it and its source."""
    slot_of = {name: i for i, name in enumerate(argnames)}
    freevars = code.co_freevars

    def rewrite(expr: str) -> str:
        def sub(m: re.Match) -> str:
            if m.group(3) is not None:  # K[id]: an object known by identity
                return guard_set._const(guard_set.constants["K"][int(m.group(3))])
            root, key = m.group(1), eval(m.group(2))
            if root == "L":
                return f"___a{slot_of[key]}"
            if root == "C":
                return f"___C[{freevars.index(key)}].cell_contents"
            if root == "M":
                return guard_set._const(vars(sys.modules[key]))
            return f"___G[{key!r}]"
        return _NAME.sub(sub, expr)

    # The readable per-tensor checks are for failure messages; the fast path checks all tensors in C++.
    exprs = [_BARE_G.sub("___G", rewrite(c)) for g in guard_set.ordered() if g.kind != "TENSOR_MATCH"
             for c in g.code_list]
    namespace = dict(_HELPERS, **guard_set.constants)
    if guard_set.tensors:
        namespace["___tensor_spec"] = _tensor_guard.make_spec([t for _, t in guard_set.tensors])
        exprs.insert(0, "___check_tensors(___tensor_spec, " + ", ".join(rewrite(x) for x, _ in guard_set.tensors) + ")")
    body = " and ".join(f"({e})" for e in exprs) or "True"
    params = ", ".join(["___fn", *[f"___a{i}" for i in range(len(argnames))]])
    prologue = ""
    if "___G" in body:
        prologue += "    ___G = ___fn.__globals__\n"
    if "___C[" in body:
        prologue += "    ___C = ___fn.__closure__\n"
    source = f"def ___guard({params}):\n{prologue}    return {body}\n"
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
        super().__init__({k: c.cell_contents for k, c in cells.items()})


def _describe(guard: Guard, check: str, ns: dict[str, Any]) -> str:
    if guard.kind == "GRAD_MODE":
        return f"grad mode changed: expected {not torch.is_grad_enabled()}, got {torch.is_grad_enabled()}"
    if guard.kind == "DEFAULT_DTYPE":
        return f"default dtype changed to {torch.get_default_dtype()}"
    if guard.kind == "DEFAULT_DEVICE":
        return f"default device changed to {_get_default_device()!r}"
    try:
        actual = eval(guard.name, ns)
    except Exception as e:
        return f"{guard.name}: {type(e).__name__}: {e}"
    if guard.kind == "TENSOR_MATCH":
        m = re.match(r".*?\.(\w+)(?:\(\))? (?:==|is) (.*)$", check)
        what = m.group(1) if m else check
        if check.startswith("type("):
            return f"{guard.name}: expected a {eval(check.split(' is ')[1], ns).__name__}, got {type(actual).__name__}"
        if what == "___dispatch_keys" or check.startswith("___dispatch_keys"):
            return f"{guard.name}: dispatch keys changed to {_dispatch_keys(actual)}"
        expected = eval(m.group(2), ns) if m else "?"
        got = getattr(actual, what)
        got = got() if callable(got) else got
        return f"{guard.name}: {what} mismatch, expected {expected}, got {got}"
    if guard.kind in ("ID_MATCH", "FUNCTION_MATCH"):
        return f"{guard.name}: a different object ({type(actual).__name__}) than when compiled"
    if guard.kind == "EQUALS":
        return f"{guard.name}: value changed to {actual!r} (failed `{check}`)"
    return f"{guard.name}: failed `{check}` (value: {type(actual).__name__})"
