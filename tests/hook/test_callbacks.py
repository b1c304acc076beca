"""The PEP 523 frame hook (framejit._C._hook) driven by plain Python callbacks: what a callback
sees and returns, which frames it is called for, and how it is installed, disabled and restored."""

from __future__ import annotations

import asyncio
import types
from typing import Any, Callable

import pytest

from framejit._C import _hook

from tests.helpers import CallbackRecorder
from tests.hook.harness import make_hit_code, replacement


def plain(a, b):
    return a + b


def with_kwonly(a, b=2, *, c, d=4):
    return (a, b, c, d)


def with_varargs(a, *args):
    return (a, args)


def with_varkw(a, **kw):
    return (a, kw)


def with_all(a, b=2, *args, c, d=4, **kw):
    return (a, b, args, c, d, kw)


@pytest.mark.parametrize(
    "fn, args, kwargs, slots",
    [
        (plain, (1, 2), {}, (1, 2)),
        (with_kwonly, (1,), {"c": 3}, (1, 2, 3, 4)),
        (with_varargs, (1, 2, 3), {}, (1, (2, 3))),
        (with_varkw, (1,), {"x": 5}, (1, {"x": 5})),
        (with_all, (1, 2, 3), {"c": 4, "z": 6}, (1, 2, 4, 4, (3,), {"z": 6})),
    ],
)
def test_callback_sees_function_and_arg_slots(fn: Callable, args: tuple, kwargs: dict, slots: tuple) -> None:
    seen: list[tuple[Any, tuple]] = []

    def cb(func: types.FunctionType, a: tuple) -> None:
        if func is fn:
            seen.append((func, a))

    expected = fn(*args, **kwargs)
    assert _hook.call_with_callback(cb, fn, *args, **kwargs) == expected
    assert seen == [(fn, slots)]


def test_returning_none_runs_original() -> None:
    rec = CallbackRecorder({"plain"})
    assert _hook.call_with_callback(rec, plain, 2, 3) == 5
    assert rec.calls == [("plain", (2, 3))]


def test_returning_replacement_runs_it() -> None:
    code = replacement("def r(a, b, c, d, args, kw):\n    return ('R', a, b, c, d, args, kw)\n", "r")
    rec = CallbackRecorder({"with_all"}, lambda func, args: types.FunctionType(code, func.__globals__))
    assert _hook.call_with_callback(rec, with_all, 1, 2, 3, c=4, z=6) == ("R", 1, 2, 4, 4, (3,), {"z": 6})


def test_callback_validation_and_install() -> None:
    with pytest.raises(TypeError):
        _hook.set_callback(True)
    with pytest.raises(TypeError):
        _hook.call_with_callback(1, plain, 1, 2)
    assert _hook.set_callback(False) is None
    assert _hook.is_installed()
    assert _hook.get_callback() is False
    assert _hook.set_callback(None) is False
    assert _hook.get_callback() is None


def test_generators_coroutines_and_throw_run_untouched() -> None:
    def gen(x):
        try:
            yield x
        except ValueError:
            yield "caught"
        yield x + 1

    async def coro(x):
        return x * 3

    async def agen(x):
        yield x

    always = [(lambda func, *a: True, make_hit_code(), [None] * 3, None, False)]
    for code in (gen.__code__, coro.__code__, agen.__code__):
        _hook.set_extra(code, list(always))

    def run() -> list:
        g = gen(1)
        out = [next(g), g.throw(ValueError), next(g)]
        out.append(asyncio.run(coro(2)))

        async def first() -> Any:
            async for v in agen(5):
                return v

        out.append(asyncio.run(first()))
        return out

    rec = CallbackRecorder({"gen", "coro", "agen"}, lambda func, args: pytest.fail("hooked"))
    assert _hook.call_with_callback(rec, run) == [1, "caught", 2, 6, 5]
    assert rec.calls == []
    assert _hook.get_stats()["hits"] == 0


def test_module_and_class_bodies_are_not_hooked() -> None:
    names: list[str] = []

    def cb(func: types.FunctionType, args: tuple) -> None:
        names.append(func.__code__.co_name)

    def run() -> int:
        ns: dict = {}
        exec(compile("y = 41 + 1", "<body>", "exec"), ns)

        class Body:
            z = 1

        return ns["y"] + Body.z

    assert _hook.call_with_callback(cb, run) == 43
    assert "<module>" not in names and "Body" not in names
    assert names == ["run"]


def test_callback_is_disabled_while_it_runs_and_restored() -> None:
    inner_seen: list[Any] = []

    def helper(x):
        return x + 1

    def cb(func: types.FunctionType, args: tuple) -> None:
        inner_seen.append(_hook.get_callback())
        helper(1)  # would recurse into cb if the hook were still on

    def f(x):
        return helper(x)

    assert _hook.call_with_callback(cb, f, 1) == 2
    # f, then helper called from f; helper called from cb is not hooked.
    assert inner_seen == [None, None]


def test_callback_set_inside_callback_is_kept() -> None:
    other = CallbackRecorder(set())

    def cb(func: types.FunctionType, args: tuple) -> None:
        _hook.set_callback(other)

    def f():
        assert _hook.get_callback() is other
        return 1

    def run() -> int:
        result = f()
        assert _hook.get_callback() is other
        return result

    assert _hook.call_with_callback(cb, run) == 1
    assert _hook.get_callback() is None  # call_with_callback restores its own previous value


