"""Exceptions raised and caught inside traced code: a missing key, an index out of range or a `raise` in an
inlined function jump to the handler of its try block (or its caller's), and the trace goes on in one graph."""

import collections.abc

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph

TABLE = {"relu": torch.relu, "tanh": torch.tanh}


class Registry(collections.abc.Mapping):
    """A Mapping whose __getitem__ raises KeyError; Mapping.get catches it (try/except in the stdlib mixin)."""

    def __init__(self, table):
        self._table = table

    def __getitem__(self, key):
        return self._table[key]

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)


REGISTRY = Registry(TABLE)


def lookup(name):
    try:
        return TABLE[name]
    except KeyError:
        return torch.sigmoid


def nth(items, i):
    try:
        return items[i]
    except (IndexError, TypeError) as e:
        return type(e).__name__


def checked(x, limit):
    if limit < 0:
        raise ValueError("negative limit")
    return x.clamp(max=limit)


def safe_clamp(x, limit):
    try:
        return checked(x, limit)  # raised one frame below the try
    except ValueError as e:
        return x * len(str(e))
    finally:
        x = x + 0


def uncaught_here(name):
    try:
        return TABLE[name]
    except IndexError:  # does not match: the KeyError goes on to the caller
        return None


def caller(name):
    try:
        return uncaught_here(name)
    except LookupError:
        return torch.neg


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_a_missing_key_caught_in_an_inlined_function(name):
    def fn(x):
        return lookup(name)(x) + 1

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


@pytest.mark.parametrize("name", ["tanh", "gelu"])
def test_mapping_get_catches_the_key_error_of_getitem(name):
    def fn(x):
        return REGISTRY.get(name, torch.exp)(x)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_index_error_and_the_bound_name():
    def fn(x):
        return x * len(nth([1, 2], 5)) + nth([1, 2], 1)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


@pytest.mark.parametrize("limit", [0.5, -1.0])
def test_raise_in_a_callee_caught_by_the_caller_with_finally(limit):
    def fn(x):
        return safe_clamp(x, limit) - 1

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_an_unmatched_handler_passes_the_exception_to_the_caller():
    def fn(x):
        return caller("gelu")(x)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_an_exception_nobody_catches_is_still_a_graph_break():
    def fn(x):
        y = x + 1
        return lookup("relu")(y) + uncaught_here("gelu")(y)  # TypeError calling None... after a KeyError escapes

    cnt = CompileCounter()
    x = torch.randn(4)
    with pytest.raises(KeyError):
        framejit.optimize(cnt)(fn)(x)
    with pytest.raises(framejit.exc.Unsupported, match="KeyError"):
        framejit.optimize(CompileCounter(), nopython=True)(fn)(x)


# -- in the captured frame itself ------------------------------------------------------------


def caught_in_the_frame(x):
    try:
        y = x + 1
        raise ValueError("boom")
    except ValueError as e:
        y = y * len(str(e))
    return y.sin()


def caught_in_a_loop(x):
    total = x
    for i in range(4):
        try:
            if i % 2:
                raise KeyError(i)
            total = total + i
        except KeyError:
            total = total * 2
    return total


def breaks_inside_the_handler(x, log):
    try:
        y = x + 1
        raise ValueError("boom")
    except ValueError as e:
        print("handled", e)  # a break while handling: Python raises it again and runs this handler
        log.append(str(e))
        y = y * 2
    return y + 1


def re_raises_from_the_handler(x):
    try:
        raise ValueError("boom")
    except ValueError:
        x = x + 1
        raise


@pytest.mark.parametrize("fn", [caught_in_the_frame, caught_in_a_loop])
def test_an_exception_raised_and_caught_in_the_captured_frame_is_one_graph(fn):
    counter = CompileCounter()
    compiled = framejit.compile(fn, backend=counter)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert counter.frame_count == 1
    assert framejit.explain(fn)(x).break_reasons == []


def test_a_break_inside_the_handler_of_the_captured_frame_runs_it_as_python(capsys):
    log, expected_log = [], []
    x = torch.randn(3)
    assert same(
        framejit.compile(breaks_inside_the_handler, backend="eager")(x, log), breaks_inside_the_handler(x, expected_log)
    )
    assert log == expected_log == ["boom"]
    assert capsys.readouterr().out == "handled boom\nhandled boom\n"


def test_a_bare_raise_in_the_handler_of_the_captured_frame_raises_as_in_eager():
    with pytest.raises(ValueError, match="boom"):
        framejit.compile(re_raises_from_the_handler, backend="eager")(torch.ones(1))


def re_raises_and_catches(x):
    try:
        raise KeyError("k")
    except KeyError:
        try:
            raise  # the exception being handled
        except KeyError as again:
            return x + len(str(again))


def raises_what_it_was_given(x, error):
    try:
        raise error
    except ValueError as e:
        return x * len(e.args)


@pytest.mark.parametrize(
    ("fn", "args"), [(re_raises_and_catches, ()), (raises_what_it_was_given, (ValueError("a", "b"),))]
)
def test_a_bare_raise_and_a_raise_of_an_argument_are_caught_in_one_graph(fn, args):
    counter = CompileCounter()
    x = torch.randn(3)
    assert same(framejit.compile(fn, backend=counter)(x, *args), fn(x, *args))
    assert counter.frame_count == 1
    assert framejit.explain(fn)(x, *args).break_reasons == []


def raises_a_class(x):
    try:
        x = x.sin()
        raise NotImplementedError  # Python raises NotImplementedError()
    except Exception as e:
        return x.sigmoid(), type(e).__name__, e.args


def raises_a_class_from_a_class(x):
    try:
        try:
            raise KeyError
        except KeyError:
            raise ValueError from IndexError
    except ValueError as e:
        return x + 1, type(e.__cause__).__name__, type(e.__context__).__name__, e.__suppress_context__


def raises_a_class_nobody_catches(x):
    x = x + 1
    raise RuntimeError


@pytest.mark.parametrize("fn", [raises_a_class, raises_a_class_from_a_class])
def test_raising_an_exception_class_instantiates_it_as_python_does(fn):
    x = torch.randn(3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]


def test_an_exception_class_nobody_catches_is_raised_as_in_eager():
    with pytest.raises(RuntimeError):
        framejit.compile(raises_a_class_nobody_catches, backend="eager")(torch.ones(1))
    with pytest.raises(framejit.exc.Unsupported, match="RuntimeError"):
        framejit.compile(raises_a_class_nobody_catches, backend="eager", fullgraph=True)(torch.ones(1))
