"""Tests for framejit.codeobj: round trips over a corpus, building functions, reading, listing, liveness."""
from __future__ import annotations

import asyncio
import copy
import dis
import inspect
import sys
import types
from typing import Any, Callable, Iterator

import pytest
from bytecode import CellVar, FreeVar, Instr, Label

from framejit.codeobj import (
    ExceptionEntry,
    Inst,
    arg_slot_names,
    build_function_code,
    exception_table,
    format_code,
    live_locals_at,
    live_locals_table,
    offset_to_index,
    read_instructions,
    roundtrip,
)

# ---------------------------------------------------------------- corpus


class Recorder:
    """A context manager that logs enter/exit and swallows KeyError."""

    def __init__(self, log: list) -> None:
        self.log = log

    def __enter__(self) -> Recorder:
        self.log.append("enter")
        return self

    def __exit__(self, typ: Any, val: Any, tb: Any) -> bool:
        self.log.append(("exit", typ.__name__ if typ else None))
        return typ is KeyError


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
    with Recorder(log) as r:
        log.append(r is not None)
        {1: "a"}[key]
        log.append("body done")
    log.append("after")
    return log


def nested_with(key: Any) -> list:
    log: list = []
    with Recorder(log), Recorder(log):
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
    lines += [f"        if i == {k}:\n            total += {k} * x\n        else:\n            total -= 1" for k in range(60)]
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


