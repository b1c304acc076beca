"""framejit.config.patch and the backends registry: registering, looking up and listing
backends, and backends that fail."""

import pytest
import torch

import framejit
from framejit.testing import same

from tests.helpers import poly, sin_plus_cos


# ---------------------------------------------------------------------------------------------
# config


def test_config_patch_context_manager_and_decorator():
    default = framejit.config.cache_size_limit
    assert default == 8
    with framejit.config.patch(cache_size_limit=3, suppress_errors=True):
        assert framejit.config.cache_size_limit == 3
        assert framejit.config.suppress_errors is True
    assert framejit.config.cache_size_limit == default
    assert framejit.config.suppress_errors is False

    @framejit.config.patch(debug=True)
    def read():
        return framejit.config.debug

    assert read() is True
    assert framejit.config.debug is False
    with pytest.raises(Exception):
        framejit.config.patch(no_such_setting=1)
    for name in (
        "debug",
        "verbose",
        "log_level",
        "output_code",
        "dynamic_shapes",
        "cache_size_limit",
        "suppress_errors",
    ):
        assert hasattr(framejit.config, name)


def test_config_patch_restores_on_exception():
    with pytest.raises(ValueError):
        with framejit.config.patch(cache_size_limit=1):
            raise ValueError
    assert framejit.config.cache_size_limit == 8


# ---------------------------------------------------------------------------------------------
# backends registry


def test_register_lookup_list_backends():
    name = "framejit_test_backend_xyz"
    seen = []

    def my_backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    try:
        framejit.register_backend(my_backend, name=name)
        assert name in framejit.list_backends()
        assert framejit.lookup_backend(name) is my_backend
        assert framejit.backends.BACKENDS[name] is my_backend
        names = framejit.list_backends()
        assert names == sorted(names)
        assert "eager" in framejit.list_backends()

        f = framejit.optimize(name)(poly)
        x = torch.randn(3)
        assert same(f(x), poly(x))
        assert len(seen) == 1
        g = framejit.compile(sin_plus_cos, backend=name)
        assert same(g(x), sin_plus_cos(x))
        assert len(seen) == 2
    finally:
        framejit.backends.BACKENDS.pop(name, None)


def test_register_backend_as_decorator_with_tags():
    name = "framejit_test_debug_tagged"
    try:

        @framejit.register_backend(name=name, tags=("debug",))
        def tagged(gm, example_inputs):
            return gm.forward

        assert name not in framejit.list_backends()
        assert name in framejit.list_backends(exclude_tags=())
        assert framejit.lookup_backend(name) is tagged
    finally:
        framejit.backends.BACKENDS.pop(name, None)


def test_builtin_backends_by_name():
    x = torch.randn(3)
    for name in ("eager", "debug"):
        f = framejit.optimize(name)(poly)
        framejit.reset()
        assert same(f(x), poly(x))
    assert callable(framejit.lookup_backend("eager"))


def test_unknown_backend_name_fails_at_optimize_time():
    with pytest.raises(Exception) as info:
        framejit.optimize("no_such_backend_qq")
    assert "no_such_backend_qq" in str(info.value)
    assert "eager" in str(info.value)
    with pytest.raises(Exception) as info:
        framejit.compile(poly, backend="no_such_backend_qq")
    assert "eager" in str(info.value)


def test_non_callable_to_compile_raises_type_error():
    with pytest.raises(TypeError):
        framejit.compile(3)
    with pytest.raises(TypeError):
        framejit.compile("not a function", backend="eager")
    with pytest.raises(TypeError):
        framejit.optimize("eager")(42)


def _exploding_backend(gm, example_inputs):
    raise ValueError("kaboom from backend")


def test_backend_that_raises_gives_backend_compiler_failed():
    f = framejit.optimize(_exploding_backend)(poly)
    with pytest.raises(framejit.exc.BackendCompilerFailed) as info:
        f(torch.randn(3))
    err = info.value
    assert "_exploding_backend" in str(err)
    assert isinstance(err.__cause__, ValueError)
    assert "kaboom" in str(err.__cause__)
    assert isinstance(err, framejit.exc.FramejitError)


def test_backend_that_raises_with_suppress_errors_warns_and_runs_python():
    f = framejit.optimize(_exploding_backend)(poly)
    x = torch.randn(3)
    with framejit.config.patch(suppress_errors=True):
        with pytest.warns(UserWarning):
            out = f(x)
        assert same(out, poly(x))
        assert same(f(x * 2), poly(x * 2))


def test_named_backend_that_raises_is_named():
    name = "framejit_test_exploding"
    try:
        framejit.register_backend(_exploding_backend, name=name)
        f = framejit.optimize(name)(poly)
        with pytest.raises(framejit.exc.BackendCompilerFailed) as info:
            f(torch.randn(3))
        assert name in str(info.value)
    finally:
        framejit.backends.BACKENDS.pop(name, None)
