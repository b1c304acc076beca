"""Generators and coroutines around compiled code, framejit's exception classes, and where cache
entries live."""

import asyncio

import torch

import framejit
from framejit import cache
from framejit.testing import CompileCounter, same


# ---------------------------------------------------------------------------------------------
# generators and coroutines


def _gen(x, n):
    for i in range(n):
        yield x + i


async def _coro(x):
    await asyncio.sleep(0)
    return x * 2


def test_generator_called_inside_compiled_function():
    def fn(x):
        total = x * 0
        for item in _gen(x, 3):
            total = total + item
        return total

    f = framejit.optimize(CompileCounter())(fn)
    x = torch.randn(4)
    assert same(f(x), fn(x))
    assert same(f(x), fn(x))


def test_generator_and_coroutine_frames_under_context_manager():
    x = torch.randn(4)
    cnt = CompileCounter()
    with framejit.optimize(cnt):
        items = list(_gen(x, 3))
        out = asyncio.run(_coro(x))
    assert same(items, [x, x + 1, x + 2])
    assert same(out, x * 2)


def test_optimized_generator_function():
    g = framejit.optimize(CompileCounter())(_gen)
    x = torch.randn(3)
    assert same(list(g(x, 4)), list(_gen(x, 4)))

    c = framejit.optimize(CompileCounter())(_coro)
    assert same(asyncio.run(c(x)), x * 2)


def test_generator_throw_close_inside_context():
    def gen():
        try:
            yield 1
            yield 2
        except KeyError:
            yield "caught"

    with framejit.optimize(CompileCounter()):
        it = gen()
        assert next(it) == 1
        assert it.throw(KeyError) == "caught"
        it.close()


# ---------------------------------------------------------------------------------------------
# exceptions


def test_exception_classes():
    exc = framejit.exc
    for cls in (exc.Unsupported, exc.UserError, exc.BackendCompilerFailed, exc.CacheLimitExceeded):
        assert issubclass(cls, exc.FramejitError)
    assert issubclass(exc.FramejitError, Exception)


def test_cache_entries_live_in_code_not_wrapper():
    cnt = CompileCounter()

    def fn(x):
        return x.abs()

    f1 = framejit.optimize(cnt)(fn)
    f2 = framejit.optimize(cnt)(fn)
    x = torch.randn(3)
    f1(x)
    f2(x)
    assert cnt.frame_count == 1  # the second wrapper reuses the code object's entry
    assert cache.entries(fn.__code__)
