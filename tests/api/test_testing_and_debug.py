"""framejit.testing's helpers (CompileCounter, EagerAndRecordGraphs, same) and the debug output."""

import torch

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend, EagerAndRecordGraphs, same

from tests.helpers import poly, sin_plus_cos


# ---------------------------------------------------------------------------------------------
# testing helpers


def test_compile_counter_counts_frames_and_ops():
    cnt = CompileCounter()

    def fn(x):
        return x.sin().cos() + 1

    f = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    assert same(f(x), fn(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 3)
    f(torch.randn(2))
    assert (cnt.frame_count, cnt.op_count) == (2, 6)


def test_compile_counter_with_backend():
    cnt = CompileCounterWithBackend("eager")
    f = framejit.optimize(cnt)(poly)
    x = torch.randn(4)
    assert same(f(x), poly(x))
    assert cnt.frame_count == 1
    assert cnt.op_count >= 4


def test_eager_and_record_graphs():
    rec = EagerAndRecordGraphs()
    f = framejit.optimize(rec)(sin_plus_cos)
    x = torch.randn(4)
    assert same(f(x), sin_plus_cos(x))
    assert len(rec.graphs) == 1
    assert isinstance(rec.graphs[0], torch.fx.GraphModule)
    direct = rec.graphs[0](x)
    if isinstance(direct, (tuple, list)):
        (direct,) = direct
    assert same(direct, f(x))


def test_same():
    a = torch.randn(3)
    assert same(a, a.clone())
    assert same(a, a + 1e-6)
    assert not same(a, a + 1)
    assert same(a, a + 0.5, tol=1.0)
    assert not same(a, a[:2])
    assert not same(a, a.double())
    assert same((a, [a, {"k": a}], 3), (a.clone(), [a.clone(), {"k": a.clone()}], 3))
    assert not same((a, 3), (a, 4))
    assert not same([a], (a,))
    assert same(torch.tensor([1, 2]), torch.tensor([1, 2]))
    assert not same(torch.tensor([1, 2]), torch.tensor([1, 3]))
    nan = torch.tensor([float("nan")])
    assert not same(nan, nan)
    assert same(nan, nan, equal_nan=True)


class _Record:
    def __init__(self, val):
        self.val = val


def test_same_compares_objects_without_eq_by_their_attributes():
    a = torch.randn(3)
    assert same(_Record(a), _Record(a.clone())) and same([_Record((a, 1))], [_Record((a.clone(), 1))])
    assert not same(_Record(a), _Record(a + 1)) and not same(_Record(a), a)


# ---------------------------------------------------------------------------------------------
# debug output


def test_config_debug_prints_bytecode_guards_and_graph(capsys):
    def fn_dbg(x):
        return torch.sin(x) + 1

    with framejit.config.patch(debug=True):
        f = framejit.optimize(CompileCounter())(fn_dbg)
        f(torch.randn(3))
    out = capsys.readouterr().out
    for section in ("ORIGINAL BYTECODE", "MODIFIED BYTECODE", "GUARDS"):
        assert section in out, section
    assert "fn_dbg" in out
    assert "sin" in out  # the graph
    assert out.index("ORIGINAL BYTECODE") < out.index("MODIFIED BYTECODE")


def test_no_debug_output_by_default(capsys):
    f = framejit.optimize(CompileCounter())(poly)
    f(torch.randn(3))
    out = capsys.readouterr().out
    assert "ORIGINAL BYTECODE" not in out