def test_exceptions_propagate() -> None:
    def f(x):
        return x

    boom = replacement("def boom(x):\n    raise KeyError(x)\n", "boom")
    _hook.set_extra(f.__code__, [(lambda func, x: x == 1, boom, [None] * 3, None, False)])
    with pytest.raises(KeyError) as info:
        _hook.call_with_callback(False, f, 1)
    assert info.value.args == (1,)
    assert any(tb.name == "boom" for tb in info.traceback)

    def g(x):
        raise IndexError(x)

    with pytest.raises(IndexError):
        _hook.call_with_callback(CallbackRecorder({"g"}), g, 2)

    def bad_cb(func: types.FunctionType, args: tuple) -> None:
        if func is g:
            raise ZeroDivisionError("from callback")

    with pytest.raises(ZeroDivisionError, match="from callback"):
        _hook.call_with_callback(bad_cb, g, 2)
    assert _hook.get_callback() is None


def test_recursion_200_deep() -> None:
    def rec(n):
        return 0 if n == 0 else 1 + rec(n - 1)

    seen: list[int] = []

    def cb(func: types.FunctionType, args: tuple) -> None:
        if func is rec:
            seen.append(args[0])

    assert _hook.call_with_callback(cb, rec, 200) == 200
    assert seen == list(range(200, -1, -1))

    # Every other level hits a cache entry whose replacement calls back into rec.
    ns: dict = {}
    exec("def rec(n):\n    return 0 if n == 0 else 1 + rec(n - 1)\n", ns)
    code = replacement("def rrec(n):\n    return 0 if n == 0 else 1 + rec(n - 1)\n", "rrec")
    _hook.set_extra(ns["rec"].__code__, [(lambda func, n: n % 2 == 0, code, [None] * 3, None, False)])
    misses: list[int] = []
    assert _hook.call_with_callback(lambda func, args: misses.append(args[0]), ns["rec"], 200) == 200
    assert misses == list(range(199, 0, -2))
    assert _hook.get_stats()["hits"] == 101


def test_call_with_callback_restores_previous_even_on_exception() -> None:
    outer = CallbackRecorder(set())
    _hook.set_callback(outer)

    def fails(a, *, b):
        assert _hook.get_callback() is False
        raise OSError(a, b)

    with pytest.raises(OSError) as info:
        _hook.call_with_callback(False, fails, 1, b=2)
    assert info.value.args == (1, 2)
    assert _hook.get_callback() is outer
    assert _hook.call_with_callback(None, lambda **kw: kw, x=1) == {"x": 1}
    assert _hook.get_callback() is outer
    with pytest.raises(TypeError):
        _hook.call_with_callback(None)


def test_torch_compile_coexists() -> None:
    torch = pytest.importorskip("torch")

    def inner(x):
        return x * 2

    def fn(x):
        return torch.sin(x) + inner(x)

    def cb(func: types.FunctionType, args: tuple) -> None:
        if func is fn or func is inner:
            raise AssertionError("our callback ran under torch's hook")

    module_cls = torch.nn.Module
    patched = {name: module_cls.__dict__[name] for name in ("__init__", "__setstate__")}
    compiled = torch.compile(fn, backend="eager")
    x = torch.randn(8)
    try:
        _hook.set_callback(cb)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), torch.sin(x) + 2 * x)
        assert _hook.is_installed()
        # Outside torch's region our callback sees frames again.
        rec = CallbackRecorder({"inner"})
        _hook.set_callback(rec)
        inner(x)
        assert len(rec.calls) == 1
    finally:
        _hook.set_callback(None)
        # torch.compile wraps nn.Module.__init__ for the whole process (TorchDynamo tags modules made in forward);
        # later tests build modules inside framejit's traces, so the wrapper must not outlive this test
        for name, method in patched.items():
            setattr(module_cls, name, method)
        if "___needs_generation_tag_patch" in module_cls.__dict__:
            delattr(module_cls, "___needs_generation_tag_patch")


def test_hook_installed_only_while_a_callback_is_set() -> None:
    # Any eval-frame function stops CPython 3.11 inlining Python calls: left installed, it slows all of a process's
    # Python (measured 1.4x on plain recursion), so it is on only while some thread has a callback.
    seen: list[bool] = []

    def probe() -> bool:
        return _hook.is_installed()

    def cb(func: types.FunctionType, args: tuple) -> None:
        if func is probe:
            seen.append(_hook.is_installed())  # (guards and the callback run with it off)

    assert not _hook.is_installed()
    assert _hook.call_with_callback(cb, probe) is True
    assert seen == [False]
    assert not _hook.is_installed()
    _hook.set_callback(cb)
    try:
        assert _hook.is_installed()
        assert _hook.call_with_callback(None, probe) is False  # capture off: a compiled graph runs like this
        assert _hook.is_installed()
        assert _hook.call_with_callback(False, probe) is True
    finally:
        _hook.set_callback(None)
    assert not _hook.is_installed()
