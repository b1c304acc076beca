"""backend="autotune": picks the fastest backend whose results match eager, and remembers it on disk per graph."""

import json

import pytest
import torch
from torch import nn

import framejit
from framejit.backends import autotune as at


@pytest.fixture(autouse=True)
def _fresh_autotune(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMEJIT_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
    monkeypatch.setattr(at, "TIME_BUDGET_S", 0.2)
    at.reset_state()
    yield
    at.reset_state()


def _register(monkeypatch, name, backend):
    monkeypatch.setitem(framejit.backends.BACKENDS, name, backend)


def wrong(gm, example_inputs):
    """Fast and wrong: would win every timing if its results were not checked."""
    out = [t + 1 for t in gm(*example_inputs)]
    return lambda *args: out


def memo(gm, example_inputs):
    """Fast and right for the inputs it was compiled with (the tuning inputs): stands in for a real speedup."""
    out = gm(*example_inputs)
    return lambda *args: out


def broken(gm, example_inputs):
    raise RuntimeError("this backend cannot compile anything")


def declines(gm, example_inputs):
    return None


def heavy(x, w):
    for _ in range(8):
        x = torch.tanh(x @ w)
    return x


def test_rejects_wrong_results_and_failing_backends(monkeypatch):
    for name, fn in (("wrong_t", wrong), ("broken_t", broken), ("declines_t", declines)):
        _register(monkeypatch, name, fn)
    monkeypatch.setattr(at, "CANDIDATES", ["wrong_t", "broken_t", "declines_t", "aot_eager"])
    x, w = torch.randn(64, 64), torch.randn(64, 64) / 8
    got = framejit.compile(heavy, backend="autotune")(x, w)
    assert torch.allclose(got, heavy(x, w), atol=1e-6)
    (decision,) = at.history
    assert decision.backend in ("eager", "aot_eager") and not decision.reused
    assert set(decision.times_ms) == {"eager", "aot_eager"}
    assert "differ from eager" in decision.rejected["wrong_t"]
    assert "cannot compile" in decision.rejected["broken_t"] and "None" in decision.rejected["declines_t"]


def test_keeps_the_fastest_correct_backend(monkeypatch):
    _register(monkeypatch, "memo_t", memo)
    monkeypatch.setattr(at, "CANDIDATES", ["memo_t"])
    x, w = torch.randn(128, 128), torch.randn(128, 128) / 8
    framejit.compile(heavy, backend="autotune")(x, w)
    (decision,) = at.history
    assert decision.backend == "memo_t" and decision.times_ms["memo_t"] < decision.times_ms["eager"]


def test_choice_is_persisted_and_reused_by_graph_structure(monkeypatch, tmp_path):
    _register(monkeypatch, "memo_t", memo)
    monkeypatch.setattr(at, "CANDIDATES", ["memo_t"])
    x, w = torch.randn(128, 128), torch.randn(128, 128) / 8
    framejit.compile(heavy, backend="autotune")(x, w)
    key = at.history[0].key
    stored = json.loads((tmp_path / "autotune.json").read_text())["entries"]
    assert stored[key]["backend"] == "memo_t"

    # a new process: nothing in memory, nothing compiled; the file decides and nothing is timed
    framejit.reset()
    at.reset_state()
    monkeypatch.setattr(at, "_tune", lambda *a: pytest.fail("a known graph was timed again"))
    got = framejit.compile(heavy, backend="autotune")(x, w)
    assert torch.allclose(got, heavy(x, w))
    assert [(d.key, d.backend, d.reused) for d in at.history] == [(key, "memo_t", True)]


def test_another_graph_structure_is_tuned_again(monkeypatch):
    monkeypatch.setattr(at, "CANDIDATES", ["aot_eager"])
    fn = framejit.compile(heavy, backend="autotune")
    fn(torch.randn(16, 16), torch.randn(16, 16))
    fn(torch.randn(8, 8), torch.randn(8, 8))  # other shapes: another graph, another key
    assert [d.reused for d in at.history] == [False, False]
    assert at.history[0].key != at.history[1].key


def test_training_graph_gradients_match_eager(monkeypatch):
    _register(monkeypatch, "wrong_t", wrong)
    monkeypatch.setattr(at, "CANDIDATES", ["aot_eager", "ofi", "wrong_t"])
    assert "ofi" not in at.candidates(training=True) and at.candidates(training=True)[0] == "eager"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ref = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())
    x = torch.randn(8, 16)
    framejit.compile(model, backend="autotune")(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)  # tuning did not accumulate into .grad
    (decision,) = at.history
    assert "ofi" not in decision.times_ms and "wrong_t" in decision.rejected


def test_inductor_candidate_on_a_module():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).eval()
    x = torch.randn(4, 32)
    with torch.no_grad():
        got = framejit.compile(model, backend="autotune")(x)
        want = model(x)
    assert torch.allclose(got, want, atol=1e-5)
    (decision,) = at.history
    assert "eager" in decision.times_ms and ("inductor" in decision.times_ms or "inductor" in decision.rejected)
