"""Settings that change what framejit does or prints: config.log_level, config.output_code,
config.instruction_budget, and FRAMEJIT_LOGS (a section name that does not exist is an error)."""

import logging
import os
import subprocess
import sys

import pytest
import torch

import framejit
from framejit import logs
from framejit.testing import CompileCounter, CompileCounterWithBackend, same


def with_break(x):
    x = x + 1
    print("", end="")  # a graph break
    return x * 2


def add_one(x):
    return torch.relu(x) + 1


def test_log_level_info_reports_graph_breaks_on_the_framejit_logger(caplog):
    with caplog.at_level(logging.DEBUG):  # let the framejit logger's own level decide
        with framejit.config.patch(log_level=logging.INFO):
            framejit.optimize(CompileCounter())(with_break)(torch.randn(3))
    messages = [r.getMessage() for r in caplog.records if r.name == "framejit"]
    assert any("graph break at" in m and "with_break" in m for m in messages), messages
    framejit.reset()


def test_log_level_warning_hides_graph_breaks(caplog):
    with caplog.at_level(logging.DEBUG):
        with framejit.config.patch(log_level=logging.WARNING):
            framejit.optimize(CompileCounter())(with_break)(torch.randn(3))
    assert not [r for r in caplog.records if r.name == "framejit" and "graph break" in r.getMessage()]
    framejit.reset()


def test_log_level_debug_reports_each_compile_and_warning_none(caplog):
    compiled = framejit.optimize("eager")(add_one)
    with caplog.at_level(logging.DEBUG):  # let the framejit logger's own level decide
        with framejit.config.patch(log_level=logging.DEBUG):
            compiled(torch.randn(3))
        compiling = [r.getMessage() for r in caplog.records if r.name == "framejit"]
        with framejit.config.patch(log_level=logging.WARNING):
            compiled(torch.randn(3, 2))  # a recompile, logged below WARNING only
    assert any(m.startswith("compiling add_one") for m in compiling), compiling
    assert len([r for r in caplog.records if r.name == "framejit"]) == len(compiling)
    framejit.reset()


def test_output_code_prints_each_graphs_code(capsys):
    with framejit.config.patch(output_code=True):
        out = framejit.optimize("eager")(add_one)(torch.randn(4))
    printed = capsys.readouterr().out
    assert same(out.shape, torch.Size([4]))
    assert "OUTPUT CODE __compiled_fn_" in printed
    assert "torch.relu" in printed and "def forward" in printed
    framejit.reset()


def test_output_code_off_prints_nothing(capsys):
    framejit.optimize("eager")(add_one)(torch.randn(4))
    assert "OUTPUT CODE" not in capsys.readouterr().out
    framejit.reset()


def test_output_code_restores_torch_logging_after_the_backend():
    from torch._logging._internal import _get_log_state

    before = dict(_get_log_state().log_qname_to_level), set(_get_log_state().artifact_names)
    with framejit.config.patch(output_code=True):
        framejit.optimize("eager")(add_one)(torch.randn(4))
    after = dict(_get_log_state().log_qname_to_level), set(_get_log_state().artifact_names)
    assert before == after
    framejit.reset()


def test_instruction_budget_breaks_a_long_unrolled_loop():
    def loop(x):
        for _ in range(50):
            x = x + 1
        return x

    cnt = CompileCounter()
    x = torch.randn(2)
    with (
        framejit.config.patch(instruction_budget=20),
        pytest.raises(framejit.exc.Unsupported, match="trace longer than 20 instructions"),
    ):
        framejit.optimize(cnt, nopython=True)(loop)(x)
    framejit.reset()
    assert same(framejit.optimize(cnt)(loop)(x), loop(x))  # the default budget takes the whole loop
    assert cnt.frame_count == 1
    framejit.reset()


def _step(x):
    y = x + 1
    y = y * 0.5
    return y - 0.25


def test_a_continuation_past_the_budget_runs_as_python():
    def loop(x, n):
        x = x * 2
        print("", end="")  # a break: the loop is in a continuation
        for _ in range(n):
            x = _step(x)  # the budget runs out inside the inlined call: a break at the call could resume
        return x

    cnt = CompileCounter()
    x = torch.randn(2)
    with framejit.config.patch(instruction_budget=200):
        compiled = framejit.optimize(cnt)(loop)
        assert same(compiled(x, 100), loop(x, 100))
        # the frame before the break compiles; its continuation unrolls past the budget and runs as Python, for
        # other loop lengths too (it is not traced again, in budget-sized pieces, at each call); _step, called
        # from Python, compiles once
        assert cnt.frame_count == 2
        assert same(compiled(x, 120), loop(x, 120))
        assert same(compiled(x, 3), loop(x, 3))
        assert cnt.frame_count == 2
    framejit.reset()


def test_misspelt_framejit_logs_section_is_an_error_listing_the_valid_ones(monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "guards,grpah")
    with pytest.raises(ValueError, match="unknown section.*'grpah'.*valid sections: bytecode, guards, graph"):
        framejit.optimize(CompileCounter())(add_one)(torch.randn(3))
    monkeypatch.setenv("FRAMEJIT_LOGS", "guards,+graph,all")
    assert logs.sections() == {"guards", "graph", "all"}
    framejit.reset()


def test_misspelt_framejit_logs_fails_at_import():
    env = dict(os.environ, FRAMEJIT_LOGS="breaks,recompile")
    proc = subprocess.run([sys.executable, "-c", "import framejit"], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "unknown section(s) 'recompile'" in proc.stderr and "recompiles" in proc.stderr


def _scaled_by_its_sum(x):
    n = x.sum().item()
    return x * n + 1


def _positives(x):
    return torch.nonzero(x > 0).float().sum() + x.sum()


@pytest.mark.parametrize(
    ("fn", "setting"),
    [(_scaled_by_its_sum, "capture_scalar_outputs"), (_positives, "capture_dynamic_output_shape_ops")],
)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_data_dependent_values_stay_in_the_graph_where_the_setting_asks(fn, setting, backend):
    x = torch.randn(6)
    assert framejit.explain(fn)(x).break_reasons  # by default: a graph break, as torch.compile's
    counter = CompileCounterWithBackend(backend)
    with framejit.config.patch(**{setting: True}):
        compiled = framejit.compile(fn, backend=counter)
        for _ in range(3):
            x = torch.randn(6)
            torch.testing.assert_close(compiled(x), fn(x))
        assert framejit.explain(fn)(x).break_reasons == []
    assert counter.frame_count == 1  # one graph, for every value


@pytest.mark.slow
def test_the_default_budget_takes_a_loop_of_ten_thousand_iterations():
    """Over 100,000 instructions (the old budget): one graph, as torch.compile unrolls it."""

    def loop(x, n):
        total = x
        for i in range(n):
            total = total + i
        return total

    counter = CompileCounter()
    x = torch.randn(2)
    assert same(framejit.compile(loop, backend=counter)(x, 12_000), loop(x, 12_000))
    assert counter.frame_count == 1
