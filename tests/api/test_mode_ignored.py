"""`mode=`/`options=` with a backend that takes none (eager, aot_eager, a user's function): a warning, once per
backend and setting, and the backend compiles without them, as torch.compile logs and ignores them. Inductor still
takes and checks them."""

import warnings

import pytest
import torch

import framejit
from framejit import api
from framejit.testing import CompileCounter, same


@pytest.fixture(autouse=True)
def _forget_warnings():
    api._warned_ignored.clear()
    yield
    api._warned_ignored.clear()


def _fn(x):
    return x.sin() + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_mode_is_ignored_with_a_warning_once(backend):
    x = torch.randn(3)
    with pytest.warns(framejit.exc.FramejitWarning) as record:
        f = framejit.compile(_fn, backend=backend, mode="reduce-overhead")
    (warning,) = record
    assert str(warning.message) == (
        f"framejit.compile: backend {backend!r} takes no mode or options; ignoring mode='reduce-overhead' "
        "(the inductor backend takes them)"
    )
    assert warning.filename == __file__
    assert same(f(x), _fn(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = framejit.compile(_fn, backend=backend, mode="reduce-overhead")
    assert same(g(x), _fn(x))


def test_options_and_a_callable_backend_are_ignored_too():
    cnt = CompileCounter()
    with pytest.warns(framejit.exc.FramejitWarning, match="'CompileCounter' takes no mode or options; ignoring "):
        f = framejit.compile(_fn, backend=cnt, mode="max-autotune", options={"x": 1})
    x = torch.randn(3)
    assert same(f(x), _fn(x))
    assert cnt.frame_count == 1


def test_mode_default_is_no_mode():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = framejit.compile(_fn, backend="eager", mode="default")
    x = torch.randn(3)
    assert same(f(x), _fn(x))


def test_inductor_still_checks_its_mode():
    with pytest.raises(ValueError, match="fastest"):
        framejit.compile(_fn, backend="inductor", mode="fastest")
