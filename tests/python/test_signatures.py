"""inspect.Signature.bind in traced code (a decorator that reads one argument by name): bound now, on the shape
of the call, with the traced values put back; apply_defaults, arguments, args and kwargs follow inspect."""

import functools
import inspect

import pytest
import torch

from tests.helpers import run_fullgraph


def reads_argument(name):
    def decorate(func):
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            scale = bound.arguments[name]
            return func(*bound.args, **bound.kwargs) * scale

        return wrapper

    return decorate


@reads_argument("scale")
def layer(x, bias=None, *rest, scale=2.0, **options):
    out = x + (0 if bias is None else bias)
    for r in rest:
        out = out + r
    return out * options.get("gain", 1.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: layer(x),
        lambda x: layer(x, x),
        lambda x: layer(x, None, x, x * 2, scale=0.5, gain=3.0),
        lambda x: layer(x=x, scale=x.sum()),
    ],
)
def test_bind_then_call_with_the_bound_arguments(call):
    x = torch.randn(3)
    torch.testing.assert_close(run_fullgraph(call, x), call(x))


def test_a_call_that_does_not_fit_raises_type_error_the_code_can_catch():
    signature = inspect.signature(lambda a, b: None)

    def fn(x):
        try:
            signature.bind(x)
        except TypeError:
            return x - 1
        return x + 1

    def call(x):
        return fn(x)  # caught in an inlined frame

    x = torch.randn(3)
    torch.testing.assert_close(run_fullgraph(call, x), call(x))
