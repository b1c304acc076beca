"""The corpus of functions the framejit.codeobj tests round trip, read, list and analyse, with
the calls each is checked on, and `outcome`: what one such call did.

Its asserts are rewritten by pytest as in a test module (see this folder's conftest.py), as they
were when the corpus lived in test_codeobj.py."""

from __future__ import annotations

import asyncio
import copy
import inspect
from typing import Any, Callable, Iterator

from tests.helpers import LoggingContext


def for_else(n: int, stop: int) -> tuple:
    out = []
    for i in range(n):
        if i == stop:
            out.append("break")
            break
        if i % 2:
            continue
        out.append(i)
    else:
        out.append("else")
    return tuple(out)


def while_loop(n: int) -> list:
    out, i = [], 0
    while i < n:
        i += 1
        if i == 3:
            continue
        if i > 7:
            break
        out.append(i * i)
    else:
        out.append(-1)
    return out


def nested_loops(n: int) -> list:
    pairs = []
    for i in range(n):
        for j in range(i):
            if (i + j) % 3 == 0:
                break
            pairs.append((i, j))
        else:
            pairs.append(("full", i))
    return pairs


def try_except_else_finally(x: Any) -> list:
    log = []
    try:
        y = 10 / x
    except ZeroDivisionError as e:
        log.append(("zero", str(e)))
    except TypeError:
        log.append("type")
    else:
        log.append(("ok", y))
    finally:
        log.append("finally")
    return log


def nested_try(x: Any) -> str:
    try:
        try:
            if x == "key":
                raise KeyError(x)
            if x == "value":
                raise ValueError(x)
            return int(x)
        except ValueError:
            try:
                return {}["missing"]
            except KeyError as e:
                return f"inner-key {e}"
        finally:
            x = "finally-ran"
    except KeyError:
        return "outer-key " + x


def finally_overrides(x: int) -> int:
    try:
        if x < 0:
            raise RuntimeError("neg")
        return x
    finally:
        if x == 5:
            return 500  # noqa: B012 - the finally return is what is tested


def with_block(key: Any) -> list:
    log: list = []
    with LoggingContext(log) as r:
        log.append(r is not None)
        {1: "a"}[key]
        log.append("body done")
    log.append("after")
    return log


def nested_with(key: Any) -> list:
    log: list = []
    with LoggingContext(log), LoggingContext(log):
        try:
            if key == "value":
                raise ValueError(key)
            {}[key]
        except ValueError:
            log.append("caught value")
    return log


def make_counter(start: int) -> Callable[[int], int]:
    count = start

    def counter(step: int) -> int:
        nonlocal count
        if step < 0:
            raise ValueError("negative step")
        count += step
        return count

    return counter


def closure_over_arg(a: int, b: int) -> int:
    def add(c: int) -> int:
        return a + b + c

    a = a * 2
    return add(1) + add(2)


def three_levels(x: int) -> list:
    def mid() -> Callable[[], int]:
        y = x + 1

        def inner() -> int:
            nonlocal y
            y += x
            return y

        return inner

    f = mid()
    return [f(), f(), f()]


def comprehensions(n: int) -> tuple:
    squares = [i * i for i in range(n) if i % 2 == 0]
    table = {i: str(i) for i in range(n)}
    mods = {i % 3 for i in range(n)}
    nested = [[j for j in range(i)] for i in range(n)]
    return squares, table, mods, nested


def generator_fn(n: int) -> Iterator[int]:
    try:
        for i in range(n):
            if i == 4:
                raise IndexError("four")
            yield i
        yield from (10, 20)
    finally:
        yield -1


def genexpr(n: int) -> tuple:
    total = sum(x * x for x in range(n))
    firsts = list(x for x in range(n) if x > 2)
    return total, firsts, any(x > 5 for x in range(n))


def varargs(a: int, *args: int, **kwargs: int) -> tuple:
    return a, args, sorted(kwargs.items()), sum(args) + sum(kwargs.values())


def kwonly(a: int, *, b: int, c: int = 3) -> int:
    if b == 0:
        raise ZeroDivisionError("b")
    return a * b + c


def posonly(a: int, b: int = 2, /, c: int = 3, *, d: int = 4) -> tuple:
    return (a, b, c, d)


def defaults(a: int, b: list | None = None, c: str = "x") -> tuple:
    b = [] if b is None else b
    b.append(a)
    return tuple(b), c * a


def lambdas(items: list) -> tuple:
    key = lambda t: (-t[1], t[0])  # noqa: E731 - lambdas are the case under test
    scale = lambda k=2: lambda v: v * k  # noqa: E731
    return sorted(items, key=key), list(map(scale(3), [i for i, _ in items]))


def fstrings(x: Any, y: float) -> str:
    return f"{x!r:>8}|{y:.2f}|{x!s}|{y!a}|{'nested ' + str(x)}|{x=}"


async def async_helper(x: int) -> int:
    await asyncio.sleep(0)
    if x < 0:
        raise ValueError("negative")
    return x * 2


async def async_fn(n: int) -> list:
    out = []
    try:
        for i in range(n):
            out.append(await async_helper(i - 1))
    except ValueError as e:
        out.append(str(e))

    async def agen() -> Any:
        for i in range(3):
            yield i

    out.extend([v async for v in agen()])
    return out


def class_body(v: int) -> tuple:
    class Base:
        def value(self) -> int:
            return v

    class Child(Base):
        scale = v * 2

        def value(self) -> int:
            return super().value() + self.scale

    return Child().value(), Child.__qualname__


