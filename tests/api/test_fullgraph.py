"""optimize_assert / nopython / fullgraph on a data-dependent branch: the error names this file
and the line of the branch."""

import logging
import os

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same

from tests.helpers import line_of


# ---------------------------------------------------------------------------------------------
# optimize_assert / nopython / fullgraph on a data-dependent branch


def _data_dependent(x):
    y = x.cos()
    if x.sum() > 0:
        return y + 1
    return y - 1


def _eager_data_dependent(x):
    return x.cos() + 1 if x.sum() > 0 else x.cos() - 1


def _assert_names_user_line(err):
    msg = str(err)
    assert os.path.basename(__file__) in msg, msg
    assert str(line_of(_data_dependent, "if x.sum() > 0")) in msg, msg


@pytest.mark.parametrize("form", ["optimize_assert", "nopython", "fullgraph", "compile_decorator"])
def test_data_dependent_branch_raises_under_fullgraph(form):
    cnt = CompileCounter()
    if form == "optimize_assert":
        f = framejit.optimize_assert(cnt)(_data_dependent)
    elif form == "nopython":
        f = framejit.optimize(cnt, nopython=True)(_data_dependent)
    elif form == "fullgraph":
        f = framejit.compile(_data_dependent, backend=cnt, fullgraph=True)
    else:
        f = framejit.compile(backend=cnt, fullgraph=True)(_data_dependent)
    with pytest.raises(framejit.exc.Unsupported) as info:
        f(torch.ones(4))
    _assert_names_user_line(info.value)
    assert isinstance(info.value, framejit.exc.FramejitError)
    # still raises on the next call (no silent fallback cached)
    with pytest.raises(framejit.exc.Unsupported):
        f(torch.ones(4))


def test_data_dependent_branch_runs_as_python_with_info_log(caplog):
    caplog.set_level(logging.INFO, logger="framejit")
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_data_dependent)
    for x in (torch.ones(4), -torch.ones(4), torch.randn(4)):
        assert same(f(x), _eager_data_dependent(x))
    records = [r for r in caplog.records if r.name.startswith("framejit") and r.levelno == logging.INFO]
    assert records, "the reason for running as Python should be logged at INFO"
    assert any("_data_dependent" in r.getMessage() for r in records)


def test_fullgraph_after_fallback_still_raises():
    f = framejit.optimize(CompileCounter())(_data_dependent)
    x = torch.ones(3)
    assert same(f(x), _eager_data_dependent(x))
    g = framejit.optimize_assert(CompileCounter())(_data_dependent)
    with pytest.raises(framejit.exc.Unsupported):
        g(x)
