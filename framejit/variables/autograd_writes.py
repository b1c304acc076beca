"""Writes an autograd.Function's forward makes into state from before the call, read while the trace reads the
forward (autograd_speculation.py).

A write into an argument (a list it was given, an attribute of an object it was given) stays in the trace: at run
time the forward writes into the node's stand-in for that argument (autograd_args.py), and the replay after the
graph writes the real one, once per call as eager's forward does. What the forward made and wrote there (a tensor
appended to a list) comes out of the node as an extra output, read back from the stand-in, so the program gets the
very tensor the forward made. A write anywhere else (a global, a closure's variable, an object reached another
way) is a graph break naming it: the call runs as Python.
"""

from __future__ import annotations

from typing import Any

from framejit.contracts import Tracer
from framejit.exc import BreakCode, unsupported
from framejit.variables.autograd_args import ApplyArguments
from framejit.variables.base import Variable
from framejit.variables.containers import BaseListVariable
from framejit.variables.mappings import DictVariable
from framejit.variables.symbolic import SymbolicVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import NewObjectVariable


def check_argument_writes(tx: Tracer, name: str, mark: Any, arguments: ApplyArguments) -> None:
    """Every write since `mark` to state older than the call went into one of the call's arguments (or into
    something made since); else a graph break naming what was written."""
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
            _refuse(f"{what} writes the {kind} {changed[0]!r}, which is not one of its arguments")
    held = arguments.held
    for key, write in log.attrs.items():
        if mark.writes[1].get(key) is write or id(write.obj) in held or _born_since(write.obj, born_before):
            continue
        _refuse(f"{what} writes .{write.name} of {_named(write.obj)}, which is not one of its arguments")
    for key, var in log.containers.items():
        if key not in mark.writes[0] and key not in held:
            _refuse(f"{what} changes {_named(var)}, which is not one of its arguments")
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
    return list(found.values())


def _born_since(var: Variable, born_before: int) -> bool:
    return getattr(var, "source", None) is None and getattr(var, "born", -1) >= born_before


def _named(var: Variable) -> str:
    source = getattr(var, "source", None)
    return source.name() if source is not None else repr(var)


def _refuse(message: str) -> None:
    unsupported(f"{message}: the call runs as Python", BreakCode.SIDE_EFFECT)