def match_stmt(obj: Any) -> str:
    match obj:
        case 0 | 1:
            return "small"
        case [x, y, *rest] if x == y:
            return f"pair-start {rest}"
        case {"kind": "point", "x": x}:
            return f"point {x}"
        case str() as s:
            return "str " + s
        case (a, b):
            return f"two {a} {b}"
        case _:
            return "other"


def except_star(kind: str) -> list:
    log = []
    try:
        if kind == "group":
            raise ExceptionGroup("g", [ValueError(1), TypeError(2)])
        raise KeyError(kind)
    except* ValueError as eg:
        log.append(("value", len(eg.exceptions)))
    except* (TypeError, KeyError) as eg:
        log.append(("other", [type(e).__name__ for e in eg.exceptions]))
    return log


def unpack_and_merge(seq: list, extra: dict) -> tuple:
    first, *middle, last = seq
    merged = {**extra, "first": first, **{"last": last}}
    return middle, sorted(merged.items()), [*seq, *middle]


COUNTER = 0


def global_write(k: int) -> int:
    global COUNTER
    COUNTER += k
    return COUNTER


def walrus_chain(data: list) -> list:
    first = data and data[0]
    out = [first or "empty"]
    it = iter(data)
    while (item := next(it, None)) is not None:
        if 0 < item < 10 and item != 5:
            out.append(item)
        elif item > 100 or item == -1:
            out.append("big-or-neg")
    return out


def raise_from(x: int) -> str:
    try:
        try:
            1 / x
        except ZeroDivisionError as e:
            raise ValueError("wrapped") from e
    except ValueError as e:
        return f"{e} <- {type(e.__cause__).__name__}"
    return "fine"


def asserts_and_del(x: int) -> int:
    y = x + 1
    assert y > 0, "y must be positive"
    if x == 3:
        del y
    return y


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def _make_long_jumps() -> Callable[[int], int]:
    """A function whose jumps need EXTENDED_ARG (its body is more than 256 instructions long)."""
    lines = ["def long_jumps(x):", "    total = 0", "    for i in range(x):"]
    lines += [
        f"        if i == {k}:\n            total += {k} * x\n        else:\n            total -= 1" for k in range(60)
    ]
    lines.append("    return total")
    namespace: dict = {}
    exec(compile("\n".join(lines), __file__, "exec"), namespace)
    return namespace["long_jumps"]


long_jumps = _make_long_jumps()


def args(*a: Any, **kw: Any) -> tuple[tuple, dict]:
    return a, kw


CORPUS: list[tuple[Callable, list[tuple[tuple, dict]]]] = [
    (for_else, [args(5, 3), args(5, 10), args(0, 0)]),
    (while_loop, [args(0), args(5), args(20)]),
    (nested_loops, [args(0), args(6)]),
    (try_except_else_finally, [args(2), args(0), args("s")]),
    (nested_try, [args("7"), args("key"), args("value"), args("x")]),
    (finally_overrides, [args(3), args(5), args(-1)]),
    (with_block, [args(1), args(2), args([])]),
    (nested_with, [args("value"), args("k"), args([])]),
    (make_counter(10), [args(1), args(2), args(-1)]),
    (make_counter, [args(3)]),
    (closure_over_arg, [args(1, 2), args(5, -3)]),
    (three_levels, [args(1), args(4)]),
    (comprehensions, [args(0), args(7)]),
    (generator_fn, [args(2), args(6)]),
    (genexpr, [args(0), args(8)]),
    (varargs, [args(1), args(1, 2, 3), args(1, 2, k=5, j=6), args()]),
    (kwonly, [args(1, b=2), args(1, b=2, c=0), args(1, b=0), args(1)]),
    (posonly, [args(1), args(1, 5, c=6, d=7), args(a=1)]),
    (defaults, [args(2), args(3, [9], "y")]),
    (lambdas, [args([("b", 1), ("a", 1), ("c", 5)])]),
    (fstrings, [args("hi", 2.5), args(42, -1.0), args(None, "not a float")]),
    (async_fn, [args(0), args(3)]),
    (async_helper, [args(2), args(-2)]),
    (class_body, [args(3)]),
    (match_stmt, [args(0), args([2, 2, 3, 4]), args({"kind": "point", "x": 9}), args("s"), args((1, 2)), args(3.5)]),
    (except_star, [args("group"), args("key")]),
    (unpack_and_merge, [args([1, 2, 3, 4], {"z": 0}), args([1], {})]),
    (global_write, [args(2), args(3)]),
    (walrus_chain, [args([1, 5, 200, -1, 7, None, 3]), args([])]),
    (raise_from, [args(0), args(2)]),
    (asserts_and_del, [args(1), args(-5), args(3)]),
    (fib, [args(10)]),
    (long_jumps, [args(0), args(70)]),
]
CORPUS_IDS = [fn.__qualname__ for fn, _ in CORPUS]


def outcome(fn: Callable, call: tuple[tuple, dict]) -> tuple:
    """What calling `fn` did: its (fully consumed) result, or the exception type and message."""
    a, kw = copy.deepcopy(call)  # some calls mutate their arguments
    try:
        result = fn(*a, **kw)
        if inspect.isgenerator(result):
            out = []
            try:
                for item in result:
                    out.append(item)
            except Exception as e:  # noqa: BLE001 - compared with the original's behaviour
                out.append(("raised", type(e), str(e)))
            result = out
        elif inspect.iscoroutine(result):
            result = asyncio.run(result)
        elif callable(result) and not isinstance(result, type):
            result = [result(1), result(2)]
        return ("ok", result)
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e), str(e))
