"""A dict changed during iteration behaves as in eager (torch.compile gets the same-size cases
wrong). A changed size raises at once; as many keys but other ones raise "keys changed", yield the new key or stop,
by where CPython's table put them, which a trace cannot know: that frame runs as Python."""

from __future__ import annotations

import pytest
import torch

import framejit
import framejit.testing


def grows(x, d):
    for k in d:
        d[k + "_"] = x
    return x + 1


def swaps_a_passed_key(x):
    d = {"a": x, "b": x}
    for k, v in d.items():
        if k == "a":
            d.pop("a")
            d["c"] = v
    return x + 1


def swaps_a_key_ahead(x):
    d = {"a": x, "b": x}
    seen = []
    for k in d:
        seen.append(k)
        if k == "a":
            d.pop("b")
            d["c"] = x
    return x + len(seen), seen


def _inner(d, x):
    for k in d:
        if k == "a":
            d.pop("a")
            d["c"] = x
    return x


def swaps_inside_a_called_function(x):
    y = x.sin()
    _inner({"a": x, "b": x}, x)
    return y + 1


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except RuntimeError as e:
        return "raised", str(e)


@pytest.mark.parametrize(
    "fn,args",
    [(grows, ({"a": 1},)), (swaps_a_passed_key, ()), (swaps_a_key_ahead, ()), (swaps_inside_a_called_function, ())],
)
def test_a_dict_changed_during_iteration_behaves_as_in_eager(fn, args):
    x = torch.randn(3)
    want = _outcome(fn, x, *[dict(a) for a in args])
    got = _outcome(framejit.compile(fn, backend="eager"), x, *[dict(a) for a in args])
    assert got[0] == want[0]
    if want[0] == "raised":
        assert got[1] == want[1]
    else:
        assert framejit.testing.same(got[1], want[1])


def test_the_caller_of_such_a_function_is_still_captured():
    counter = framejit.testing.CompileCounter()
    compiled = framejit.compile(swaps_inside_a_called_function, backend=counter)
    with pytest.raises(RuntimeError, match="keys changed"):
        compiled(torch.randn(3))
    assert counter.frame_count >= 1  # the sin before the call is a graph
