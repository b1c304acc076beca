"""The arguments of an autograd.Function's `apply` in the graph: the node takes their tensors, and rebuilds the rest
around them at each call (lists, tuples, dicts, and stand-ins for objects), so that a dataclass, a module or a list
of tensors reaches the real `apply` as eager's call gives it, with the tensors the graph was given.

A stand-in is a new instance of the object's class whose `__dict__` is the object's, with what the trace read in it
(tensors, numbers, containers, objects: each rebuilt the same way) put in place. The object is guarded by identity,
so its other attributes are the live ones. A forward that writes into an argument writes into the stand-in: the
trace keeps those writes and replays them onto the real object after the graph, once per call, and a tensor the
forward made and wrote there is read back from the stand-in as an extra output of the node.
"""

from __future__ import annotations

import enum
import types
from typing import Any, NamedTuple, Sequence

import torch

from framejit.contracts import Tracer
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.guards import GuardKind
from framejit.variables.base import Variable, lookup_class_attr
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.nn_module import NNModuleVariable, NewModuleVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable, UserObjectVariable

_DEPTH = 4  # how deep objects and containers inside arguments are rebuilt
_MODULE_PARTS = ("_parameters", "_buffers", "_modules")
_HEAPTYPE = 1 << 9  # a class statement's class, not one written in C

# A spec says how one argument is rebuilt from the node's tensor arguments (`leaves`):
#   ("leaf", i) | ("const", value) | ("seq", type, key, [spec]) | ("map", type, key, [(k, spec)])
#   ("obj", cls, template | None, key, {name: spec}, {part: {name: spec}})
# `key` names one container or object: two places holding it get one rebuilt value.
Spec = tuple


class LiveState(NamedTuple):
    """A list, dict or object from outside that the forward writes into, reached from a global."""

    var: Variable
    value: Any  # the real one (guarded by identity)
    before: Any  # what the trace held in it when the call started, where the trace had changed it: items (a list),
    # (key, item) pairs (a dict), {name: value} (an object's attributes); None where it holds what it held


