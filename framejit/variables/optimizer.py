"""A torch.optim.Optimizer read from outside the frame: traced as the Python object it is, but for two rules."""

from __future__ import annotations

from typing import Any, Sequence

from framejit.contracts import Tracer
from framejit.sources import AttrSource
from framejit.variables.base import Variable
from framejit.variables.constant import ConstantVariable
from framejit.variables.containers import ListVariable
from framejit.variables.hash_keys import outside_object
from framejit.variables.mappings import DictVariable
from framejit.variables.tensor import TensorVariable
from framejit.variables.user_object import UserObjectVariable


class OptimizerVariable(UserObjectVariable):
    """As under torch.compile:
    - its param groups read as `capturable` in the trace (the real groups keep their setting): the step keeps its
      step count a tensor, with no `.item()`, and is one graph;
    - torch's own `_init_group` runs for real when the trace reaches it (it only creates the state of parameters
      that have none, as eager's first step would), and the trace reads what it made: the first step's graph is
      the steady one, not a graph of its own."""

    def var_getattr(self, tx: Tracer, name: str) -> Variable:
        if name == "_init_group" and _is_torchs(type(self.value)):
            return _EagerInitGroup(self)
        value = super().var_getattr(tx, name)
        if name == "param_groups" and isinstance(value, ListVariable):
            for group in value.items:
                if isinstance(group, DictVariable) and "capturable" in group.items:
                    group.items["capturable"] = ConstantVariable(True)
        return value


def _is_torchs(cls: type) -> bool:
    method = getattr(cls, "_init_group", None)
    return getattr(method, "__module__", "").startswith("torch.optim.")


class _CannotRunEagerly(Exception):
    pass


class _EagerInitGroup(Variable):
    """opt._init_group: run for real where its arguments map to real objects, else traced as Python."""

    def __init__(self, opt: OptimizerVariable) -> None:
        self.opt = opt

    def call(self, tx: Tracer, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
        try:
            return _run_eagerly(tx, self.opt, args, kwargs)
        except _CannotRunEagerly:
            return UserObjectVariable.var_getattr(self.opt, tx, "_init_group").call(tx, args, kwargs)


def _run_eagerly(tx: Tracer, var: OptimizerVariable, args: Sequence[Variable], kwargs: dict[str, Variable]) -> Variable:
    opt, groups = var.value, {}
    for group in opt.param_groups:
        held = tx.output.wrapped_by_id.get(id(group))
        if held is not None:
            groups[id(held)] = group
    filled: list[tuple[ListVariable, list]] = []

    def real(arg: Variable) -> Any:
        if isinstance(arg, ListVariable) and arg.source is None and not arg.items:
            filled.append((arg, []))
            return filled[-1][1]
        if id(arg) in groups and id(arg) not in tx.output.side_effects.containers:  # a group the trace left as is
            return groups[id(arg)]
        if arg.is_python_constant():
            return arg.as_python_constant()
        raise _CannotRunEagerly

    real_args = [real(a) for a in args]
    real_kwargs = {k: real(v) for k, v in kwargs.items()}
    if id(opt.state) in tx.output.wrapped_by_id:
        # the trace holds the state as it read it: only a group whose state is all there (made by the first
        # call, below) runs for real, which then only fills the lists
        group = real_args[0] if real_args else None
        params = group.get("params", ()) if isinstance(group, dict) else ()
        if kwargs or any(p.grad is not None and not opt.state.get(p) for p in params):
            raise _CannotRunEagerly
    elif not kwargs and all(isinstance(a, list) for a in real_args[1:]):
        # the first: every group's state is made now, so the state the trace reads is the one every step sees
        for group in opt.param_groups:
            if group is not real_args[0]:
                opt._init_group(group, *[[] for _ in real_args[1:]])
    result = opt._init_group(*real_args, **real_kwargs)
    # what it put in the lists, as the trace knows them: parameters, their grads, the state it read or made
    tx.wrap(opt.state, AttrSource(var.source, "state"))
    known = dict(tx.output.wrapped_by_id)
    for group_var in [v for v in tx.output.wrapped_by_id.values() if id(v) in groups]:
        params = group_var.items.get("params")
        for p_var in params.items if isinstance(params, ListVariable) else ():
            p = outside_object(tx, p_var) if isinstance(p_var, TensorVariable) else None
            if p is None:
                raise _CannotRunEagerly
            grad = p_var.var_getattr(tx, "grad")  # read (and guarded) for each: it chose which to step, None too
            if p.grad is not None:
                known[id(p.grad)] = grad
    items = [[known.get(id(obj)) for obj in values] for _, values in filled]
    if any(v is None for values in items for v in values):
        raise _CannotRunEagerly  # (the state is made now: the traced _init_group finds it and makes none)
    for (list_var, _), values in zip(filled, items):
        list_var.items.extend(values)
        tx.output.side_effects.mutated_container(list_var)
    return tx.wrap_constant(result)
