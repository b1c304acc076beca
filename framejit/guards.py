"""Guards: what a cache entry assumes, recorded as (source, kind, value) with structured checks."""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import operator
import sys
import types
import weakref
from typing import Any, Callable

import torch

from framejit import shapes
from framejit.contracts import GUARDED_VALUE as X
from framejit.contracts import Check, Guard, GuardKind
from framejit.sources import ConstSource, LocalSource, Source, written_inline
from framejit.codeobj import passed_cells
from framejit.codeobj.reading import safe_repr

_dispatch_keys = torch._C._dispatch_keys
_has_storage = torch._C._has_storage
_storage_id = torch._C._storage_id  # type: ignore[attr-defined]  # torch's stubs omit it
_get_default_device = torch._C._get_default_device
_INLINE_TYPES = (int, str, bytes)
_AUTOCAST_DEVICES = ("cpu", "cuda")


def _storage_sharing(*tensors: torch.Tensor) -> tuple[int, ...]:
    """For each tensor, the position of the first one with the same storage (its own, where none is before, or
    where it has none to read: a sparse tensor, a subclass refusing access)."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(key, i) if (key := _storage_key(t)) is not None else i for i, t in enumerate(tensors))


def _storage_key(tensor: torch.Tensor) -> int | None:
    try:
        return _storage_id(tensor) if _has_storage(tensor) else None
    except RuntimeError:
        return None


def _subclass_metadata(t: Any) -> tuple[Any, bool]:
    """What a SUBCLASS_METADATA guard keeps of a wrapper subclass tensor: a copy of its `__tensor_flatten__`
    metadata, and whether its class compares two with a `__metadata_guard__` of its own."""
    return copy.deepcopy(t.__tensor_flatten__()[1]), hasattr(type(t), "__metadata_guard__")


def _subclass_metadata_matches(t: Any, saved: tuple[Any, bool]) -> bool:
    metadata, custom = saved
    now = t.__tensor_flatten__()[1]
    return bool(type(t).__metadata_guard__(metadata, now) if custom else now == metadata)


def _autocast_state() -> tuple[Any, ...]:
    """Which devices autocast is on for, and to which dtype: part of what a graph was traced under."""
    return tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)


HELPERS: dict[str, Any] = {
    "___dispatch_keys": _dispatch_keys,
    "___get_default_device": _get_default_device,
    "___is_grad_enabled": torch.is_grad_enabled,
    "___copysign": math.copysign,
    "___get_default_dtype": torch.get_default_dtype,
    "___any_autocast": torch._C._is_any_autocast_enabled,
    "___autocast_state": _autocast_state,
    "___storage_sharing": _storage_sharing,
    "___object_getattr": object.__getattribute__,
    "___dict_getitem": dict.__getitem__,
    "___subclass_metadata_matches": _subclass_metadata_matches,
    # what the shape environment's guards name when printed as Python (a float symbol's `math.isnan(...)`)
    "math": math,
    "torch": torch,
}


@dataclasses.dataclass(frozen=True)
class GuardRecord:
    source: Source | None  # None for global state (grad mode, default dtype/device)
    kind: GuardKind
    value: Any
    guard: Guard

    def guarded_source(self) -> Source:
        """The source of the value this guard is on (every kind but the global-state ones has one)."""
        assert self.source is not None, f"a {self.kind} guard is on no value"
        return self.source


def _readable(source: Source) -> str:
    return source.name()


def _literal(expr: str, op: str, expected: Any, field: str = "") -> Check:
    """A check whose expected value is written inline (a bool, int, tuple of ints, list of keys...)."""
    return Check(expr, op=op, expected=expected, expected_text=repr(expected), field=field)


class GuardSet:
    """The guards of one compile, in the order they were recorded."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], GuardRecord] = {}
        self.constants: dict[str, Any] = {}
        self.watched: list[Any] = []  # objects guarded by id: their death invalidates the entry
        self.dynamic_dims: dict[str, frozenset[int]] = {}  # tensor source name -> its symbolic dims
        self.dynamic_strides: dict[str, frozenset[int]] = {}  # tensor source name -> the dims of its symbolic strides
        self.dynamic_offsets: set[str] = set()  # tensor source names whose storage offset is symbolic
        self._by_id: dict[int, str] = {}

    def _const(self, value: Any) -> str:
        if id(value) not in self._by_id:
            name = f"___c{len(self.constants)}"
            self.constants[name] = value
            self._by_id[id(value)] = name
        return self._by_id[id(value)]

    def add(
        self,
        source: Source,
        kind: GuardKind,
        value: Any,
        dynamic_dims: frozenset[int] = frozenset(),
        dynamic_strides: frozenset[int] = frozenset(),
        dynamic_offset: bool = False,
    ) -> None:
        """Record a guard; for ALIAS/NOT_ALIAS `value` is the other Source; for TENSOR_MATCH, `dynamic_dims` are
        the dims whose size is symbolic, `dynamic_strides` those whose stride is and `dynamic_offset` whether
        the storage offset is (the shape guards cover them). Every other size, stride and offset of the trace's
        fake was a plain number the trace may have read (`is_contiguous()` reads the strides): each is checked
        by value."""
        name = source.name()
        if issubclass(type(value), Source):  # not isinstance(): it may run a user __getattribute__
            key = (name, f"{kind} {value.name()}")
        elif kind in (GuardKind.NO_KEY, GuardKind.NO_ATTR):  # one source, several names that must stay absent
            key = (name, f"{kind} {value!r}")
        else:
            key = (name, kind)
        if key in self.records:
            return
        root = source.root()
        if isinstance(root, ConstSource):
            self.constants.setdefault("K", {})[id(root.value)] = root.value
        if kind in (GuardKind.ID_MATCH, GuardKind.FUNCTION_MATCH) and weakrefable(value):
            self.watched.append(value)
        checks = tuple(self._checks(kind, value, dynamic_dims, dynamic_strides, dynamic_offset))
        code = tuple(c.text(name, _readable) for c in checks)
        self.records[key] = GuardRecord(
            source, kind, value, Guard(name=name, kind=kind, code_list=code, source_kind=source.kind, checks=checks)
        )
        if dynamic_dims:
            self.dynamic_dims[name] = dynamic_dims
        if dynamic_strides:
            self.dynamic_strides[name] = dynamic_strides
        if dynamic_offset:
            self.dynamic_offsets.add(name)

    def watch(self, value: Any) -> None:
        """Tie the entry's life to `value` (a module guarded by type): when it dies the entry is dropped, as one
        guarded by its identity would be, though other objects of its type meanwhile use the entry too."""
        if weakrefable(value) and not any(w is value for w in self.watched):
            self.watched.append(value)

    def settle_dynamic_dims(self, still_symbolic: dict[str, frozenset[int]], specialised_ints: dict[str, int]) -> None:
        """Check again by value the dims of a tensor, and the int inputs, that the trace specialised (a
        `range(x.shape[0])`): the shape environment then has a replacement rather than a guard for them."""
        for name, value in specialised_ints.items():
            record = self.records[(name, GuardKind.TYPE_MATCH)]
            self.add(record.guarded_source(), GuardKind.EQUALS, value)
        for name, dims in still_symbolic.items():
            if dims == self.dynamic_dims.get(name):
                continue
            record = self.records.pop((name, GuardKind.TENSOR_MATCH))
            self.dynamic_dims.pop(name, None)
            strides = self.dynamic_strides.pop(name, frozenset()) if dims else frozenset()
            offset = name in self.dynamic_offsets and bool(dims)
            self.dynamic_offsets.discard(name)
            self.add(record.guarded_source(), GuardKind.TENSOR_MATCH, record.value, dims, strides, offset)

    def add_shape_guards(self, exprs: list[str], tokens: dict[str, Source]) -> None:
        """The shape environment's guards on the symbolic sizes (shapes.TraceShapes.guards), written over
        tokens that stand for the input tensors: one guard, each expression a check over readable names."""
        if not exprs:
            return
        readable = [shapes.render(e, tokens, _readable) for e in exprs]
        checks = tuple(Check(e, field="shape") for e in readable)
        self.records[("", "SHAPE_ENV")] = GuardRecord(
            None,
            GuardKind.SHAPE_ENV,
            (tuple(exprs), tokens),
            Guard(name="", kind=GuardKind.SHAPE_ENV, code_list=tuple(readable), source_kind="global", checks=checks),
        )

    def add_storage_sharing(self) -> None:
        """Which guarded tensors share storage, as when traced: the trace's fakes share storage as the examples did,
        and what was compiled relies on it (a write through one input is seen through the others, or not).
        The fast path is the TENSOR_MATCH C++ call; this record explains a miss."""
        tensors = [r for r in self.records.values() if r.kind == GuardKind.TENSOR_MATCH]
        if len(tensors) > 1:
            call = f"___storage_sharing({', '.join(_readable(r.guarded_source()) for r in tensors)})"
            self._add_global(
                "STORAGE_SHARING",
                GuardKind.STORAGE_SHARING,
                "",
                _literal(call, "==", _storage_sharing(*(r.value for r in tensors))),
            )

    def add_global_state(self) -> None:
        device = _get_default_device()
        autocast_off = not torch._C._is_any_autocast_enabled()
        for kind, fn, check in (
            (
                GuardKind.GRAD_MODE,
                torch.is_grad_enabled,
                _literal("___is_grad_enabled()", "is", torch.is_grad_enabled()),
            ),
            (
                GuardKind.DEFAULT_DTYPE,
                torch.get_default_dtype,
                self._is("___get_default_dtype()", torch.get_default_dtype()),
            ),
            (GuardKind.DEFAULT_DEVICE, _get_default_device, _literal("___get_default_device()", "==", device)),
            # one C call when autocast is off, the usual case; the full state when it is on
            (
                GuardKind.AUTOCAST,
                *(
                    (torch._C._is_any_autocast_enabled, _literal("___any_autocast()", "is", False))
                    if autocast_off
                    else (_autocast_state, self._equal("___autocast_state()", _autocast_state()))
                ),
            ),
        ):
            self._add_global(kind, kind, "", check, (fn, ()))

    def add_query(self, fn: Callable[..., Any], args: tuple, result: Any) -> None:
        """A query of global state folded to `result` at trace time (torch.get_autocast_dtype("cpu")...): the
        entry holds only while the query still answers the same."""
        call = f"{self._const(fn)}(*{self._const(args)})"
        self._add_global(
            f"QUERY {call}",
            GuardKind.GLOBAL_QUERY,
            f"{getattr(fn, '__name__', fn)}({', '.join(map(repr, args))})",
            self._equal(call, result),
            (fn, args),
        )

    def _add_global(
        self, key: str, kind: GuardKind, name: str, check: Check, call: tuple[Callable[..., Any], tuple] | None = None
    ) -> None:
        """A guard on torch's state rather than on a source: its check reads no guarded value. `call` is the
        (function, arguments) whose result the check compares, where it is one call."""
        self.records[("", key)] = GuardRecord(
            None,
            kind,
            call,
            Guard(name=name, kind=kind, code_list=(check.text("", _readable),), source_kind="global", checks=(check,)),
        )

    def _is(self, expr: str, expected: Any, field: str = "") -> Check:
        return Check(expr, op="is", expected=expected, expected_text=self._const(expected), field=field)

    def _equal(self, expr: str, expected: Any, field: str = "") -> Check:
        return Check(expr, op="==", expected=expected, expected_text=self._const(expected), field=field)

    def _checks(
        self,
        kind: GuardKind,
        value: Any,
        dynamic_dims: frozenset[int] = frozenset(),
        dynamic_strides: frozenset[int] = frozenset(),
        dynamic_offset: bool = False,
    ) -> list[Check]:
        """The checks of one guard, over the guarded value written X."""
        match kind:
            case GuardKind.TENSOR_MATCH:
                return self._tensor_checks(value, dynamic_dims, dynamic_strides, dynamic_offset)
            case GuardKind.ID_MATCH | GuardKind.FUNCTION_MATCH:
                return [_literal(f"id({X})", "==", id(value))] if weakrefable(value) else [self._is(X, value)]
            case GuardKind.EQUALS:
                return self._equals_checks(value)
            case GuardKind.CODE_MATCH:  # a function by its code: closures made anew each call still match
                return [self._is(f"type({X})", type(value)), self._is(f"{X}.__code__", value.__code__)]
            case GuardKind.TYPE_MATCH:
                return [self._is(f"type({X})", type(value))]
            case GuardKind.SUBCLASS_METADATA:
                saved = self._const(_subclass_metadata(value))
                return [
                    self._is(f"type({X})", type(value), "type"),
                    Check(f"___subclass_metadata_matches({X}, {saved})", field="metadata"),
                ]
            case GuardKind.LEN_MATCH:
                return [self._is(f"type({X})", type(value)), _literal(f"len({X})", "==", len(value))]
            case GuardKind.DICT_KEYS:
                keys = list(value)  # written inline when every key is; else compared with the list it was
                if not keys:  # (the global hook dicts of every module call: no list made)
                    return [self._is(f"type({X})", type(value)), Check(f"not {X}")]
                return [
                    self._is(f"type({X})", type(value)),
                    _literal(f"list({X})", "==", keys)
                    if all(map(written_inline, keys))
                    else self._equal(f"list({X})", keys),
                ]
            case GuardKind.NO_HOOKS:  # a module called: still no hooks (nor an instance `forward`); one check
                dicts, forward_from_class = value
                parts = [Check(f"{X}.{d}", field=d) for d in dicts]
                if forward_from_class:
                    parts.append(Check(f"'forward' in {X}.__dict__", field="forward"))
                return [Check.none_of(parts)]
            case GuardKind.NO_ATTR:
                return [Check(f"not hasattr({X}, {value!r})")]
            case GuardKind.NO_KEY:
                return [Check(f"{value!r} not in {X}")]
            case GuardKind.ALIAS:
                return [Check(X, op="is", expected=value, expected_text=None)]
            case GuardKind.NOT_ALIAS:
                return [Check(X, op="is not", expected=value, expected_text=None)]
        raise AssertionError(f"unknown guard kind {kind}")

    def _tensor_checks(
        self, t: torch.Tensor, dynamic_dims: frozenset[int], dynamic_strides: frozenset[int], dynamic_offset: bool
    ) -> list[Check]:
        if dynamic_dims:  # the static sizes and strides one by one; symbolic ones are the shape guards' business
            layout = [_literal(f"{X}.dim()", "==", t.dim(), "shape")]
            layout += [
                _literal(f"{X}.size({d})", "==", n, "shape") for d, n in enumerate(t.shape) if d not in dynamic_dims
            ]
            layout += [
                _literal(f"{X}.stride({d})", "==", n, "stride")
                for d, n in enumerate(t.stride())
                if d not in dynamic_strides
            ]
        else:
            layout = [
                _literal(f"{X}.shape", "==", tuple(t.shape), "shape"),
                _literal(f"{X}.stride()", "==", tuple(t.stride()), "stride"),
            ]
        return [
            self._is(f"type({X})", type(t), "type"),
            self._is(f"{X}.dtype", t.dtype, "dtype"),
            self._equal(f"{X}.device", t.device, "device"),
            _literal(f"{X}.requires_grad", "is", t.requires_grad, "requires_grad"),
            *layout,
            *(
                []
                if dynamic_offset
                else [_literal(f"{X}.storage_offset()", "==", t.storage_offset(), "storage_offset")]
            ),
            self._equal(f"___dispatch_keys({X})", _dispatch_keys(t), "dispatch_keys"),
        ]

    def _equals_checks(self, value: Any) -> list[Check]:
        if isinstance(value, float) and value != value:
            return [Check(f"type({X})", op="is", expected=float, expected_text="float"), Check(f"{X} != {X}")]
        checks = [
            self._is(f"type({X})", type(value)),
            _literal(X, "==", value) if type(value) in _INLINE_TYPES else self._equal(X, value),
        ]
        if isinstance(value, float) and value == 0.0:  # 0.0 == -0.0, but 1/x differs
            checks.append(_literal(f"___copysign(1.0, {X})", "==", math.copysign(1.0, value)))
        return checks

    def identity(self) -> tuple[tuple[str, int], ...]:
        """(argument name, id) of the arguments guarded by identity, and of the modules among them (a module's
        `self`, guarded by type): which objects an entry was made for. The cache size limit counts entries per
        such objects, so compiling each of many layers of other shapes on its own is not recompiling."""
        # (the type, not isinstance(): that reads `__class__` through a user's own __getattribute__)
        return tuple(
            (r.source.local_name, id(r.value))
            for r in self.records.values()
            if isinstance(r.source, LocalSource)
            and (
                r.kind == GuardKind.ID_MATCH
                or (r.kind == GuardKind.TYPE_MATCH and issubclass(type(r.value), torch.nn.Module))
            )
            and weakrefable(r.value)
        )

    def ordered(self) -> list[Guard]:
        return [r.guard for r in self.records.values()]


