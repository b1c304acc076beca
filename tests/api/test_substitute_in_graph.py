"""framejit.substitute_in_graph, as torch.compiler.substitute_in_graph: a Python polyfill the trace inlines where code
calls a C function framejit cannot trace; the decorated function still calls the original when run eagerly."""

import bisect

import pytest
import torch

import framejit
from framejit import policy
from framejit.testing import CompileCounter, same


@pytest.fixture(autouse=True)
def _forget_polyfills():
    saved = dict(policy._substitutes)
    yield
    policy._substitutes.clear()
    policy._substitutes.update(saved)


def _bisect_left(a, x, lo=0, hi=None, *, key=None):
    hi = len(a) if hi is None else hi
    while lo < hi:
        mid = (lo + hi) // 2
        if (a[mid] if key is None else key(a[mid])) < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _scale(x, table):
    return x * bisect.bisect_left(table, 3)


def test_without_a_polyfill_the_c_function_breaks_the_graph():
    with pytest.raises(framejit.exc.Unsupported, match="call to bisect_left"):
        framejit.compile(_scale, backend="eager", fullgraph=True)(torch.randn(2), [1, 2, 3])


def test_the_polyfill_is_traced_in_place_of_the_c_function():
    framejit.substitute_in_graph(bisect.bisect_left)(_bisect_left)
    cnt = CompileCounter()
    x = torch.randn(2)
    assert same(framejit.compile(_scale, backend=cnt, fullgraph=True)(x, [1, 2, 3]), x * 2)
    assert cnt.frame_count == 1 and cnt.op_count == 1


def test_the_polyfill_reads_traced_values():
    """A size read in the trace goes through the polyfill (no constant folding: it is off by default)."""
    framejit.substitute_in_graph(bisect.bisect_left)(_bisect_left)

    def fn(x):
        return x + bisect.bisect_left([2, 4, 8], x.size(0))

    cnt = CompileCounter()
    for n in (1, 3, 8):
        x = torch.randn(n)
        assert same(framejit.optimize(cnt, nopython=True)(fn)(x), fn(x))


def test_the_decorated_function_calls_the_original_eagerly_and_the_polyfill_in_traces():
    calls = []

    def polyfill(a, x, lo=0, hi=None, *, key=None):
        calls.append("polyfill")
        return _bisect_left(a, x, lo, hi, key=key)

    substituted = framejit.substitute_in_graph(bisect.bisect_left)(polyfill)
    assert substituted.__name__ == "polyfill" and substituted is not polyfill
    assert substituted([1, 2, 3], 3) == 2
    assert calls == [], "eagerly the original C function runs"

    def fn(x):
        return x * substituted([1, 2, 3], 3)

    x = torch.randn(2)
    cnt = CompileCounter()
    assert same(framejit.optimize(cnt)(fn)(x), x * 2)
    assert cnt.frame_count == 1
    assert calls == ["polyfill"], "the trace inlined the polyfill (its write replayed once)"


def test_constant_folding_calls_the_original_at_trace_time():
    def untraceable(a, x, lo=0, hi=None, *, key=None):
        print("never traced", end="")  # would be a graph break if the trace inlined it
        return _bisect_left(a, x, lo, hi, key=key)

    framejit.substitute_in_graph(bisect.bisect_right, can_constant_fold_through=True, skip_signature_check=True)(
        untraceable
    )

    def fn(x):
        return x * bisect.bisect_right([1, 2, 3], 2)

    x = torch.randn(2)
    cnt = CompileCounter()
    assert same(framejit.optimize(cnt, nopython=True)(fn)(x), x * 2)
    assert cnt.op_count == 1


def test_a_folded_call_that_raises_raises_as_eager_does():
    framejit.substitute_in_graph(bisect.bisect_left, can_constant_fold_through=True)(_bisect_left)

    def fn(x):
        return x * bisect.bisect_left(None, 3)

    with pytest.raises(TypeError):
        fn(torch.randn(2))
    with pytest.raises(TypeError):
        framejit.optimize(CompileCounter())(fn)(torch.randn(2))


def test_signature_mismatch_is_an_error_unless_skipped():
    def wrong(a, y):
        return 0

    with pytest.raises(TypeError, match="Signature mismatch between <built-in function bisect_left> and"):
        framejit.substitute_in_graph(bisect.bisect_left)(wrong)
    framejit.substitute_in_graph(bisect.bisect_left, skip_signature_check=True)(wrong)


def test_misuse_is_an_error():
    with pytest.raises(TypeError, match="expects a function"):
        framejit.substitute_in_graph(int)
    with pytest.raises(TypeError, match="expects a Python function"):
        framejit.substitute_in_graph(bisect.bisect_left)(bisect.bisect_right)
    framejit.substitute_in_graph(bisect.bisect_left)(_bisect_left)
    with pytest.raises(ValueError, match="already has a polyfill: _bisect_left"):
        framejit.substitute_in_graph(bisect.bisect_left)(_bisect_left)
