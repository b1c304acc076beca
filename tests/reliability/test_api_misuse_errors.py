"""Bad input: each mistake gives a clear error at the call that made it. The exception's traceback
ends in the test's own line followed only by a few frames of framejit's API (never the tracer's or torch's),
and the message names the cause."""

from __future__ import annotations

import os
import sys
import traceback

import pytest
import torch

import framejit

HERE = os.path.abspath(__file__)
API_FILES = {
    os.path.join(os.path.dirname(framejit.__file__), name)
    for name in (
        "api.py",
        "eval_frame.py",
        "logs.py",
        "shapes.py",
        os.path.join("backends", "registry.py"),
        os.path.join("backends", "inductor.py"),
    )
}


def add(x):
    return x + 1


def raised_at_this_call(info: pytest.ExceptionInfo, line: int) -> None:
    """The traceback's last frame in this file is `line`, and what follows it is framejit's API, briefly."""
    frames = traceback.extract_tb(info.value.__traceback__)
    mine = [i for i, f in enumerate(frames) if os.path.abspath(f.filename) == HERE]
    assert mine and frames[mine[-1]].lineno == line, traceback.format_list(frames)
    below = frames[mine[-1] + 1 :]
    assert len(below) <= 4 and all(os.path.abspath(f.filename) in API_FILES for f in below), traceback.format_list(
        below
    )


def line_of_next_call() -> int:
    """The line after the caller's: where the call under test is written."""
    return sys._getframe(1).f_lineno + 1


def test_non_callable_to_compile_and_optimize():
    with pytest.raises(TypeError, match="expects a function or nn.Module, got int") as info:
        line = line_of_next_call()
        framejit.compile(3, backend="eager")
    raised_at_this_call(info, line)
    with pytest.raises(TypeError, match="got str") as info:
        line = line_of_next_call()
        framejit.optimize("eager")("not a function")
    raised_at_this_call(info, line)
    with pytest.raises(TypeError, match="got the class Linear") as info:
        line = line_of_next_call()
        framejit.compile(torch.nn.Linear, backend="eager")
    raised_at_this_call(info, line)


def test_unknown_backend_lists_the_registered_names():
    for make in (
        lambda: framejit.compile(add, backend="no_such_backend"),
        lambda: framejit.optimize("no_such_backend"),
    ):
        with pytest.raises(ValueError, match="unknown backend 'no_such_backend'; registered backends: ") as info:
            make()
        for name in ("aot_eager", "eager", "inductor"):
            assert name in str(info.value)
    with pytest.raises(ValueError) as info:
        line = line_of_next_call()
        framejit.compile(add, backend="no_such_backend")
    raised_at_this_call(info, line)


def test_unknown_option_to_compile_or_optimize():
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'") as info:
        line = line_of_next_call()
        framejit.compile(add, bogus=1)
    raised_at_this_call(info, line)
    with pytest.raises(TypeError, match="unexpected keyword argument 'fullgraph'"):
        framejit.optimize("eager", fullgraph=True)


def test_unknown_mode_or_options_fail_at_compile():
    with pytest.raises(ValueError, match="fastest.*max-autotune") as info:
        line = line_of_next_call()
        framejit.compile(add, backend="inductor", mode="fastest")
    raised_at_this_call(info, line)
    with pytest.raises(ValueError, match="unknown option.*'cpp.simdlenn'.*did you mean.*'cpp.simdlen'") as info:
        line = line_of_next_call()
        framejit.compile(add, backend="inductor", options={"cpp.simdlenn": 8})
    raised_at_this_call(info, line)
    with pytest.raises(TypeError, match="options must be a dict") as info:
        line = line_of_next_call()
        framejit.compile(add, backend="inductor", options=["max_autotune"])
    raised_at_this_call(info, line)
    with pytest.warns(framejit.exc.FramejitWarning, match="backend 'eager' takes no mode or options") as record:
        line = line_of_next_call()
        framejit.compile(add, backend="eager", mode="reduce-overhead")
    assert [(os.path.abspath(w.filename), w.lineno) for w in record] == [(HERE, line)]


def test_bad_framejit_logs_section(monkeypatch):
    monkeypatch.setenv("FRAMEJIT_LOGS", "graph,grpah")
    with pytest.raises(ValueError, match="unknown section.*'grpah'.*valid sections: bytecode, guards, graph") as info:
        line = line_of_next_call()
        framejit.compile(add, backend="eager")
    raised_at_this_call(info, line)
    monkeypatch.delenv("FRAMEJIT_LOGS")
    compiled = framejit.compile(add, backend="eager")
    monkeypatch.setenv("FRAMEJIT_LOGS", "recompile")  # set after compile(): the first call says so
    with pytest.raises(ValueError, match="'recompile'.*recompiles") as info:
        line = line_of_next_call()
        compiled(torch.ones(2))
    raised_at_this_call(info, line)


@pytest.mark.skipif(not hasattr(framejit, "mark_dynamic"), reason="framejit.mark_dynamic is not implemented yet")
@pytest.mark.parametrize("name", ["mark_dynamic", "maybe_mark_dynamic", "mark_static"])
def test_mark_dynamic_on_a_non_tensor(name):
    with pytest.raises(TypeError, match=f"framejit.{name} expects a tensor, got list") as info:
        line = line_of_next_call()
        getattr(framejit, name)([1, 2, 3], 0)
    raised_at_this_call(info, line)
    with pytest.raises(IndexError, match="dim 2 is out of range for a tensor of 2 dims"):
        getattr(framejit, name)(torch.ones(2, 2), 2)
