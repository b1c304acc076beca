"""Graph breaks: breaks inside try / except / finally, and exceptions that propagate across a break.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import traceback

import pytest
import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import brk, differential, raise_key_error, raise_value_error, rec
from tests.helpers import line_of


THIS_FILE = __file__  # the file the functions below are defined in, as tracebacks and errors name it


# --- try / except / finally ---


def try_except_catches(x, log):
    y = x + 1
    try:
        log.append("before")
        raise_value_error(log)
        log.append("not reached")
        y = y * 100
    except ValueError as e:
        log.append(f"caught {e}")
        y = y * 2
    finally:
        log.append("finally")
        y = y + 0.5
    return y * 3


def try_finally_propagates(x, log):
    y = x + 1
    try:
        log.append("try")
        raise_value_error(log)
    finally:
        log.append("finally")
        y = y * 2
        log.append(y.shape[0])
    return y


def try_except_wrong_type(x, log):
    y = x + 1
    try:
        raise_value_error(log)
    except KeyError:
        log.append("wrong handler")
    finally:
        log.append("finally")
    return y


def try_nested(x, log):
    y = x * 2
    try:
        try:
            rec(log, "inner try")
            raise_value_error(log)
        finally:
            log.append("inner finally")
            y = y + 1
    except ValueError:
        log.append("outer except")
        y = y * 3
    rec(log, "after")
    return y - 1


def try_break_no_exception(x, log):
    y = x + 1
    try:
        rec(log, "in try")
        y = y * 2
    except Exception:
        log.append("never")
    else:
        rec(log, "else")
        y = y + 3
    finally:
        rec(log, "finally")
    return y


def try_in_loop(x, log):
    y = x
    for i in range(3):
        try:
            if i == 1:
                raise_value_error(log)
            rec(log, i)
            y = y + i
        except ValueError:
            log.append("caught")
            y = y * 2
    return y


def try_break_in_handler(x, log):
    y = x + 1
    try:
        raise_value_error(log)
    except ValueError:
        rec(log, "handler")
        y = y * 2
    return y


TRY_CASES = [
    try_except_catches,
    try_finally_propagates,
    try_except_wrong_type,
    try_nested,
    try_break_no_exception,
    try_in_loop,
    try_break_in_handler,
]


@pytest.mark.parametrize("fn", TRY_CASES, ids=[f.__name__ for f in TRY_CASES])
def test_break_in_try(fn):
    differential(fn, (torch.randn(3), []), repeat=2)


def test_try_except_catches_log_order():
    log = []
    framejit.optimize(CompileCounter())(try_except_catches)(torch.randn(3), log)
    assert log == ["before", "raiser ran", "caught bad value from opaque code", "finally"]


# --- exceptions propagate ---


def user_fn_raises(x):
    y = x + 1
    raise_key_error(y)  # raises-here
    return y


def user_fn_raises_after_break(x):
    y = x + 1
    brk()
    z = y[100]  # raises-here
    return z


@pytest.mark.parametrize("fn, exc_type", [(user_fn_raises, KeyError), (user_fn_raises_after_break, IndexError)])
def test_exception_propagates_with_user_traceback(fn, exc_type):
    differential(fn, (torch.randn(3),))
    f = framejit.optimize(CompileCounter())(fn)
    with pytest.raises(exc_type) as info:
        f(torch.randn(3))
    frames = traceback.extract_tb(info.value.__traceback__)
    line = line_of(fn, "# raises-here")
    assert any(fr.filename == THIS_FILE and fr.lineno == line for fr in frames), frames
    assert any(fr.name == fn.__name__ for fr in frames), frames