class ApplyArguments:
    """The arguments of one `apply` call, as the node rebuilds them."""

    def __init__(self) -> None:
        self.leaves: list[Variable] = []
        self.args: list[Spec] = []
        self.kwargs: dict[str, Spec] = {}
        self.held: dict[int, tuple[Variable, tuple]] = {}  # id(container or object Variable) -> (it, its path)
        # lists, dicts and objects from outside the forward writes into, reached from globals (autograd_writes.py)
        self.live: list[LiveState] = []
        self.installs: list[Spec | None] = []  # for each, what the trace holds in it when the call starts

    def direct_leaves(self) -> tuple[int, ...]:
        """The positions among the leaves of the tensors apply gets as arguments of its own."""
        return tuple(s[1] for s in (*self.args, *self.kwargs.values()) if s[0] == "leaf")

    def describe_live_state(self, tx: Tracer, name: str) -> None:
        """What the node puts in each live list, dict or object before the real forward runs: what the trace held
        in it when the call started (the graph's earlier calls have not written it yet at run time)."""
        for live in self.live:
            before, path = live.before, (("live", 0),)
            if before is None:
                self.installs.append(None)
            elif isinstance(live.value, list):
                items = [_describe(tx, name, v, self, path, 1) for v in before]
                self.installs.append(("seq", list, id(before), items))
            elif isinstance(live.value, dict):
                self.installs.append(
                    ("map", dict, id(before), [(k, _describe(tx, name, v, self, path, 1)) for k, v in before])
                )
            else:
                self.installs.append(("attrs", {n: _describe(tx, name, v, self, path, 1) for n, v in before.items()}))

    def enter_live_state(self, leaves: Sequence[Any]) -> Any:
        """Put in the live lists, dicts and objects what the trace held in them when the call started; calling
        the result puts back what they held before. (The forward's writes there are the replay's to make, after
        the graph: the trace keeps them.)"""
        saved = [
            (v, list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else dict(v.__dict__))
            for v in (live.value for live in self.live)
        ]
        memo: dict[int, Any] = {}
        for live, spec in zip(self.live, self.installs):
            if spec is None:
                continue
            if spec[0] == "attrs":
                live.value.__dict__.update((n, _build(s, leaves, memo)) for n, s in spec[1].items())
            elif isinstance(live.value, list):
                list.__setitem__(live.value, slice(None), _build(spec, leaves, memo))
            else:
                dict.clear(live.value)
                dict.update(live.value, _build(spec, leaves, memo))

        def restore() -> None:
            for value, held in saved:
                if isinstance(value, list):
                    list.__setitem__(value, slice(None), held)
                else:
                    target = value if isinstance(value, dict) else value.__dict__
                    dict.clear(target)
                    dict.update(target, held)

        return restore

    def rebuild(self, leaves: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
        memo: dict[int, Any] = {}
        return [_build(s, leaves, memo) for s in self.args], {
            k: _build(s, leaves, memo) for k, s in self.kwargs.items()
        }


def describe(tx: Tracer, name: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> ApplyArguments:
    """How the node takes and rebuilds `apply`'s arguments; a graph break naming what it cannot take."""
    out = ApplyArguments()
    out.args = [_describe(tx, name, a, out, (("arg", i),), 0) for i, a in enumerate(args)]
    out.kwargs = {k: _describe(tx, name, v, out, (("kw", k),), 0) for k, v in kwargs.items()}
    return out


def _describe(tx: Tracer, name: str, var: Variable, out: ApplyArguments, path: tuple, depth: int) -> Spec:
    if isinstance(var, (TensorVariable, SymbolicVariable)):
        out.leaves.append(var)
        return ("leaf", len(out.leaves) - 1)
    if depth > _DEPTH:
        _refuse(name, var, "nested too deep")
    key = id(var)
    seen = out.held.get(key)
    if seen is None and type(var) in (ListVariable, TupleVariable, DictVariable, NewObjectVariable):
        out.held[key] = (var, path)
    if type(var) in (ListVariable, TupleVariable):
        items = var.items  # type: ignore[attr-defined]
        specs = [_describe(tx, name, v, out, (*path, ("item", i)), depth + 1) for i, v in enumerate(items)]
        return ("seq", var.python_type(), key, specs)
    if type(var) is DictVariable and var.python_type() is dict:
        items = var.items  # type: ignore[attr-defined]
        if not all(isinstance(k, (str, int, float, bool, type(None), enum.Enum)) for k in items):
            _refuse(name, var, "a dict whose keys are not constants")
        pairs = [(k, _describe(tx, name, v, out, (*path, ("item", k)), depth + 1)) for k, v in items.items()]
        return ("map", dict, key, pairs)
    if isinstance(var, (UserObjectVariable, NNModuleVariable, NewObjectVariable)):
        return _describe_object(tx, name, var, out, path, depth)
    if var.is_python_constant():
        return ("const", var.as_python_constant())
    _refuse(name, var, "not a tensor, a constant, a list, tuple or dict of them, or an object")


def _describe_object(tx: Tracer, name: str, var: Variable, out: ApplyArguments, path: tuple, depth: int) -> Spec:
    """A stand-in for an object: a new instance of its class, its attributes the ones the trace sees."""
    key = id(var)
    if isinstance(var, NewObjectVariable):  # made in the frame: all its attributes are the trace's writes
        if var.base_part is not None or var.dropped:
            _refuse(name, var, "an instance of a dict, list or set subclass")
        out.held.setdefault(key, (var, path))
        log = tx.output.side_effects
        attrs = {
            n: _describe(tx, name, log.pending_attr(var, n), out, (*path, ("attr", n)), depth + 1)  # type: ignore[arg-type]
            for n in log.attribute_names(var)
        }
        return ("obj", var.cls, None, key, attrs, {})
    real = var.module if isinstance(var, NNModuleVariable) else var.value  # type: ignore[attr-defined]
    cls = type(real)
    if (
        var.source is None  # type: ignore[attr-defined]
        or isinstance(var, NewModuleVariable)
        or not isinstance(getattr(real, "__dict__", None), dict)
        or lookup_class_attr(cls, "__slots__")[0] is not None
        or not all(base.__flags__ & _HEAPTYPE for base in cls.__mro__[:-1])  # object.__new__ cannot make it
    ):
        _refuse(name, var, "an object the node cannot stand in for (no source, slots, or a builtin base)")
    out.held.setdefault(key, (var, path))
    tx.output.guards.add(var.source, GuardKind.ID_MATCH, real)  # type: ignore[attr-defined]
    attrs: dict[str, Spec] = {}
    parts: dict[str, dict[str, Spec]] = {}
    module = isinstance(real, torch.nn.Module)
    for attr in list(real.__dict__):
        if module and attr in _MODULE_PARTS:
            parts[attr] = {
                n: _describe(tx, name, var.var_getattr(tx, n), out, (*path, ("attr", n)), depth + 1)
                for n, v in real.__dict__[attr].items()
                if v is not None
            }
            continue
        if (module and attr.startswith("_")) or _is_data_descriptor(cls, attr) or not _holds_state(real.__dict__[attr]):
            continue  # module internals (hooks), a name a class property shadows, a function: the live one
        try:
            attrs[attr] = _describe(tx, name, var.var_getattr(tx, attr), out, (*path, ("attr", attr)), depth + 1)
        except Unsupported:
            if _holds_tensor(real.__dict__[attr]):
                raise
            # (a value the node cannot rebuild, holding no tensor: the live one, as the forward reads it)
    return ("obj", cls, real, key, attrs, parts)


def _holds_state(value: Any) -> bool:
    """Whether an attribute's value is data the trace reads (and the stand-in must hold as the trace sees it)."""
    return not isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type))


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return any(isinstance(v, torch.Tensor) for v in items)


