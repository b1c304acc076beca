"""Idioms of model output code: a record rebuilt as `type(output)(**fields)`, and `torch._check(cond, msg)` on a
condition known at trace time (nothing when true; the error, from Python, when false)."""

import dataclasses

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import run_fullgraph


@dataclasses.dataclass
class Features:
    maps: object
    pooled: object = None


def keep_first_map(x):
    out = Features(x * 2, x.mean())
    kept = {f.name: getattr(out, f.name) for f in dataclasses.fields(out) if f.name != "pooled"}
    return type(out)(**kept)  # a backbone filtering its output: the same class, made again


def test_a_record_made_in_the_trace_is_made_again_through_its_type():
    x = torch.randn(3)
    got, want = run_fullgraph(keep_first_map, x), keep_first_map(x)
    assert type(got) is Features and same(got.maps, want.maps) and got.pooled is None


def checked_scale(x, n):
    torch._check(n > 0, lambda: "n must be positive")
    torch._check_index(n < 10, lambda: "n too large")
    return x * n


def asserted_image(x, size):
    torch._assert(x.shape[-1] == size, f"Wrong image width! Expected {size} but got {x.shape[-1]}!")
    return x.flatten(1)


def test_torch_assert_of_a_known_condition():
    x = torch.randn(2, 3, 4)
    assert same(run_fullgraph(asserted_image, x, 4), x.flatten(1))
    with pytest.raises(AssertionError, match="Expected 5 but got 4"):
        framejit.optimize(CompileCounter())(asserted_image)(x, 5)


def test_torch_check_of_a_known_condition():
    x = torch.ones(2)
    assert same(run_fullgraph(checked_scale, x, 3), x * 3)
    cnt = CompileCounter()
    with pytest.raises(RuntimeError, match="n must be positive"):
        framejit.optimize(cnt)(checked_scale)(x, -1)
    with pytest.raises(IndexError, match="n too large"):
        framejit.optimize(cnt)(checked_scale)(x, 12)


W = torch.randn(4, 4)


def shifts_a_view_kept_in_a_dict(y):
    d = {"a": W.view(-1), "b": W.view(-1) * 2}
    t = d["a"]
    t -= 0.25  # an in-place op's result is its input: t is d["a"]
    return t, (y @ y.t()).relu(), d


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("grad", [False, True])
def test_a_tensor_returned_twice_through_an_in_place_op_is_one_tensor(backend, grad):
    # the trace has two values for it (the view, and the write's result); a backend returned two tensors (fuzz
    # 8178 of seed 1700000)
    global W
    W = torch.randn(4, 4)
    want_w = W.clone().view(-1) - 0.25
    y = torch.randn(3, 4, requires_grad=grad)
    t, _, d = framejit.compile(shifts_a_view_kept_in_a_dict, backend=backend)(y)
    assert t is d["a"]
    assert same(W.view(-1), want_w)
