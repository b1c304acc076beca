"""FRAMEJIT_LOGS takes TORCH_LOGS's names: graph_breaks and graph_code for framejit's breaks and graph sections
(guards, recompiles and bytecode are spelt alike), and dynamo / +dynamo / -dynamo (or framejit) for the level of
the `framejit` logger."""

import logging
import re

import pytest
import torch

import framejit
from framejit import logs
from framejit.testing import CompileCounter

from tests.helpers import logged


@pytest.fixture(autouse=True)
def _restore_logger():
    level, handlers = logs.log.level, list(logs.log.handlers)
    yield
    logs.log.setLevel(level)
    logs.log.handlers[:] = handlers


def _breaks(x):
    y = x.sin()
    framejit.graph_break()
    return y.cos()


@pytest.mark.parametrize(
    "torch_names, sections",
    [
        ("graph_breaks", {"breaks"}),
        ("graph_code", {"graph"}),
        ("recompiles,guards", {"recompiles", "guards"}),
        ("graph_breaks, graph_code,bytecode", {"breaks", "graph", "bytecode"}),
        ("+graph_breaks", {"breaks"}),
    ],
)
def test_torch_logs_names_select_framejit_sections(monkeypatch, torch_names, sections):
    monkeypatch.setenv("FRAMEJIT_LOGS", torch_names)
    assert logs.sections() == sections


@pytest.mark.parametrize("name", ["graph_breaks", "graph_code"])
def test_an_alias_prints_what_the_section_prints(monkeypatch, capsys, name):
    section = logs.ALIASES[name]
    outputs = []
    for value in (section, name):
        framejit.reset()
        monkeypatch.setenv("FRAMEJIT_LOGS", value)
        framejit.optimize(CompileCounter())(_breaks)(torch.randn(3))
        outputs.append(capsys.readouterr().out)
    same_but_numbering = [re.sub(r"__compiled_fn_\d+", "__compiled_fn_N", out) for out in outputs]
    assert same_but_numbering[0] == same_but_numbering[1] and outputs[0]
    assert ("GRAPH BREAK at" if name == "graph_breaks" else "class GraphModule") in outputs[0]


@pytest.mark.parametrize(
    "value, level", [("+dynamo", logging.DEBUG), ("dynamo", logging.INFO), ("-dynamo", logging.ERROR)]
)
def test_levels_set_the_framejit_logger(monkeypatch, value, level):
    monkeypatch.setenv("FRAMEJIT_LOGS", f"guards,{value}")
    assert logs.sections() == {"guards"}
    assert logs.log.level == level
    monkeypatch.setenv("FRAMEJIT_LOGS", value.replace("dynamo", "framejit") + ",graph")
    logs.log.setLevel(logging.NOTSET)
    assert logs.sections() == {"graph"}
    assert logs.log.level == level


def test_plus_dynamo_logs_graph_breaks_at_info(monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "+dynamo")
    with logged("framejit") as records:
        framejit.optimize(CompileCounter())(_breaks)(torch.randn(3))
    assert any("graph break at" in r.getMessage() and "framejit.graph_break()" in r.getMessage() for r in records)


def test_an_unknown_name_lists_sections_aliases_and_levels(monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "graph_breaks,graph_brakes")
    with pytest.raises(ValueError) as info:
        logs.sections()
    assert str(info.value) == (
        "FRAMEJIT_LOGS names unknown section(s) 'graph_brakes'; valid sections: bytecode, guards, graph, breaks, "
        "recompiles, all; TORCH_LOGS names: graph_breaks (breaks), graph_code (graph); levels: dynamo, framejit "
        "(INFO), +dynamo (DEBUG), -dynamo (ERROR)"
    )
    monkeypatch.setenv("FRAMEJIT_LOGS", "-guards")
    with pytest.raises(ValueError, match="unknown section.*'-guards'"):
        logs.sections()
