"""The frame hook across threads (a callback per thread) and the lifetime of what it holds:
callbacks, cache lists and the guards in them are freed."""

from __future__ import annotations

import gc
import sys
import threading
import types
import weakref
from typing import Any, Callable

from framejit._C import _hook

from tests.helpers import CallbackRecorder
from tests.hook.harness import make_hit_code


def test_callback_is_per_thread() -> None:
    def f(x):
        return x

    rec = CallbackRecorder({"f"})
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
    _hook.set_extra(f.__code__, [(make_guard(token), make_hit_code(1), [None] * 3, None, False)])
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
    _hook.set_extra(f.__code__, [(lambda func, x, t=token: True, make_hit_code(1), [None] * 3, None, False)])
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

    dropped = Cache([(dropping_guard, make_hit_code(1), [None] * 3, None, False)] * 2)
    ref = weakref.ref(dropped)
    _hook.set_extra(f.__code__, dropped)
    del dropped
    assert _hook.call_with_callback(False, f, 1) == ("orig", 1)
    assert ref() is None and _hook.get_extra(f.__code__) is None
    cache = [(clearing_guard, make_hit_code(1), [None] * 3, None, False)] * 3
    _hook.set_extra(f.__code__, cache)
    assert _hook.call_with_callback(False, f, 2) == ("hit", 2)
    assert _hook.call_with_callback(False, f, 3) == ("orig", 3)


def test_hook_stays_installed_while_another_thread_has_a_callback() -> None:
    armed, done = threading.Event(), threading.Event()

    def other() -> None:
        _hook.set_callback(False)
        armed.set()
        done.wait(10)
        _hook.set_callback(None)

    t = threading.Thread(target=other)
    t.start()
    try:
        assert armed.wait(10)
        assert _hook.call_with_callback(None, _hook.is_installed) is True  # the other thread's callback needs it
    finally:
        done.set()
        t.join(10)
    assert not _hook.is_installed()


def test_thread_ending_with_its_callback_set_takes_the_hook_off() -> None:
    t = threading.Thread(target=lambda: _hook.set_callback(False))
    t.start()
    t.join(10)
    gc.collect()
    assert not _hook.is_installed()
