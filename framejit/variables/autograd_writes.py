"""Writes an autograd.Function's forward makes into state from before the call, read while the trace reads the
forward (autograd_speculation.py).

A write into an argument (a list it was given, an attribute of an object it was given) stays in the trace: at run
time the forward writes into the node's stand-in for that argument (autograd_args.py), and the replay after the
graph writes the real one, once per call as eager's forward does. What the forward made and wrote there (a tensor
appended to a list) comes out of the node as an extra output, read back from the stand-in, so the program gets the
very tensor the forward made. A write into a list, dict or object reached from a global stays in the trace too:
the node holds the real one, gives it what the trace held when the call started, and puts back what it held after
(`ApplyArguments.enter_live_state`); the replay makes the write. Rebinding a global or a closure's variable, or a
write into state reached from the frame's locals alone, is a graph break naming it: the call runs as Python.
"""

from __future__ import annotations

from typing import Any

import sys

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.guards import GuardKind
from framejit.sources import (
    AttrSource,
    ConstSource,
    DictItemSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    ModuleGlobalsSource,
)
from framejit.variables.autograd_args import ApplyArguments, LiveState
from framejit.variables.base import Variable
from framejit.variables.containers import BaseListVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable


def container_contents(log: Any) -> dict[int, list]:
    """What each list or dict from outside that the trace changed holds now (to tell which the forward changes)."""
    return {k: _items(v) for k, v in log.containers.items()}


def _items(var: Variable) -> list:
    items = getattr(var, "items", None)
    return list(items.items()) if isinstance(items, dict) else list(items or ())


def check_writes(tx: Tracer, name: str, mark: Any, arguments: ApplyArguments, contents: dict[int, list]) -> None:
    """Every write since `mark` to state older than the call went into one of the call's arguments, into
    something made since, or into a list, dict or object the forward reaches from a global (`arguments.live` gets
    those); else a graph break naming what was written."""
    log = tx.output.side_effects
    born_before = mark.checkpoint[1]
    what = f"the forward of autograd.Function {name}"
    before_globals, before_cells, before_closure = mark.writes[2], mark.writes[3], mark.writes[4]
    for now, before, kind in (
        (log.globals, before_globals, "global"),
        (log.cells, before_cells, "free variable"),
        (log.closure_cells, before_closure, "closure variable"),
    ):
        changed = [k for k, v in now.items() if before.get(k) is not v]
        if changed:
            _refuse(f"{what} rebinds the {kind} {changed[0]!r}")
    held = arguments.held
    written = [w.obj for k, w in log.attrs.items() if mark.writes[1].get(k) is not w]
    written += [
        v
        for k, v in log.containers.items()
        if k not in contents
        or len(contents[k]) != len(_items(v))
        or any(a is not b for a, b in zip(contents[k], _items(v)))
    ]
    for var in written:
        if id(var) in held or _born_since(var, born_before) or any(var is live.var for live in arguments.live):
            continue
        value = _live_value(tx, var)
        if value is _MISSING:
            _refuse(f"{what} changes {named(var)}, which it reaches neither as an argument nor from a global")
        if isinstance(value, (list, dict)):
            before = contents.get(id(var))
        else:
            before = {n: w.value for (key, n), w in mark.writes[1].items() if key == id(var)} or None
        arguments.live.append(LiveState(var, value, before))
    argument_births = {getattr(v, "born", None) for v, _ in held.values()}
    for born in log.container_births[mark.container_births :]:
        if born != -1 and born < born_before and born not in argument_births:
            _refuse(f"{what} changes a list or dict made before the call that is not one of its arguments")
    if not all(it.consumed == n for it, n in mark.iterators) or not all(
        gen.advances == n for gen, n in mark.generators
    ):
        _refuse(f"{what} advances an iterator or generator from before the call")


def made_values_written(tx: Tracer, arguments: ApplyArguments, new_nodes: set, born_before: int) -> list:
    """The tensors (and symbolic numbers) the forward made that its writes left in its arguments, each with the
    path from the rebuilt arguments to it: [(Variable, path)]."""
    log = tx.output.side_effects
    found: dict[int, tuple[Variable, tuple]] = {}

    def visit(var: Variable, path: tuple, fresh_only: bool) -> None:
        if isinstance(var, (TensorVariable, SymbolicVariable)):
            if var.node in new_nodes and isinstance(var, SymbolicVariable):
                _refuse("the forward writes a size it computed into one of its arguments")
            if var.node in new_nodes:
                found.setdefault(id(var), (var, path))
            return
        if fresh_only and not _born_since(var, born_before):
            return  # (an argument held elsewhere is visited as itself)
        if len(path) > 12:
            return
        if isinstance(var, BaseListVariable):
            for i, item in enumerate(var.items):
                visit(item, (*path, ("item", i)), True)
        elif type(var) is DictVariable:
            for k, item in var.items.items():
                visit(item, (*path, ("item", k)), True)
        if isinstance(var, NewObjectVariable) or not isinstance(var, (BaseListVariable, DictVariable)):
            for n in log.attribute_names(var):
                visit(log.pending_attr(var, n), (*path, ("attr", n)), True)  # type: ignore[arg-type]

    for var, path in list(arguments.held.values()):
        visit(var, path, False)
    for k, live in enumerate(arguments.live):
        visit(live.var, (("live", k),), False)
    return list(found.values())


_MISSING = object()


def _live_value(tx: Tracer, var: Variable) -> Any:
    """The real list, dict or object `var` stands for, found from a global by its source (guarded by identity,
    so the node may hold it), or _MISSING."""
    source = getattr(var, "source", None)
    value = _MISSING if source is None else _evaluate(tx, source)
    if value is not _MISSING:
        if isinstance(var, (BaseListVariable, DictVariable)) != isinstance(value, (list, dict)):
            return _MISSING
        tx.output.guards.add(source, GuardKind.ID_MATCH, value)
    return value


def _evaluate(tx: Tracer, source: Any) -> Any:
    """The value a source names, where it is reached from globals or constants (not from the frame's locals)."""
    if isinstance(source, GlobalSource):
        return tx.output.f_globals.get(source.global_name, _MISSING)
    if isinstance(source, ModuleGlobalsSource):
        module = sys.modules.get(source.module)
        return _MISSING if module is None else vars(module)
    if isinstance(source, ConstSource):
        return source.value
    if isinstance(source, (AttrSource, GenericAttrSource, ItemSource, DictItemSource)):
        base = _evaluate(tx, source.base)
        if base is _MISSING:
            return _MISSING
        try:
            if isinstance(source, (AttrSource, GenericAttrSource)):
                return object.__getattribute__(base, source.attr)
            return dict.__getitem__(base, source.key) if isinstance(source, DictItemSource) else base[source.key]
        except Exception:
            return _MISSING
    return _MISSING


def _born_since(var: Variable, born_before: int) -> bool:
    return getattr(var, "source", None) is None and getattr(var, "born", -1) >= born_before


def named(var: Variable) -> str:
    source = getattr(var, "source", None)
    return source.name() if source is not None else repr(var)


def _refuse(message: str) -> None:
    unsupported(f"{message}: the call runs as Python", BreakCode.SIDE_EFFECT)
