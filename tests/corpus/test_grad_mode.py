"""Capture corpus: grad mode blocks.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch

from tests.corpus.harness import case_registry, check, program_params, rg


CASES, case = case_registry()


# ---- grad mode blocks ----------------------------------------------------------------------------


@case(rg(3), ops=4)
def grad_no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x


@case(rg(3), ops=3)
def grad_no_grad_return_inside(x):
    with torch.no_grad():
        return x * 2


@case(rg(3), ops=7)
def grad_enable_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a + b


@case(rg(3), ops=4)
def grad_set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y * x


@case(rg(3), ops=4)
def grad_set_grad_enabled_calls(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y + x


@case(rg(3), ops=3)
def grad_query_inside_no_grad(x):
    with torch.no_grad():
        flag = torch.is_grad_enabled()
    return (x * 2 if not flag else x * 3), flag


def _frozen_scale(v):
    with torch.no_grad():
        return v * 2


@case(rg(3), ops=4)
def grad_no_grad_in_inlined_function(x):
    return _frozen_scale(x) + x


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
