"""Graph fates: a backend compiles what it is asked to compile, and says so when it does not.

Each graph's fate (which compiler made its code, or why it runs as its torch ops) is recorded: explain() shows it,
FRAMEJIT_LOGS=graph prints it, `framejit bench` counts it, and a graph the requested backend did not compile warns
once per frame (BackendFallbackWarning)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import framejit
from framejit.backends import aot_autograd, make_boxed_func
from framejit.exc import BackendCompilerFailed, BackendFallbackWarning


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def _no_fallback_warnings(record):
    return [w for w in record if issubclass(w.category, BackendFallbackWarning)]


@pytest.fixture
def kernels():
    """The number of kernels inductor generated since the test began."""
    from torch._inductor import metrics

    metrics.reset()
    return lambda: metrics.generated_kernel_count


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_inductor_really_compiles_a_model(mode, kernels):
    model = _model()
    compiled = framejit.compile(model, backend="inductor")
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if mode == "infer":
            with torch.no_grad():
                out = framejit.explain(compiled)(x)
                torch.testing.assert_close(compiled(x), model(x))
        else:
            out = framejit.explain(compiled)(x)
            got = compiled(x)
            got.sum().backward()
            want_grads = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            model(x).sum().backward()
            for a, b in zip(want_grads, (p.grad for p in model.parameters())):
                torch.testing.assert_close(a, b)
    assert not _no_fallback_warnings(record)
    assert [str(f) for f in out.graph_fates] == ["compiled by inductor"]
    assert out.graph_fates[0].compiled and not out.graph_fates[0].fell_back
    assert kernels() > 0, "inductor generated no kernel"
    assert "(compiled by inductor)" in str(out)


def test_a_compiler_that_does_not_accept_aot_keywords_is_an_error_not_a_fallback():
    """A failure once AOTAutograd reached the compiler is the backend's, never taken for "cannot compile"."""

    def fw_compiler(gm, example_inputs):  # a compiler with a signature of its own: it rejects being called
        raise TypeError("fw_compiler() got an unexpected keyword argument 'compile_region_name'")

    compiled = framejit.compile(_model(), backend=aot_autograd(fw_compiler=fw_compiler))
    with pytest.raises(BackendCompilerFailed, match="compile_region_name"):
        compiled(torch.randn(4, 8))


def test_aot_eager_and_a_user_aot_backend_record_what_compiled_them():
    model = _model()
    x = torch.randn(4, 8)
    out = framejit.explain(framejit.compile(model, backend="aot_eager"))(x)
    assert [str(f) for f in out.graph_fates] == ["compiled by aot_eager"]

    def my_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    out = framejit.explain(framejit.compile(model, backend=aot_autograd(fw_compiler=my_compiler)))(x)
    assert [str(f) for f in out.graph_fates] == ["compiled by aot_autograd(my_compiler)"]


def adds(x, y):  # a training graph that saves nothing for backward runs as its torch ops
    return x + y


def test_a_fallback_warns_once_per_frame_naming_backend_reason_and_place():
    compiled = framejit.compile(adds, backend="aot_eager")
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(BackendFallbackWarning) as record:
        torch.testing.assert_close(compiled(x, x), adds(x, x))
    fallbacks = _no_fallback_warnings(record)
    assert len(fallbacks) == 1
    message = str(fallbacks[0].message)
    assert "'aot_eager'" in message and "saves no tensor for backward" in message
    assert f"{__file__}:{adds.__code__.co_firstlineno}" in message
    assert fallbacks[0].filename == __file__  # it points at the user's call
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        compiled(x, x)
        compiled(torch.randn(5, requires_grad=True), torch.randn(5))  # a recompile of the same frame
    assert not _no_fallback_warnings(again)


def test_the_fallback_warning_can_be_silenced_and_explain_still_shows_it():
    compiled = framejit.compile(adds, backend="aot_eager")
    x = torch.randn(3, requires_grad=True)
    with framejit.config.patch(warn_on_fallback=False), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        compiled(x, x)
        out = framejit.explain(compiled)(x, x)
    assert not _no_fallback_warnings(record)
    assert len(out.graph_fates) == 1 and out.graph_fates[0].fell_back
    assert str(out.graph_fates[0]).startswith("runs as torch ops, not compiled by aot_eager: a training graph")


def test_a_declined_graph_is_recorded_and_warned():
    def declines(gm, example_inputs):
        return None

    compiled = framejit.compile(adds, backend=declines)
    with pytest.warns(BackendFallbackWarning, match="declined it"):
        out = framejit.explain(compiled)(torch.randn(3), torch.randn(3))
    assert out.graph_fates[0].fell_back


def test_graph_logs_print_each_graphs_fate(capsys, monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "graph")
    framejit.compile(_model(), backend="aot_eager")(torch.randn(4, 8))
    assert "__compiled_fn" in capsys.readouterr().out.split("compiled by aot_eager")[0]


def test_explain_of_a_plain_function_compiles_nothing():
    out = framejit.explain(adds)(torch.randn(3), torch.randn(3))
    assert [str(f) for f in out.graph_fates] == [
        "compiled by no backend (explain of a function framejit.compile did not make)"
    ]
