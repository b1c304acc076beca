"""Capture corpus: loads and stores: locals, globals, closures, attributes.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from tests.corpus.harness import case_registry, check, program_params, t
from tests.corpus.shared import GLOBAL_TABLE, sin_plus


CASES, case = case_registry()


# ---- loads and stores: locals, globals, closures, attributes ---------------------------------


@case(t(3, 4), ops=2)
def local_store_load(x):
    y = x + 1
    z = y
    return z * 2


@case(t(3, 4), ops=2)
def local_delete(x):
    y = x + 1
    z = y * 2
    del y
    return z


SCALE = 3.0


@case(t(3, 4), ops=1)
def global_constant(x):
    return x * SCALE


@case(t(3, 4), ops=3)
def global_function(x):
    return sin_plus(x) * 2


_GLOBAL_LINEAR = nn.Linear(4, 3)


@case(t(2, 4), ops=1)
def global_module(x):
    return _GLOBAL_LINEAR(x)


_GLOBAL_BIAS = t(4)


@case(t(3, 4), ops=1)
def global_tensor(x):
    return x + _GLOBAL_BIAS


@case(t(3, 4), ops=2)
def global_dict(x):
    return x * GLOBAL_TABLE["scale"] + GLOBAL_TABLE["shift"]


@case(t(3, 4), ops=1)
def global_module_attr_chain(x):
    return torch.nn.functional.relu(x)


@case(t(3, 4), ops=2)
def global_math_module(x):
    return x * math.pi / math.sqrt(x.shape[-1])


def _make_closure_const(k):
    def closure_const(x):
        return x * k + k

    return closure_const


case(t(3, 4), ops=2)(_make_closure_const(3))


def _make_closure_tensor(b):
    def closure_tensor(x):
        return x - b

    return closure_tensor


case(t(3, 4), ops=1)(_make_closure_tensor(t(4)))


def _make_closure_fn(act):
    def closure_function(x):
        return act(x) * 2

    return closure_function


case(t(3, 4), ops=2)(_make_closure_fn(torch.tanh))


def _make_closure_module(mod):
    def closure_module(x):
        return mod(x).relu()

    return closure_module


case(t(2, 4), ops=2)(_make_closure_module(nn.Linear(4, 4)))


@case(t(3, 4), ops=2)
def cell_nonlocal_inner(x):
    acc = x

    def add(v):
        nonlocal acc
        acc = acc + v

    add(1)
    add(2)
    return acc


@case(t(3, 4), ops=2)
def cell_argument_captured(x):
    def inner(v):
        return v * x

    return inner(x) + x


@case(t(3), ops=1)
def cell_late_binding(x):
    fns = []
    for i in range(3):
        fns.append(lambda v: v * i)
    return fns[0](x)


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
