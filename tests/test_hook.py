"""Tests for framejit._C._hook, the PEP 523 frame hook, driven by plain Python callbacks."""
from __future__ import annotations

import asyncio
import gc
import sys
import threading
import types
import weakref
from typing import Any, Callable, Iterator

import pytest

from framejit._C import _hook

SKIP = _hook.SKIP


@pytest.fixture(autouse=True)
def clean_hook() -> Iterator[None]:
    """Every test starts and ends with no callback on this thread and zeroed counters."""
    _hook.set_callback(None)
    _hook.reset_stats()
    yield
    _hook.set_callback(None)


def code_of(src: str, name: str) -> types.CodeType:
    """Compiles `src` and returns the code object named `name`, searching nested consts."""
    todo = [compile(src, f"<{name}>", "exec")]
    while todo:
        code = todo.pop()
        if code.co_name == name:
            return code
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    raise LookupError(name)


def replacement(src: str, name: str) -> types.CodeType:
    """A replacement code object, marked SKIP as the Python side would do."""
    code = code_of(src, name)
    _hook.set_extra(code, SKIP)
    return code


class Recorder:
    """A callback that records (name, args) for functions named in `watch` and returns `result`."""

    def __init__(self, watch: set[str], result: Any = None) -> None:
        self.watch = watch
        self.result = result
        self.calls: list[tuple[str, tuple]] = []

    def __call__(self, func: types.FunctionType, args: tuple) -> Any:
        if func.__code__.co_name not in self.watch:
            return None
        self.calls.append((func.__code__.co_name, args))
        return self.result(func, args) if callable(self.result) else self.result


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
    rec = Recorder({"plain"})
    assert _hook.call_with_callback(rec, plain, 2, 3) == 5
    assert rec.calls == [("plain", (2, 3))]


def test_returning_replacement_runs_it() -> None:
    code = replacement("def r(a, b, c, d, args, kw):\n    return ('R', a, b, c, d, args, kw)\n", "r")
    rec = Recorder({"with_all"}, lambda func, args: types.FunctionType(code, func.__globals__))
    assert _hook.call_with_callback(rec, with_all, 1, 2, 3, c=4, z=6) == ("R", 1, 2, 4, 4, (3,), {"z": 6})


def make_hit_code(nargs: int = 2) -> types.CodeType:
    """A replacement returning ('hit', *its arguments)."""
    params = ", ".join(f"a{i}" for i in range(nargs))
    return replacement(f"def hit({params}):\n    return ('hit', {params})\n", "hit")


def test_cache_hit_skips_callback_and_miss_calls_it() -> None:
    guard_args: list[tuple] = []

    def guard(func: Any, a: Any, b: Any) -> bool:
        guard_args.append((func, a, b))
        return a == 1

    def f(a, b):
        return ("orig", a, b)

    _hook.set_extra(f.__code__, [(guard, make_hit_code(), [None, None, None], None)])
    rec = Recorder({"f"})
    assert _hook.call_with_callback(rec, f, 1, 2) == ("hit", 1, 2)
    assert rec.calls == []
    assert guard_args == [(f, 1, 2)]
    assert _hook.call_with_callback(rec, f, 5, 2) == ("orig", 5, 2)
    assert rec.calls == [("f", (5, 2))]
    assert _hook.get_stats() == {"hits": 1, "misses": 1, "guard_errors": 0}


def test_entries_are_tried_in_order_and_guard_errors_are_misses() -> None:
    def f(x):
        return ("orig", x)

    def broken(func: Any, x: Any) -> bool:
        raise RuntimeError("guard bug")

    one = replacement("def one(x):\n    return ('one', x)\n", "one")
    two = replacement("def two(x):\n    return ('two', x)\n", "two")
    _hook.set_extra(f.__code__, [
        (broken, one, [None] * 3, None),
        (lambda func, x: x > 10, one, [None] * 3, None),
        (lambda func, x: x > 0, two, [None] * 3, None),
    ])
    rec = Recorder({"f"})
    assert _hook.call_with_callback(rec, f, 20) == ("one", 20)
    assert _hook.call_with_callback(rec, f, 5) == ("two", 5)
    assert _hook.call_with_callback(rec, f, -1) == ("orig", -1)
    assert rec.calls == [("f", (-1,))]
    assert _hook.get_stats() == {"hits": 2, "misses": 1, "guard_errors": 3}


