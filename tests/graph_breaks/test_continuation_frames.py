"""The frames code after a graph break runs in: a continuation takes the place of the frame that broke (the
hook calls it once that frame has returned), so the stack stays as deep as eager's whatever the number of breaks,
and everything that inspects frames (inspect, traceback, warnings, logging) sees the user's function and lines."""

from __future__ import annotations

import inspect
import logging
import sys
import traceback
import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter

from tests.graph_breaks.harness import differential
from tests.helpers import line_of, logged

THIS_FILE = __file__


def stack_depth():
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def loop_with_breaks(x, n):
    depths = []
    for _ in range(n):
        print("", end="")
        if x.sum() > 0:  # a tensor condition: another break
            x = x - 0.001
        depths.append(stack_depth())
    return x, depths


@pytest.mark.parametrize("n", [1, 50, pytest.param(200, marks=pytest.mark.slow)])
def test_a_loop_that_breaks_every_iteration_keeps_the_stack_as_deep_as_eager(n):
    framejit.config.cache_size_limit, saved = 256, framejit.config.cache_size_limit
    try:
        eager_x, eager_depths = loop_with_breaks(torch.ones(3), n)
        compiled = framejit.optimize(CompileCounter())(loop_with_breaks)
        x, depths = compiled(torch.ones(3), n)
    finally:
        framejit.config.cache_size_limit = saved
    torch.testing.assert_close(x, eager_x)
    # one frame more than eager at most: the compiled function's own wrapper
    assert max(depths) - max(eager_depths) <= 1, (depths, eager_depths)
    assert len(set(depths)) == 1, "the depth does not grow with the iteration count"


def inspect_after_break(x):
    x = x + 1
    print("", end="")
    here = inspect.stack(0)[0]  # inspect-here
    return x, here.function, here.lineno, here.filename


def test_inspect_stack_after_a_break_sees_the_user_frame():
    compiled = framejit.optimize(CompileCounter())(inspect_after_break)
    x, function, lineno, filename = compiled(torch.ones(2))
    torch.testing.assert_close(x, torch.ones(2) + 1)
    assert (function, lineno, filename) == (
        "inspect_after_break",
        line_of(inspect_after_break, "# inspect-here"),
        THIS_FILE,
    )
    inspect.stack()  # every frame's positions are readable (a continuation's included)


def raise_after_break(x):
    x = x * 2
    print("", end="")
    raise ValueError("boom")  # raise-here


def test_traceback_after_a_break_names_the_user_function_and_line():
    compiled = framejit.optimize(CompileCounter())(raise_after_break)
    with pytest.raises(ValueError) as info:
        compiled(torch.ones(2))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.name, last.lineno, last.filename) == (
        "raise_after_break",
        line_of(raise_after_break, "# raise-here"),
        THIS_FILE,
    )
    assert "raise ValueError" in last.line
    formatted = "".join(traceback.format_exception(info.value))
    assert "resume" not in formatted


def warn_after_break(x):
    x = x + 1
    print("", end="")
    warnings.warn("careful")  # warn-here
    return x


def log_after_break(x, logger):
    x = x + 1
    print("", end="")
    logger.warning("note", stack_info=True)  # log-here
    return x


def test_warnings_and_logging_after_a_break_name_the_user_line():
    compiled = framejit.optimize(CompileCounter())(warn_after_break)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(torch.ones(2))
    assert [(w.filename, w.lineno) for w in caught] == [(THIS_FILE, line_of(warn_after_break, "# warn-here"))]

    logger = logging.getLogger("tests.continuation_frames")
    with logged(logger.name) as records:
        framejit.optimize(CompileCounter())(log_after_break)(torch.ones(2), logger)
    (record,) = records
    assert (record.funcName, record.lineno) == ("log_after_break", line_of(log_after_break, "# log-here"))
    assert f"line {record.lineno}, in log_after_break" in record.stack_info


def raise_in_grad_block_inside_try(x):
    try:
        with torch.set_grad_enabled(False):
            y = x * 2
            print("", end="")
            raise ValueError
    except ValueError:
        y = x + 1
    return y, torch.is_grad_enabled()


def test_break_in_a_with_block_inside_a_try_that_then_raises():
    # the continuation jumps into the middle of the try block: its stack size comes from the original's
    differential(raise_in_grad_block_inside_try, (torch.ones(2, requires_grad=True),))


def generator_of_continuations(x):
    for i in range(3):
        print("", end="")
        x = x + i
    return x


def test_a_continuation_called_by_a_function_without_the_hook_still_returns_its_value():
    compiled = framejit.optimize(CompileCounter())(generator_of_continuations)
    torch.testing.assert_close(compiled(torch.zeros(2)), generator_of_continuations(torch.zeros(2)))
    with framejit.disable():  # the hook is off while the same function runs: plain Python, same result
        torch.testing.assert_close(compiled(torch.zeros(2)), generator_of_continuations(torch.zeros(2)))


def namespace_across_breaks(x, n):
    y = x + 1
    print("", sorted(locals()), end="")  # a break whose argument reads the frame's variables
    z = y * 2
    seen = [sorted(locals()), sorted(vars()), dir()]
    for i in range(n):
        print("", end="")
        z = z + len(locals())  # x is dead after the first line, and still a variable of the frame
    return z, seen, {k: v for k, v in locals().items() if k != "seen"}


def test_locals_vars_and_dir_see_the_users_variables_around_breaks():
    # run as Python at a break, locals() would read the frame running the compiled code: its temporaries
    differential(namespace_across_breaks, (torch.randn(3), 3), repeat=2)
