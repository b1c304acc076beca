"""The harness of the capture corpus: small programs for the symbolic interpreter,
each checked against eager. The programs are in this folder's test_*.py, one file per group of sections.

Every program is compiled with `nopython=True` (fullgraph) and must give one graph
(or none, for programs with no graph op) with an exact op count, the same result
as eager (values, nesting, dtypes, requires_grad), the same state of its arguments
afterwards (mutated tensors, lists, dicts, objects), the same grad mode afterwards,
and a cache hit on a second call.

How ops are counted (CompileCounter.op_count: call_function/call_method/call_module nodes):
every torch function, tensor method or Python operator applied to a tensor is one
node; metadata reads (shape, size(), dim(), dtype, device, ndim, len(x), numel()...)
and arithmetic on Python constants add none; `x.T` / `x.mT` is one getattr node; an
op returning a tuple of tensors (chunk, split, unbind, max(dim), sort, topk...) is one
node plus one getitem node per tensor element (used or not); every grad-mode switch
(`torch.no_grad()` enter/exit, `torch.set_grad_enabled(b)`) is one
`torch._C._set_grad_enabled` node, the restore at the end of a block that closes the
graph included (the graph must leave grad mode as eager does).
"""

from __future__ import annotations

import copy
import types

import pytest
import torch
import torch.nn as nn

import framejit
from framejit.testing import CompileCounter, same

# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------

PACKAGE = __name__.rpartition(".")[0]  # the corpus' programs, objects and classes live in its modules


def is_corpus_module(name):
    return name.startswith(PACKAGE + ".")


def _is_user_object(value):
    return (
        is_corpus_module(type(value).__module__)
        and hasattr(value, "__dict__")
        and not isinstance(value, (nn.Module, type, types.FunctionType))
    )


def clone_keeping_types(value):
    """Fresh copies of tensors and containers (namedtuples and dict subclasses keep their type) and
    of the corpus' plain objects; modules, functions and classes are shared (guarded by identity)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, list):
        return [clone_keeping_types(v) for v in value]
    if isinstance(value, tuple):
        items = [clone_keeping_types(v) for v in value]
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, clone_keeping_types(v)) for k, v in value.items())
    if _is_user_object(value):
        new = copy.copy(value)
        new.__dict__ = clone_keeping_types(dict(value.__dict__))
        return new
    return value


def state_same(a, b):
    """Deep equality of argument state after a call (tensors by value, modules by identity)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.requires_grad == b.requires_grad and same(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(state_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(state_same(a[k], b[k]) for k in a)
    if isinstance(a, nn.Module):
        return a is b
    if _is_user_object(a):
        return state_same(vars(a), vars(b))
    return a is b or a == b


def _grad_flags(value):
    from torch.utils import _pytree as pytree

    return [leaf.requires_grad for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _graph_text(cnt):
    return "\n".join(gm.code for gm in cnt.graphs)


def check(fn, *args, ops=None, graphs=1, **kwargs):
    """Run fn eagerly and compiled (fullgraph) on fresh copies of args; compare results, argument
    state, grad mode and graph/op counts; a second compiled call must hit the cache."""
    grad_before = torch.is_grad_enabled()
    eargs, ekwargs = clone_keeping_types(args), clone_keeping_types(kwargs)
    expected = fn(*eargs, **ekwargs)
    assert torch.is_grad_enabled() == grad_before, "the eager program changed grad mode"
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    results = []
    for call in ("first", "second"):
        cargs, ckwargs = clone_keeping_types(args), clone_keeping_types(kwargs)
        try:
            got = compiled(*cargs, **ckwargs)
        finally:
            grad_after = torch.is_grad_enabled()
            torch.set_grad_enabled(grad_before)
        assert grad_after == grad_before, f"{call} call left grad mode {grad_after} (eager: {grad_before})"
        assert same(got, expected), f"{call} call: got {got!r}, eager gave {expected!r}"
        assert _grad_flags(got) == _grad_flags(expected), (
            f"{call} call: requires_grad {_grad_flags(got)} vs eager {_grad_flags(expected)}"
        )
        assert state_same(cargs, eargs) and state_same(ckwargs, ekwargs), (
            f"{call} call: arguments after the call differ from eager's: {cargs!r} vs {eargs!r}"
        )
        assert cnt.frame_count == graphs, (
            f"{call} call: {cnt.frame_count} graphs, expected {graphs}\n{_graph_text(cnt)}"
        )
        if ops is not None:
            assert cnt.op_count == ops, f"{cnt.op_count} ops, expected {ops}\n{_graph_text(cnt)}"
        results.append((got, cargs, ckwargs))
    return cnt, results


# ---------------------------------------------------------------------------------------------
# the corpus: @case(*args, ops=N[, graphs=G][, kwargs={...}]) registers a program
# ---------------------------------------------------------------------------------------------


def case_registry():
    """A file's list of programs, and the decorator that adds one to it:
    `@case(*args, ops=N[, graphs=G][, kwargs={...}])`."""
    cases = []

    def case(*args, ops, graphs=1, kwargs=None):
        def register(fn):
            cases.append((fn, args, kwargs or {}, ops, graphs))
            return fn

        return register

    return cases, case


def program_params(cases):
    """The parameters of a file's differential test: one per program, named after it."""
    params = [pytest.param(fn, args, kwargs, ops, graphs, id=fn.__name__) for fn, args, kwargs, ops, graphs in cases]
    assert len({p.id for p in params}) == len(params), "program names must be unique"
    return params


RNG = torch.Generator().manual_seed(1234)


def t(*shape):
    return torch.randn(*shape, generator=RNG)


def pos(*shape):
    """Positive values (bases of **, divisors, log)."""
    return torch.rand(*shape, generator=RNG) + 0.5


def ints(*shape, hi=16):
    return torch.randint(0, hi, shape, generator=RNG)


def rg(*shape):
    return t(*shape).requires_grad_()