def weakrefable(value: Any) -> bool:
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


def explain_failure(
    guards: list[Guard], constants: dict[str, Any], fn: types.FunctionType, argnames: tuple[str, ...], args: tuple
) -> tuple[Guard, str] | None:
    """The first guard that fails for these arguments, with a readable reason (slow path): each check's
    expression is evaluated over the readable names and compared with what it expects."""
    closure = {name: cell for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
    closure.update((name, cell) for name, cell in zip(argnames, args) if name in passed_cells(fn.__code__))
    ns = dict(
        HELPERS,
        **constants,
        L=dict(zip(argnames, args)),
        G=fn.__globals__,
        C=_CellContents(closure),
        M=_ModuleDicts(),
    )
    for guard in guards:
        for check, text in zip(guard.checks, guard.code_list, strict=True):
            try:
                actual = eval(check.over(guard.name), ns)
                expected = eval(check.expected.name(), ns) if isinstance(check.expected, Source) else check.expected
                ok = bool(_HOLDS[check.op](actual, expected))
            except (NameError, SyntaxError):  # a name written for reading (a key's repr), not for evaluating
                break
            except Exception as e:  # a missing attribute or key is a failed guard
                return guard, f"{guard.name or guard.kind}: {type(e).__name__}: {e}"
            if not ok:
                return guard, _describe(guard, check, text, actual, ns)
    return None


_HOLDS: dict[str, Callable[[Any, Any], Any]] = {
    "is": operator.is_,
    "is not": operator.is_not,
    "==": operator.eq,
    "": lambda actual, expected: actual,
}


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


def _describe(guard: Guard, check: Check, text: str, actual: Any, ns: dict[str, Any]) -> str:
    """Why `check` (written `text`) failed, `actual` being what its expression evaluates to now."""
    match guard.kind:
        case GuardKind.GRAD_MODE:
            return f"grad mode changed to {actual}"
        case GuardKind.DEFAULT_DTYPE:
            return f"default dtype changed to {actual}"
        case GuardKind.DEFAULT_DEVICE:
            return f"default device changed to {actual!r}"
        case GuardKind.SHAPE_ENV:
            return f"a dynamic size no longer satisfies `{text}`"
        case GuardKind.STORAGE_SHARING:
            call = ast.parse(check.expr, mode="eval").body
            assert isinstance(call, ast.Call)  # ___storage_sharing(...), written by add_storage_sharing
            names = [ast.unparse(a) for a in call.args]
            return (
                f"other tensors share storage (are views of one another) than when compiled: now "
                f"{_sharing(names, actual)}, then {_sharing(names, check.expected)}"
            )
        case GuardKind.GLOBAL_QUERY:
            return f"{guard.name} now returns {safe_repr(actual)}"
        case GuardKind.AUTOCAST:
            on = [f"{d} ({str(dtype).removeprefix('torch.')})" for d, enabled, dtype in _autocast_state() if enabled]
            return f"autocast changed: now {'on for ' + ', '.join(on) if on else 'off'}"
        case GuardKind.SUBCLASS_METADATA if check.field == "metadata":
            now = eval(guard.name, ns).__tensor_flatten__()[1]
            return f"{guard.name}: {type(eval(guard.name, ns)).__name__}'s metadata changed to {safe_repr(now)}"
        case GuardKind.TENSOR_MATCH if check.field == "type":
            return f"{guard.name}: expected a {check.expected.__name__}, got {actual.__name__}"
        case GuardKind.TENSOR_MATCH if check.field == "dispatch_keys":
            return f"{guard.name}: dispatch keys changed to {actual}"
        case GuardKind.TENSOR_MATCH:
            return f"{guard.name}: {check.field} mismatch, expected {check.expected}, got {actual}"
        case GuardKind.NO_HOOKS:
            added = [part.field for part in check.parts if eval(part.over(guard.name), ns)]
            if "forward" in added:
                return f"{guard.name}: forward was replaced on the instance"
            return f"{guard.name}: hooks were registered ({', '.join(added)})"
        case GuardKind.ID_MATCH | GuardKind.FUNCTION_MATCH | GuardKind.EQUALS:
            try:  # it was read within the check, but reading it again (a property, a call) may raise
                value = eval(guard.name, ns)
            except Exception as e:
                return f"{guard.name}: {type(e).__name__}: {e}"
            if guard.kind == GuardKind.EQUALS:
                return f"{guard.name}: value changed to {safe_repr(value)} (failed `{text}`)"
            return f"{guard.name}: a different object ({type(value).__name__}) than when compiled"
    return f"{guard.name}: failed `{text}`"


def _sharing(names: list[str], groups: tuple[int, ...]) -> str:
    """The groups of more than one tensor in `_storage_sharing`'s answer `groups`, by name."""
    members: dict[int, list[str]] = {}
    for name, first in zip(names, groups):
        members.setdefault(first, []).append(name)
    shared = [f"({', '.join(m)})" for m in members.values() if len(m) > 1]
    return " and ".join(shared) or "none"
