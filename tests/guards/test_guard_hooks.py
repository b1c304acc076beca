"""guard_fail_fn and guard_export_fn: what changed, and the guards in readable form."""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


# ---------------------------------------------------------------------------------------------
# guard_fail_fn / guard_export_fn


@pytest.mark.parametrize(
    "change, word",
    [
        (lambda x: x.double(), "dtype"),
        (lambda x: torch.randn(7), "shape"),
        (lambda x: x.clone().requires_grad_(True), "requires_grad"),
    ],
)
def test_guard_fail_fn_names_what_changed(change, word):
    failures = []
    cnt = CompileCounter()

    def fn(x):
        return x.relu() + 1

    f = framejit.optimize(cnt, guard_fail_fn=failures.append)(fn)
    x = torch.randn(5)
    f(x)
    assert failures == []
    x2 = change(x)
    assert same(f(x2), fn(x2))
    assert cnt.frame_count == 2
    assert len(failures) == 1
    assert word in failures[0].reason, failures[0].reason
    assert str(failures[0])


def test_guard_fail_fn_on_grad_mode():
    failures = []

    def fn(x):
        return x * 3

    f = framejit.optimize(CompileCounter(), guard_fail_fn=failures.append)(fn)
    x = torch.randn(3, requires_grad=True)
    f(x)
    with torch.no_grad():
        f(x)
    assert len(failures) == 1
    assert "grad" in failures[0].reason.lower()


def _linear_then_autocast_query(x, w):
    y = x @ w
    return y + 1 if torch.is_autocast_enabled("cpu") else y - 1


def test_autocast_state_is_guarded_and_its_query_folds():
    failures = []
    cnt = CompileCounter()
    f = framejit.optimize(cnt, guard_fail_fn=failures.append)(_linear_then_autocast_query)
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    assert same(f(x, w), _linear_then_autocast_query(x, w))
    assert cnt.frame_count == 1  # is_autocast_enabled() folded: no break
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = f(x, w), _linear_then_autocast_query(x, w)
    assert got.dtype == want.dtype == torch.bfloat16 and same(got, want)
    assert cnt.frame_count == 2
    assert "autocast changed: now on for cpu (bfloat16)" in failures[0].reason, failures[0].reason
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f(x, w)
    assert same(f(x, w), _linear_then_autocast_query(x, w))
    assert cnt.frame_count == 2  # both entries hit


def test_guard_export_fn_receives_readable_guards():
    exported = []

    def fn(x, n):
        return x.sin() * n

    f = framejit.optimize(CompileCounter(), guard_export_fn=exported.append)(fn)
    f(torch.randn(3), 4)
    assert len(exported) == 1
    guards = list(exported[0])
    kinds = {g.kind for g in guards}
    assert "TENSOR_MATCH" in kinds
    assert kinds & {"EQUALS", "CONSTANT_MATCH"}, kinds
    text = "\n".join(str(g) for g in guards)
    assert "TENSOR_MATCH" in text and "x" in text
    assert all("\n" not in str(g) and str(g).strip() for g in guards)
    f(torch.randn(4), 4)
    assert len(exported) == 2