def test_memo_is_reused_and_rebuilt_for_another_closure() -> None:
    def make_adder(n: int) -> Callable:
        def add(x):
            return x + n
        return add

    add1, add2 = make_adder(1), make_adder(2)
    code = replacement(
        "def outer():\n    n = 0\n    def add(x):\n        return ('R', x + n)\n    return add\n", "add")
    memo = [None, None, None]
    _hook.set_extra(add1.__code__, [(lambda func, x: True, code, memo, None)])
    assert _hook.call_with_callback(False, add1, 10) == ("R", 11)
    first = memo[2]
    assert memo[0] is add1.__closure__ and memo[1] is add1.__globals__
    assert first.__code__ is code and first.__closure__ is add1.__closure__
    assert _hook.call_with_callback(False, add1, 20) == ("R", 21)
    assert memo[2] is first
    assert _hook.call_with_callback(False, add2, 10) == ("R", 12)
    assert memo[0] is add2.__closure__ and memo[2] is not first


def test_closure_mismatch_raises() -> None:
    def f(x):
        return x

    code = replacement("def outer():\n    n = 0\n    def g(x):\n        return x + n\n    return g\n", "g")
    _hook.set_extra(f.__code__, [(lambda func, x: True, code, [None] * 3, None)])
    with pytest.raises(ValueError, match="free vars"):
        _hook.call_with_callback(False, f, 1)


def test_malformed_entry_raises() -> None:
    def f(x):
        return x

    _hook.set_extra(f.__code__, [("not", "an entry")])
    with pytest.raises(TypeError, match="cache entry"):
        _hook.call_with_callback(False, f, 1)
    _hook.set_extra(f.__code__, [(lambda func, x: True, make_hit_code(), [None])])
    with pytest.raises(TypeError, match="memo"):
        _hook.call_with_callback(False, f, 1)


def test_skip_never_reaches_callback() -> None:
    def f(x):
        return x * 2

    _hook.set_extra(f.__code__, SKIP)
    rec = Recorder({"f"})
    assert _hook.call_with_callback(rec, f, 4) == 8
    assert rec.calls == []
    assert _hook.get_stats()["misses"] == 0


def test_extra_round_trip_and_validation() -> None:
    def f():
        pass

    assert _hook.get_extra(f.__code__) is None
    cache: list = []
    _hook.set_extra(f.__code__, cache)
    assert _hook.get_extra(f.__code__) is cache
    _hook.set_extra(f.__code__, SKIP)
    assert _hook.get_extra(f.__code__) is SKIP
    _hook.set_extra(f.__code__, None)
    assert _hook.get_extra(f.__code__) is None
    with pytest.raises(TypeError):
        _hook.set_extra(f.__code__, (1, 2))
    with pytest.raises(TypeError):
        _hook.get_extra(f)
    assert repr(SKIP) == "<framejit SKIP>"
    with pytest.raises(TypeError):
        type(SKIP)()


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

    always = [(lambda func, *a: True, make_hit_code(), [None] * 3, None)]
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

    rec = Recorder({"gen", "coro", "agen"}, lambda func, args: pytest.fail("hooked"))
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
    other = Recorder(set())

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


def test_run_only_mode_uses_cache_but_never_calls_on_miss() -> None:
    def f(a, b):
        return ("orig", a, b)

    calls: list[Any] = []

    def guard(func: Any, a: Any, b: Any) -> bool:
        calls.append(a)
        return a == 1

    _hook.set_extra(f.__code__, [(guard, make_hit_code(), [None] * 3, None)])
    assert _hook.call_with_callback(False, f, 1, 2) == ("hit", 1, 2)
    assert _hook.call_with_callback(False, f, 3, 2) == ("orig", 3, 2)
    assert calls == [1, 3]
    assert _hook.get_stats() == {"hits": 1, "misses": 1, "guard_errors": 0}


def test_exceptions_propagate() -> None:
    def f(x):
        return x

    boom = replacement("def boom(x):\n    raise KeyError(x)\n", "boom")
    _hook.set_extra(f.__code__, [(lambda func, x: x == 1, boom, [None] * 3, None)])
    with pytest.raises(KeyError) as info:
        _hook.call_with_callback(False, f, 1)
    assert info.value.args == (1,)
    assert any(tb.name == "boom" for tb in info.traceback)

    def g(x):
        raise IndexError(x)

    with pytest.raises(IndexError):
        _hook.call_with_callback(Recorder({"g"}), g, 2)

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
    _hook.set_extra(ns["rec"].__code__, [(lambda func, n: n % 2 == 0, code, [None] * 3, None)])
    misses: list[int] = []
    assert _hook.call_with_callback(lambda func, args: misses.append(args[0]), ns["rec"], 200) == 200
    assert misses == list(range(199, 0, -2))
    assert _hook.get_stats()["hits"] == 101