def _is_data_descriptor(cls: type, name: str) -> bool:
    attr = lookup_class_attr(cls, name)[0]
    return attr is not None and hasattr(type(attr), "__set__")


def _refuse(name: str, var: Variable, why: str) -> None:
    unsupported(
        f"autograd.Function {name}.apply gets {var}: {why}, which the graph node cannot rebuild around its tensors",
        BreakCode.AUTOGRAD_FUNCTION,
    )


def _build(spec: Spec, leaves: Sequence[Any], memo: dict[int, Any]) -> Any:
    kind = spec[0]
    if kind == "leaf":
        return leaves[spec[1]]
    if kind == "const":
        return spec[1]
    key = spec[2] if kind != "obj" else spec[3]
    if key in memo:
        return memo[key]
    if kind == "seq":
        if spec[1] is list:
            memo[key] = made = []
            made.extend(_build(s, leaves, memo) for s in spec[3])
            return made
        memo[key] = made = spec[1](_build(s, leaves, memo) for s in spec[3])
        return made
    if kind == "map":
        memo[key] = made = {}
        made.update((k, _build(s, leaves, memo)) for k, s in spec[3])
        return made
    _, cls, template, _, attrs, parts = spec
    memo[key] = made = object.__new__(cls)
    state = dict(template.__dict__) if template is not None else {}
    for part, entries in parts.items():
        state[part] = {**state[part], **{n: _build(s, leaves, memo) for n, s in entries.items()}}
    state.update((n, _build(s, leaves, memo)) for n, s in attrs.items())
    made.__dict__.update(state)
    return made


def read_path(args: Sequence[Any], kwargs: dict[str, Any], live: list, path: tuple) -> Any:
    """What `path` names among rebuilt arguments or in live state (after the forward wrote into them)."""
    (kind, first), rest = path[0], path[1:]
    value = args[first] if kind == "arg" else kwargs[first] if kind == "kw" else live[first].value
    for kind, step in rest:
        if kind == "item":
            value = value[step]
        else:
            d = value.__dict__
            holder = next((d[p] for p in _MODULE_PARTS if step in d.get(p, ())), d)
            value = holder[step]
    return value
