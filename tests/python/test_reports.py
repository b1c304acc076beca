"""warnings.warn and a logging.Logger's level methods inside compiled code: replayed after the graph
(framejit/variables/reports.py), with eager's messages, categories, files and lines, and no graph break."""

import logging
import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph

LOG = logging.getLogger("framejit.tests.reports")


def _deprecated_helper(x):
    warnings.warn("use something else", DeprecationWarning, stacklevel=2)  # names its caller's line
    warnings.warn("from the helper itself")
    return x * 2


def _warns(x):
    y = x + 1
    warnings.warn(f"got shape {tuple(x.shape)}")
    y = _deprecated_helper(y)
    return y.sin()


def _caught(fn, *args, simplefilter="always", calls=2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(simplefilter)
        results = [fn(*args) for _ in range(calls)]
    return results, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("simplefilter", ["always", "default"])
def test_warnings_are_replayed_as_eager_gives_them(simplefilter):
    cnt = CompileCounter()
    x = torch.randn(3)
    got, got_warnings = _caught(framejit.optimize(cnt)(_warns), x, simplefilter=simplefilter)
    want, want_warnings = _caught(_warns, x, simplefilter=simplefilter)
    assert (
        same(got, want)
        and got_warnings == want_warnings
        and len(want_warnings) == (6 if simplefilter == "always" else 3)
    )
    assert cnt.frame_count == 1


def test_a_warning_keeps_a_graph_whole_under_fullgraph():
    x = torch.randn(3)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert same(run_fullgraph(_warns, x), _warns(x))


def _logs(x, logger):
    y = x * 3
    logger.warning("sizes %s and %d", tuple(x.shape), x.shape[0])
    logger.info("filtered out at WARNING")
    logger.log(logging.ERROR, "an error %s", "note", extra={"tag": 7})
    return y + 1


def test_log_calls_are_replayed_as_eager_makes_them():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    LOG.addHandler(handler)
    LOG.setLevel(logging.WARNING)
    try:
        x = torch.randn(2)
        cnt = CompileCounter()
        got = framejit.optimize(cnt)(_logs)(x, LOG)
        compiled = [(r.levelname, r.getMessage(), r.funcName, r.lineno, getattr(r, "tag", None)) for r in records]
        records.clear()
        want = _logs(x, LOG)
        eager = [(r.levelname, r.getMessage(), r.funcName, r.lineno, getattr(r, "tag", None)) for r in records]
    finally:
        LOG.removeHandler(handler)
    assert same(got, want) and compiled == eager and len(eager) == 2
    assert cnt.frame_count == 1


def _warns_with_a_value(x):
    y = x.sum()
    warnings.warn(f"sum is {y}")  # formatting the tensor needs its data
    return y * 2


def test_a_message_that_needs_the_data_breaks_the_graph():
    x = torch.ones(3)
    cnt = CompileCounter()
    got, got_warnings = _caught(framejit.optimize(cnt)(_warns_with_a_value), x, calls=1)
    want, want_warnings = _caught(_warns_with_a_value, x, calls=1)
    assert same(got, want) and got_warnings == want_warnings
    assert cnt.frame_count == 2


STATE = {"writes": 0}


def _writes_then_warns(x):
    STATE["writes"] += 1
    warnings.warn("becomes an error")
    STATE["writes"] += 10
    return x + 1


def test_a_warning_that_is_an_error_raises_where_it_stands():
    compiled = framejit.optimize(CompileCounter())(_writes_then_warns)
    for fn in (_writes_then_warns, compiled):
        STATE["writes"] = 0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="becomes an error"):
                fn(torch.ones(2))
        assert STATE["writes"] == 1
