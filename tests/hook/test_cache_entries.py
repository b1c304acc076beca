"""The frame hook's cache entries on code objects: guards tried in order, replacements run on a
hit, memos, SKIP, the extra slot, run-only mode and entries owned by another callback."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from framejit._C import _hook

from tests.helpers import CallbackRecorder
from tests.hook.harness import SKIP, make_hit_code, replacement


def test_cache_hit_skips_callback_and_miss_calls_it() -> None:
    guard_args: list[tuple] = []

    def guard(func: Any, a: Any, b: Any) -> bool:
        guard_args.append((func, a, b))
        return a == 1

    def f(a, b):
        return ("orig", a, b)

    _hook.set_extra(f.__code__, [(guard, make_hit_code(), [None, None, None], None, False)])
    rec = CallbackRecorder({"f"})
    assert _hook.call_with_callback(rec, f, 1, 2) == ("hit", 1, 2)
    assert rec.calls == []
    assert guard_args == [(f, 1, 2)]
    assert _hook.call_with_callback(rec, f, 5, 2) == ("orig", 5, 2)
    assert rec.calls == [("f", (5, 2))]
    assert _hook.get_stats() == {"hits": 1, "graph_hits": 0, "misses": 1, "guard_errors": 0}


def test_entries_are_tried_in_order_and_guard_errors_are_misses() -> None:
    def f(x):
        return ("orig", x)

    def broken(func: Any, x: Any) -> bool:
        raise RuntimeError("guard bug")

    one = replacement("def one(x):\n    return ('one', x)\n", "one")
    two = replacement("def two(x):\n    return ('two', x)\n", "two")
    _hook.set_extra(
        f.__code__,
        [
            (broken, one, [None] * 3, None, False),
            (lambda func, x: x > 10, one, [None] * 3, None, False),
            (lambda func, x: x > 0, two, [None] * 3, None, False),
        ],
    )
    rec = CallbackRecorder({"f"})
    assert _hook.call_with_callback(rec, f, 20) == ("one", 20)
    assert _hook.call_with_callback(rec, f, 5) == ("two", 5)
    assert _hook.call_with_callback(rec, f, -1) == ("orig", -1)
    assert rec.calls == [("f", (-1,))]
    assert _hook.get_stats() == {"hits": 2, "graph_hits": 0, "misses": 1, "guard_errors": 3}


def _module_level(x):
    return x


def test_memo_is_reused_for_a_function_of_a_module() -> None:
    code = replacement("def r(x):\n    return ('R', x)\n", "r")
    memo = [None, None, None]
    _hook.set_extra(_module_level.__code__, [(lambda func, x: True, code, memo, None, False)])
    try:
        assert _hook.call_with_callback(False, _module_level, 10) == ("R", 10)
        first = memo[2]
        assert memo[0] is None and memo[1] is _module_level.__globals__
        assert first.__code__ is code and first.__globals__ is _module_level.__globals__
        assert _hook.call_with_callback(False, _module_level, 20) == ("R", 20)
        assert memo[2] is first
    finally:
        _hook.set_extra(_module_level.__code__, None)


def test_memo_never_holds_a_closure_or_globals_that_are_not_a_module() -> None:
    """The memo sits in co_extra, out of the garbage collector's sight: a closure's cells or exec'd globals
    held there (both can refer back to the function, so to the code) would never be freed."""

    def make_adder(n: int) -> Callable:
        def add(x):
            return x + n

        return add

    add1, add2 = make_adder(1), make_adder(2)
    code = replacement("def outer():\n    n = 0\n    def add(x):\n        return ('R', x + n)\n    return add\n", "add")
    memo = [None, None, None]
    _hook.set_extra(add1.__code__, [(lambda func, x: True, code, memo, None, False)])
    assert _hook.call_with_callback(False, add1, 10) == ("R", 11)
    assert _hook.call_with_callback(False, add2, 10) == ("R", 12)
    assert memo == [None, None, None]

    namespace: dict = {}
    exec("def f(x):\n    return x\n", namespace)
    plain = replacement("def r(x):\n    return ('R', x)\n", "r")
    _hook.set_extra(namespace["f"].__code__, [(lambda func, x: True, plain, memo, None, False)])
    assert _hook.call_with_callback(False, namespace["f"], 3) == ("R", 3)
    assert memo == [None, None, None]


def test_closure_mismatch_raises() -> None:
    def f(x):
        return x

    code = replacement("def outer():\n    n = 0\n    def g(x):\n        return x + n\n    return g\n", "g")
    _hook.set_extra(f.__code__, [(lambda func, x: True, code, [None] * 3, None, False)])
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
    rec = CallbackRecorder({"f"})
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


def test_run_only_mode_uses_cache_but_never_calls_on_miss() -> None:
    def f(a, b):
        return ("orig", a, b)

    calls: list[Any] = []

    def guard(func: Any, a: Any, b: Any) -> bool:
        calls.append(a)
        return a == 1

    _hook.set_extra(f.__code__, [(guard, make_hit_code(), [None] * 3, None, False)])
    assert _hook.call_with_callback(False, f, 1, 2) == ("hit", 1, 2)
    assert _hook.call_with_callback(False, f, 3, 2) == ("orig", 3, 2)
    assert calls == [1, 3]
    assert _hook.get_stats() == {"hits": 1, "graph_hits": 0, "misses": 1, "guard_errors": 0}


def test_entries_of_another_callback_are_skipped_but_run_only_mode_uses_them() -> None:
    def f(x):
        return ("orig", x)

    calls = []

    def mine(func, args):
        calls.append(args)
        return None

    def other(func, args):
        return None

    _hook.set_extra(f.__code__, [(lambda func, x: True, make_hit_code(1), [None] * 3, other, False)])
    try:
        assert _hook.call_with_callback(mine, f, 1) == ("orig", 1)  # not mine: a miss, callback asked
        assert calls == [(1,)]
        assert _hook.call_with_callback(other, f, 2) != ("orig", 2)  # its owner hits
        assert _hook.call_with_callback(False, f, 3) != ("orig", 3)  # run-only: any owner
    finally:
        _hook.set_extra(f.__code__, None)