def test_callback_is_per_thread() -> None:
    def f(x):
        return x

    rec = Recorder({"f"})
    _hook.set_callback(rec)
    try:
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append((f(7), _hook.get_callback())))
        t.start()
        t.join()
    finally:
        _hook.set_callback(None)
    assert out == [(7, None)]
    assert rec.calls == []


def test_four_threads_each_with_their_own_callback() -> None:
    def f(x):
        return x

    n_calls = 300
    barrier = threading.Barrier(4)
    seen: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        mine: list[int] = []
        seen[k] = mine

        def cb(func: types.FunctionType, args: tuple) -> None:
            if func is f:
                mine.append(args[0])

        def loop() -> None:
            barrier.wait()
            for i in range(n_calls):
                assert f(k * 1000 + i) == k * 1000 + i

        try:
            _hook.call_with_callback(cb, loop)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    for k in range(4):
        assert seen[k] == [k * 1000 + i for i in range(n_calls)]


def test_thread_exit_releases_its_callback() -> None:
    class Callback:
        def __call__(self, func: Any, args: tuple) -> None:
            return None

    cb = Callback()
    ref = weakref.ref(cb)
    t = threading.Thread(target=_hook.set_callback, args=(cb,))
    del cb
    t.start()
    t.join()
    del t
    gc.collect()
    assert ref() is None


def test_deleting_function_frees_its_cache_list() -> None:
    ns: dict = {}
    exec("def f(x):\n    return ('orig', x)\n", ns)
    f = ns.pop("f")

    class Token:
        pass

    def make_guard(token: Token) -> Callable:
        return lambda func, x: token is not None

    token = Token()
    ref = weakref.ref(token)
    _hook.set_extra(f.__code__, [(make_guard(token), make_hit_code(1), [None] * 3, None)])
    del token
    assert _hook.call_with_callback(False, f, 1) == ("hit", 1)
    assert ref() is not None
    del f
    gc.collect()
    assert ref() is None


def test_set_extra_replacing_a_list_frees_it() -> None:
    def f(x):
        return x

    class Token:
        pass

    token = Token()
    ref = weakref.ref(token)
    _hook.set_extra(f.__code__, [(lambda func, x, t=token: True, make_hit_code(1), [None] * 3, None)])
    del token
    _hook.set_extra(f.__code__, None)
    gc.collect()
    assert ref() is None


def test_guard_that_drops_the_cache_list_is_safe() -> None:
    def f(x):
        return ("orig", x)

    class Cache(list):
        """A list that can be weakly referenced."""

    def dropping_guard(func: Any, x: Any) -> bool:
        _hook.set_extra(f.__code__, None)  # frees the list being iterated, once C lets go
        return False

    def clearing_guard(func: Any, x: Any) -> bool:
        cache.clear()
        return True

    dropped = Cache([(dropping_guard, make_hit_code(1), [None] * 3, None)] * 2)
    ref = weakref.ref(dropped)
    _hook.set_extra(f.__code__, dropped)
    del dropped
    assert _hook.call_with_callback(False, f, 1) == ("orig", 1)
    assert ref() is None and _hook.get_extra(f.__code__) is None
    cache = [(clearing_guard, make_hit_code(1), [None] * 3, None)] * 3
    _hook.set_extra(f.__code__, cache)
    assert _hook.call_with_callback(False, f, 2) == ("hit", 2)
    assert _hook.call_with_callback(False, f, 3) == ("orig", 3)


def test_call_with_callback_restores_previous_even_on_exception() -> None:
    outer = Recorder(set())
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

    compiled = torch.compile(fn, backend="eager")
    x = torch.randn(8)
    try:
        _hook.set_callback(cb)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), torch.sin(x) + 2 * x)
        assert _hook.is_installed()
        # Outside torch's region our callback sees frames again.
        rec = Recorder({"inner"})
        _hook.set_callback(rec)
        inner(x)
        assert len(rec.calls) == 1
    finally:
        _hook.set_callback(None)


def test_entries_of_another_callback_are_skipped_but_run_only_mode_uses_them() -> None:
    def f(x):
        return ("orig", x)

    calls = []

    def mine(func, args):
        calls.append(args)
        return None

    def other(func, args):
        return None

    _hook.set_extra(f.__code__, [(lambda func, x: True, make_hit_code(1), [None] * 3, other)])
    try:
        assert _hook.call_with_callback(mine, f, 1) == ("orig", 1)  # not mine: a miss, callback asked
        assert calls == [(1,)]
        assert _hook.call_with_callback(other, f, 2) != ("orig", 2)  # its owner hits
        assert _hook.call_with_callback(False, f, 3) != ("orig", 3)  # run-only: any owner
    finally:
        _hook.set_extra(f.__code__, None)
