"""Code that counts or refuses attribute reads, and exceptions raised by traced code, behave as in eager:
the same count, the same exception (type and message), the same fallback."""

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same


class CountingReads:
    """A __getattribute__ with a side effect: every read is counted."""

    def __init__(self, t):
        object.__setattr__(self, "reads", 0)
        object.__setattr__(self, "t", t)

    def __getattribute__(self, name):
        if name != "reads":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)


class RefusingReads:
    """A __getattribute__ that raises for names starting with 'secret' (KeyError for 'key_*')."""

    def __init__(self, t):
        self.t = t

    def __getattribute__(self, name):
        if name.startswith("secret"):
            raise AttributeError(name)
        if name.startswith("key_"):
            raise KeyError(name)
        return object.__getattribute__(self, name)


def _compiled(fn):
    return framejit.optimize(CompileCounter())(fn)


def test_counting_getattribute_counts_as_in_eager():
    def fn(obj, x):
        return x + obj.t * 2 + obj.t

    x = torch.randn(3)
    eager_obj, comp_obj = CountingReads(torch.ones(3)), CountingReads(torch.ones(3))
    want = fn(eager_obj, x)
    compiled = _compiled(fn)
    for _ in range(3):
        got = compiled(comp_obj, x)
        assert same(got, want)
    fn(eager_obj, x), fn(eager_obj, x)
    assert object.__getattribute__(comp_obj, "reads") == object.__getattribute__(eager_obj, "reads")


def test_getattribute_raising_attribute_error_falls_back_to_getattr_default():
    def fn(obj, x):
        return x + getattr(obj, "secret", 1) + obj.t

    obj, x = RefusingReads(torch.ones(3)), torch.randn(3)
    assert same(_compiled(fn)(obj, x), fn(obj, x))


def test_getattribute_raising_attribute_error_propagates():
    def fn(obj, x):
        return x + obj.secret_value

    obj, x = RefusingReads(torch.ones(3)), torch.randn(3)
    with pytest.raises(AttributeError, match="secret_value"):
        _compiled(fn)(obj, x)


def test_getattribute_raising_key_error_propagates():
    def fn(obj, x):
        return x + obj.key_a

    obj, x = RefusingReads(torch.ones(3)), torch.randn(3)
    with pytest.raises(KeyError, match="key_a"):
        _compiled(fn)(obj, x)


def test_hasattr_on_refusing_getattribute():
    def fn(obj, x):
        return x + 1 if hasattr(obj, "secret") else x - 1

    obj, x = RefusingReads(torch.ones(3)), torch.randn(3)
    assert same(_compiled(fn)(obj, x), fn(obj, x))


def test_raise_on_a_constant_path_propagates_with_its_message():
    def fn(x, mode):
        y = x + 1
        if mode == "bad":
            raise ValueError(f"unknown mode {mode}")
        return y * 2

    compiled = _compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x, "good"), fn(x, "good"))
    with pytest.raises(ValueError, match="unknown mode bad"):
        compiled(x, "bad")


def test_raise_inside_an_inlined_function_propagates():
    def check(n):
        if n > 2:
            raise IndexError("too many")
        return n

    def fn(x, n):
        return x * check(n)

    compiled = _compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x, 2), fn(x, 2))
    with pytest.raises(IndexError, match="too many"):
        compiled(x, 3)


def test_exception_caught_in_user_code_gives_eager_result():
    def fn(x, d):
        try:
            v = d["missing"]
        except KeyError:
            v = 5
        return x + v

    x = torch.randn(3)
    assert same(_compiled(fn)(x, {"a": 1}), fn(x, {"a": 1}))


class DictBacked:
    """A __getattr__ that reads a dict: a missing name is a KeyError, which hasattr and getattr's default do not
    catch."""

    def __init__(self, **kw):
        object.__setattr__(self, "_data", kw)

    def __getattr__(self, name):
        return self._data[name]


class CountingFallback:
    """A __getattr__ that counts the misses it sees and answers names starting with dyn_."""

    def __init__(self, t):
        self.t = t
        self.misses = 0

    def __getattr__(self, name):
        self.misses += 1
        if name.startswith("dyn_"):
            return self.t * 2
        raise AttributeError(name)


def _outcome(fn, *args):
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return type(e), str(e)
    return "ok", result.tolist() if isinstance(result, torch.Tensor) else result


def _read_missing(o, x):
    return x + o.missing


def _hasattr_missing(o, x):
    return x + (1 if hasattr(o, "missing") else 0)


def _getattr_default_missing(o, x):
    return x + getattr(o, "missing", 5)


@pytest.mark.parametrize("fn", [_read_missing, _hasattr_missing, _getattr_default_missing])
def test_key_error_from_getattr_propagates_through_hasattr_and_defaults(fn):
    obj, x = DictBacked(a=torch.ones(2)), torch.ones(2)
    assert _outcome(_compiled(fn), obj, x) == _outcome(fn, obj, x)
    assert _outcome(_compiled(fn), obj, x)[0] is KeyError


def test_counting_getattr_fallback_on_every_call():
    def fn(o, x):
        return x + o.dyn_a + getattr(o, "nope", 1) + int(hasattr(o, "dyn_b"))

    eager_obj, comp_obj, x = CountingFallback(torch.ones(2)), CountingFallback(torch.ones(2)), torch.randn(2)
    compiled = _compiled(fn)
    for _ in range(3):
        assert same(compiled(comp_obj, x), fn(eager_obj, x))
        assert comp_obj.misses == eager_obj.misses


class CustomError(Exception):
    pass


def _missing_key(x):
    return x + {}["k"]


def _index_out_of_range(x, items=(1, 2)):
    return x + list(items)[5]


def _failed_assert(x):
    assert x.shape[0] == 3, "bad shape"
    return x


def _bad_int(x):
    return x + int("abc")


def _zero_division(x, n=0):
    return x + 1 / n


def _custom_error(x):
    y = x * 2
    raise CustomError("custom", y.shape[0])


@pytest.mark.parametrize(
    "fn", [_missing_key, _index_out_of_range, _failed_assert, _bad_int, _zero_division, _custom_error]
)
def test_errors_of_traced_code_propagate_with_type_and_message(fn):
    x = torch.ones(2)
    assert _outcome(_compiled(fn), x) == _outcome(fn, x)