def deep_roundtrip(code: types.CodeType) -> types.CodeType:
    """Round trip `code` and every code object nested in its constants."""
    consts = tuple(deep_roundtrip(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return roundtrip(code.replace(co_consts=consts))


def rebuild(fn: Callable, code: types.CodeType) -> Callable:
    """A function like `fn` running `code`, with its own copies of `fn`'s closure cells."""
    closure = None if fn.__closure__ is None else tuple(types.CellType(c.cell_contents) for c in fn.__closure__)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


def merged_lines(code: types.CodeType) -> list[tuple[int, int, int | None]]:
    """co_lines with adjacent ranges of one line merged (the line table may split them differently)."""
    out: list[tuple[int, int, int | None]] = []
    for start, end, line in code.co_lines():
        if out and out[-1][2] == line and out[-1][1] == start:
            out[-1] = (out[-1][0], end, line)
        else:
            out.append((start, end, line))
    return out


def _code_key(code: types.CodeType) -> tuple:
    return (code.co_qualname, code.co_firstlineno, next(code.co_positions()))


def _norm(value: object) -> object:
    """A comparable stand-in for an instruction argument (nested code objects by identity of source)."""
    return ("code",) + _code_key(value) if isinstance(value, types.CodeType) else (type(value), value)


def assert_same_code(a: types.CodeType, b: types.CodeType) -> None:
    """Equal but for co_consts: bytecode numbers constants by first use and drops unused ones
    (CPython keeps the parts of folded constants, e.g. the names of an annotations tuple)."""
    for attr in (
        "co_exceptiontable", "co_varnames", "co_cellvars", "co_freevars", "co_names",
        "co_flags", "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals",
        "co_stacksize", "co_name", "co_qualname", "co_filename", "co_firstlineno",
    ):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert len(a.co_code) == len(b.co_code)
    steps_a = [(i.opname, i.offset, _norm(i.argval)) for i in dis.get_instructions(a, show_caches=True)]
    steps_b = [(i.opname, i.offset, _norm(i.argval)) for i in dis.get_instructions(b, show_caches=True)]
    assert steps_a == steps_b
    assert list(a.co_positions()) == list(b.co_positions())
    assert merged_lines(a) == merged_lines(b)
    assert {repr(_norm(c)) for c in b.co_consts} <= {repr(_norm(c)) for c in a.co_consts}
    assert [_norm(c) for c in a.co_consts[:1]] == [_norm(c) for c in b.co_consts[:1]]  # the docstring slot
    nested_a = sorted((c for c in a.co_consts if isinstance(c, types.CodeType)), key=_code_key)
    nested_b = sorted((c for c in b.co_consts if isinstance(c, types.CodeType)), key=_code_key)
    for ca, cb in zip(nested_a, nested_b, strict=True):
        assert_same_code(ca, cb)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_roundtrip_keeps_code(fn: Callable, calls: list) -> None:
    assert_same_code(fn.__code__, roundtrip(fn.__code__))
    assert_same_code(fn.__code__, deep_roundtrip(fn.__code__))


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_roundtrip_behaves_the_same(fn: Callable, calls: list) -> None:
    global COUNTER
    for code in (roundtrip(fn.__code__), deep_roundtrip(fn.__code__)):
        new = rebuild(fn, code)
        for call in calls:
            COUNTER = 0
            expected = outcome(fn, call)
            COUNTER = 0
            assert outcome(new, call) == expected, call


def test_corpus_is_broad() -> None:
    assert len(CORPUS) >= 25
    opnames = set()
    for fn, _ in CORPUS:
        stack = [fn.__code__]
        while stack:
            code = stack.pop()
            opnames |= {inst.opname for inst in read_instructions(code)}
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    for needed in ("FOR_ITER", "SEND", "PUSH_EXC_INFO", "BEFORE_WITH", "MAKE_CELL", "COPY_FREE_VARS",
                   "MATCH_SEQUENCE", "PREP_RERAISE_STAR", "EXTENDED_ARG", "RETURN_GENERATOR",
                   "JUMP_IF_FALSE_OR_POP", "LOAD_CLASSDEREF", "FORMAT_VALUE"):
        assert needed in opnames, needed


def test_roundtrip_catches_in_the_right_handler() -> None:
    new = rebuild(nested_try, roundtrip(nested_try.__code__))
    assert new("key") == "outer-key finally-ran"  # raised in the inner try, caught by the outer one
    assert new("value") == "inner-key 'missing'"  # caught inside the inner handler
    assert new("x") == "inner-key 'missing'"
    assert new("12") == 12
    assert rebuild(raise_from, roundtrip(raise_from.__code__))(0) == "wrapped <- ZeroDivisionError"
    with_new = rebuild(with_block, roundtrip(with_block.__code__))
    assert with_new(2) == ["enter", True, ("exit", "KeyError"), "after"]  # __exit__ swallowed it
    with pytest.raises(TypeError):
        with_new([])  # __exit__ lets it through
    assert exception_table(new.__code__) == exception_table(nested_try.__code__)


def test_roundtrip_keeps_unmergeable_constants_by_identity() -> None:
    a, b = [1], [1]
    body = [Instr("LOAD_CONST", a), Instr("LOAD_CONST", b), Instr("BUILD_TUPLE", 2), Instr("RETURN_VALUE")]
    code = roundtrip(build_function_code(fib.__code__, body, argnames=()))
    got = types.FunctionType(code, {})()
    assert got[0] is a and got[1] is b


# ---------------------------------------------------------------- build_function_code


def make(template: Callable, body: list, **kw: Any) -> Callable:
    code = build_function_code(template.__code__, body, **kw)
    return types.FunctionType(code, template.__globals__, code.co_name, None, template.__closure__)


def test_arg_slot_names() -> None:
    assert arg_slot_names(varargs.__code__) == ("a", "args", "kwargs")
    assert arg_slot_names(kwonly.__code__) == ("a", "b", "c")
    assert arg_slot_names(posonly.__code__) == ("a", "b", "c", "d")
    assert arg_slot_names(closure_over_arg.__code__) == ("a", "b")
    assert arg_slot_names(make_counter(0).__code__) == ("step",)


def test_build_returns_argument() -> None:
    f = make(kwonly, [Instr("LOAD_FAST", "b"), Instr("RETURN_VALUE")], name="__resume_at_0_0")
    code = f.__code__
    assert f(1, 2, 3) == 2
    assert code.co_argcount == 3 and code.co_kwonlyargcount == 0 and code.co_posonlyargcount == 0
    assert code.co_varnames[:3] == ("a", "b", "c")
    assert code.co_name == "__resume_at_0_0" and code.co_qualname == kwonly.__code__.co_qualname
    assert code.co_filename == kwonly.__code__.co_filename
    assert code.co_firstlineno == kwonly.__code__.co_firstlineno
    assert {line for _, _, line in code.co_lines()} == {kwonly.__code__.co_firstlineno}
    assert code.co_flags & (inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS) == inspect.CO_OPTIMIZED | inspect.CO_NEWLOCALS


def test_build_calls_any_object_as_constant() -> None:
    class Compiled:
        def __call__(self, x: int, y: int, k: int = 0) -> tuple:
            return (x, y, k)

        def __eq__(self, other: object) -> bool:
            return True  # equality must not merge constants

        __hash__ = object.__hash__

    fn0, fn1 = Compiled(), Compiled()
    body = [
        Instr("PUSH_NULL"), Instr("LOAD_CONST", fn0), Instr("LOAD_FAST", "a"), Instr("LOAD_FAST", "b"),
        Instr("PRECALL", 2), Instr("CALL", 2), Instr("STORE_FAST", "tmp"),
        Instr("PUSH_NULL"), Instr("LOAD_CONST", fn1), Instr("LOAD_FAST", "tmp"), Instr("LOAD_CONST", 1),
        Instr("LOAD_CONST", 7), Instr("KW_NAMES", ("k",)), Instr("PRECALL", 3), Instr("CALL", 3),
        Instr("LOAD_GLOBAL", (True, "len")), Instr("LOAD_FAST", "tmp"), Instr("PRECALL", 1), Instr("CALL", 1),
        Instr("BUILD_TUPLE", 2), Instr("RETURN_VALUE"),
    ]
    f = make(posonly, body, argnames=("a", "b"), extra_varnames=("tmp",))
    assert f(1, 2) == (((1, 2, 0), 1, 7), 3)
    consts = [c for c in f.__code__.co_consts if isinstance(c, Compiled)]
    assert consts[0] is fn0 and consts[1] is fn1
    assert "tmp" in f.__code__.co_varnames


def test_build_reads_free_variable() -> None:
    counter = make_counter(5)
    body = [Instr("LOAD_DEREF", FreeVar("count")), Instr("LOAD_FAST", "step"), Instr("BINARY_OP", 0),
            Instr("RETURN_VALUE")]
    f = make(counter, body)
    assert f.__code__.co_freevars == ("count",)
    assert f(1) == 6
    counter(10)
    assert f(1) == 16  # the same cell as the template's closure
    # a CellVar given for a free variable is corrected from the template
    g = make(counter, [Instr("LOAD_DEREF", CellVar("count")), Instr("RETURN_VALUE")])
    assert g(0) == 15


def test_build_keeps_argument_cells() -> None:
    # closure_over_arg's `a` and `b` are cells that are also arguments
    assert set(closure_over_arg.__code__.co_cellvars) == {"a", "b"}
    body = [
        Instr("LOAD_DEREF", CellVar("a")), Instr("LOAD_DEREF", CellVar("b")), Instr("BINARY_OP", 0),
        Instr("STORE_FAST", "s"),
        # build `lambda: a * 10 + b` over the argument cells, as the template's inner function does
        Instr("LOAD_CLOSURE", CellVar("a")), Instr("LOAD_CLOSURE", CellVar("b")), Instr("BUILD_TUPLE", 2),
        Instr("LOAD_CONST", _inner_code()), Instr("MAKE_FUNCTION", 8), Instr("STORE_FAST", "inner"),
        Instr("PUSH_NULL"), Instr("LOAD_FAST", "inner"), Instr("PRECALL", 0), Instr("CALL", 0),
        Instr("LOAD_FAST", "s"), Instr("BUILD_TUPLE", 2), Instr("RETURN_VALUE"),
    ]
    f = make(closure_over_arg, body)
    assert f(3, 4) == (34, 7)
    assert f.__code__.co_cellvars == closure_over_arg.__code__.co_cellvars


def _inner_code() -> types.CodeType:
    def outer(a: int, b: int) -> Callable[[], int]:
        return lambda: a * 10 + b

    return next(c for c in outer.__code__.co_consts if isinstance(c, types.CodeType))


def test_build_varargs_become_positional() -> None:
    body = [Instr("LOAD_FAST", "a"), Instr("LOAD_FAST", "args"), Instr("LOAD_FAST", "kwargs"),
            Instr("BUILD_TUPLE", 3), Instr("RETURN_VALUE")]
    f = make(varargs, body)
    assert f.__code__.co_argcount == 3
    assert not f.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    assert f(1, (2, 3), {"k": 4}) == (1, (2, 3), {"k": 4})


def test_build_generator_template_is_plain_function() -> None:
    f = make(generator_fn, [Instr("LOAD_FAST", "n"), Instr("RETURN_VALUE")])
    assert not f.__code__.co_flags & inspect.CO_GENERATOR
    assert f(3) == 3


def test_build_with_jumps_labels_and_lines() -> None:
    loop, done = Label(), Label()
    body = [
        Instr("LOAD_CONST", 0, lineno=101), Instr("STORE_FAST", "acc"),
        Instr("LOAD_GLOBAL", (True, "range")), Instr("LOAD_FAST", "n"), Instr("PRECALL", 1), Instr("CALL", 1),
        Instr("GET_ITER"), loop, Instr("FOR_ITER", done), Instr("LOAD_FAST", "acc"), Instr("BINARY_OP", 13),
        Instr("STORE_FAST", "acc"), Instr("JUMP_BACKWARD", loop), done,
        Instr("LOAD_FAST", "acc"), Instr("RETURN_VALUE"),
    ]
    f = make(fib, body, argnames=("n",))
    assert f(5) == 10
    lines = {line for _, _, line in f.__code__.co_lines()}
    assert lines == {fib.__code__.co_firstlineno, 101}


def test_build_rejects_unknown_cell() -> None:
    with pytest.raises(ValueError, match="not a cell or free variable"):
        build_function_code(fib.__code__, [Instr("LOAD_DEREF", CellVar("zz")), Instr("RETURN_VALUE")])


# ---------------------------------------------------------------- reading and listing


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_read_instructions_matches_dis(fn: Callable, calls: list) -> None:
    code = fn.__code__
    insts = read_instructions(code)
    raw = list(dis.get_instructions(code))
    assert [i.offset for i in insts] == [r.offset for r in raw]
    assert all(i.opname != "CACHE" for i in insts)
    index = offset_to_index(insts)
    line = code.co_firstlineno
    for inst, r in zip(insts, raw):
        assert (inst.opname, inst.opcode, inst.arg, inst.starts_line) == (r.opname, r.opcode, r.arg, r.starts_line)
        line = r.starts_line if r.starts_line is not None else line
        assert inst.lineno == line
        if r.opcode in dis.hasjrel or r.opcode in dis.hasjabs:
            assert inst.target_index == index[r.argval]
            assert insts[inst.target_index].is_jump_target
        else:
            assert inst.target_index is None


def test_target_index_by_jump_kind() -> None:
    insts = read_instructions(for_else.__code__)
    by_name = {i.opname: i for i in insts}
    for_iter = by_name["FOR_ITER"]
    back = [i for i in insts if i.opname == "JUMP_BACKWARD"]
    assert back and all(insts[i.target_index] is for_iter for i in back)
    # FOR_ITER exits to the `else` clause: the instruction after the loop's last JUMP_BACKWARD
    assert for_iter.target_index == max(offset_to_index(insts)[b.offset] for b in back) + 1
    cond = by_name["POP_JUMP_FORWARD_IF_FALSE"]
    assert insts[cond.target_index].offset == cond.argval > cond.offset
    gen = read_instructions(generator_fn.__code__)
    sends = [i for i in gen if i.opname == "SEND"]
    assert sends and all(gen[i.target_index].offset == i.argval > i.offset for i in sends)
    walrus = read_instructions(walrus_chain.__code__)
    short = [i for i in walrus if i.opname == "JUMP_IF_FALSE_OR_POP"]
    assert short and all(walrus[i.target_index].offset == i.argval for i in short)


def test_inst_is_frozen_slots() -> None:
    inst = read_instructions(fib.__code__)[0]
    assert isinstance(inst, Inst) and inst.opname == "RESUME"
    with pytest.raises(AttributeError):
        inst.opname = "NOP"  # type: ignore[misc]
    assert not hasattr(inst, "__dict__")


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_exception_table_matches_dis(fn: Callable, calls: list) -> None:
    expected = [ExceptionEntry(start=e.start, end=e.end, target=e.target, depth=e.depth, lasti=e.lasti)
                for e in dis._parse_exception_table(fn.__code__)]
    assert exception_table(fn.__code__) == expected


def test_exception_table_ranges() -> None:
    entries = exception_table(try_except_else_finally.__code__)
    offsets = {i.offset: i for i in read_instructions(try_except_else_finally.__code__)}
    div = next(i for i in offsets.values() if i.opname == "BINARY_OP" and i.argval == 11)
    covering = [e for e in entries if e.covers(div.offset)]
    assert len(covering) == 1 and covering[0].depth == 0 and not covering[0].lasti
    assert offsets[covering[0].target].opname == "PUSH_EXC_INFO"
    assert exception_table(fib.__code__) == []


def test_format_code_names_constants() -> None:
    compiled = lambda x: x  # noqa: E731 - stands in for a compiled graph
    body = [Instr("PUSH_NULL"), Instr("LOAD_CONST", compiled), Instr("LOAD_FAST", "n"),
            Instr("PRECALL", 1), Instr("CALL", 1), Instr("RETURN_VALUE")]
    code = build_function_code(fib.__code__, body)
    text = format_code(code, const_names={id(compiled): "__compiled_fn_0"})
    lines = text.splitlines()
    assert len(lines) == len(read_instructions(code))
    assert "CACHE" not in text and "<lambda>" not in text
    call = next(line for line in lines if "LOAD_CONST" in line)
    assert call.rstrip().endswith("(__compiled_fn_0)")
    assert str(fib.__code__.co_firstlineno) in lines[0] and "RESUME" in lines[0]
    assert "(n)" in text
    assert "<lambda>" in format_code(code)


def test_format_code_marks_jump_targets() -> None:
    text = format_code(for_else.__code__)
    insts = read_instructions(for_else.__code__)
    handlers = {e.target for e in exception_table(for_else.__code__)}
    for line, inst in zip(text.splitlines(), insts):
        assert (">>" in line) == (inst.is_jump_target or inst.offset in handlers)
        assert inst.opname in line and str(inst.offset) in line
    assert "(to " in text


def test_format_code_survives_bad_repr() -> None:
    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    code = build_function_code(fib.__code__, [Instr("LOAD_CONST", Bad()), Instr("RETURN_VALUE")])
    assert "Bad instance" in format_code(code)
    assert isinstance(read_instructions(code)[1].argval, Bad)


# ---------------------------------------------------------------- liveness


def _offset(fn: Callable, opname: str, argval: Any = None, nth: int = 0) -> int:
    hits = [i.offset for i in read_instructions(fn.__code__)
            if i.opname == opname and (argval is None or i.argval == argval)]
    return hits[nth]


def live_example(a: int, b: int) -> int:
    x = a + 1
    total = 0
    for i in range(b):
        total += i
    unused = 3
    return total + x + unused


def live_in_handler(a: int) -> int:
    fallback = a * 2
    try:
        r = 10 // a
    except ZeroDivisionError:
        return fallback
    return r


def test_live_written_before_use_is_not_live() -> None:
    code = live_example.__code__
    assert live_locals_at(code, 0) == {"a", "b"}
    start_loop = _offset(live_example, "FOR_ITER")
    live = live_locals_at(code, start_loop)
    assert {"total", "x"} <= live and "i" not in live and "unused" not in live and "a" not in live
    assert live_locals_at(code, _offset(live_example, "STORE_FAST", "unused")) == {"total", "x"}


def test_live_used_after_loop_is_live_inside_loop() -> None:
    body_load = _offset(live_example, "LOAD_FAST", "total")
    assert live_locals_at(live_example.__code__, body_load) == {"x", "total", "i"}
    # `total` is on the stack by the time `i` is loaded, and is written next
    assert live_locals_at(live_example.__code__, _offset(live_example, "LOAD_FAST", "i")) == {"x", "i"}


def test_live_read_in_handler_is_live_in_try() -> None:
    code = live_in_handler.__code__
    div = _offset(live_in_handler, "BINARY_OP", nth=1)
    assert live_locals_at(code, div) == {"fallback"}
    # after the try body the handler can no longer run: only `r` is needed
    ret = _offset(live_in_handler, "LOAD_FAST", "r")
    assert live_locals_at(code, ret) == {"r"}


def test_live_cells_and_free_vars() -> None:
    code = closure_over_arg.__code__
    assert live_locals_at(code, 0) == {"a", "b"}  # MAKE_CELL reads the argument slots
    counter = make_counter(0).__code__
    assert live_locals_at(counter, _offset(make_counter(0), "RESUME")) == {"step", "count"}


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_live_is_sound_on_straight_reads(fn: Callable, calls: list) -> None:
    # every local read by an instruction is live at that instruction
    code = fn.__code__
    table = live_locals_table(code)
    insts = read_instructions(code)
    assert set(table) == {inst.offset for inst in insts}
    for inst in insts:
        if inst.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
            assert inst.argval in table[inst.offset]
    assert live_locals_at(code, insts[-1].offset) == table[insts[-1].offset]
    with pytest.raises(ValueError):
        live_locals_at(code, 1)


def _all_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_codes(const)


@pytest.mark.parametrize("fn,calls", CORPUS, ids=CORPUS_IDS)
def test_live_over_approximates_dynamic_reads(fn: Callable, calls: list) -> None:
    # Run with opcode tracing. On each frame's executed path, a local read after an
    # instruction, with no write to it in between, must be live at that instruction.
    codes = set(_all_codes(fn.__code__))
    paths: dict[types.FrameType, list[int]] = {}

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            if event == "opcode":
                paths.setdefault(frame, []).append(frame.f_lasti)
        return tracer

    for call in calls:
        sys.settrace(tracer)
        try:
            outcome(fn, call)
        finally:
            sys.settrace(None)
    assert paths
    for frame, offsets in paths.items():
        code = frame.f_code
        insts = read_instructions(code)
        index = offset_to_index(insts)
        live_at = live_locals_table(code)
        read_later: set[str] = set()  # read on the rest of this path before any write
        for inst in reversed([insts[index[o]] for o in offsets]):
            if inst.opname == "STORE_FAST":
                read_later.discard(inst.argval)
            if inst.opname in ("LOAD_FAST", "LOAD_DEREF"):
                read_later.add(inst.argval)
            assert read_later <= live_at[inst.offset], (code.co_qualname, inst.offset)
