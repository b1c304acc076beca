"""torch.autocast entered inside compiled code: fake ops under the real autocast state (dtypes as in eager), the
state changes as graph nodes for eager, aot_eager and inductor, blocks re-entered after a graph break, guards on
the autocast state a graph was traced under, and @torch.autocast-decorated functions."""

import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend
from tests.helpers import assert_equal, clone

BACKENDS = ["eager", "aot_eager", "inductor"]


def _nesting() -> int:
    """autocast's nesting depth now (a block left open by a graph would show here)."""
    depth = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return depth - 1


def _autocast_state():
    return (
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
        torch.is_autocast_cache_enabled(),
        _nesting(),
    )


def _close(actual, expected, exact, path):
    """Equal as assert_equal checks for the eager backend. Others get bfloat16's tolerance: inductor fuses bfloat16
    ops in float32, and in eager autocast's weight cache shares one cast of a weight between its uses (their
    gradients are summed in bfloat16), where AOTAutograd's graph casts it at each use."""
    if exact:
        return assert_equal(actual, expected, path)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        assert a.dtype == e.dtype and a.requires_grad == e.requires_grad, path
        torch.testing.assert_close(a.detach().float(), e.detach().float(), rtol=2e-2, atol=5e-2)


def _differential(fn, backend, *inputs, grads=True, exact=True):
    """fn compiled with `backend` gives eager's results (dtype, values, requires_grad), eager's input gradients,
    and leaves autocast as it found it (`exact`: within assert_equal's tolerance with the eager backend, else
    bfloat16's). Returns the counter."""
    exact = exact and backend == "eager"
    before = _autocast_state()
    eager_in, compiled_in = clone(inputs), clone(inputs)
    expected = fn(*eager_in)
    cnt = CompileCounterWithBackend(backend)
    actual = framejit.optimize(cnt)(fn)(*compiled_in)
    assert _autocast_state() == before
    _close(actual, expected, exact, "result")
    if grads:
        for out, ins in ((expected, eager_in), (actual, compiled_in)):
            sum(o.float().sum() for o in torch.utils._pytree.tree_leaves(out) if o.requires_grad).backward()
        for a, e in zip(compiled_in, eager_in):
            if isinstance(e, torch.Tensor) and e.requires_grad:
                _close(a.grad, e.grad, exact, "grad")
    assert _autocast_state() == before
    return cnt


def mixed_block(x, w):
    y = x.sin()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ w  # bfloat16 under autocast
        s = z.sum(-1)  # stays bfloat16
        e = torch.exp(z)  # autocast runs exp in float32
    return z, s, e, (z.float() @ w) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_in_one_graph_dtypes_values_and_grads(backend):
    cnt = _differential(mixed_block, backend, torch.randn(4, 5), torch.randn(5, 5, requires_grad=True))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_with_no_grad_and_a_disabled_inner_block(backend):
    def fn(x, w):
        with torch.amp.autocast("cpu"):
            a = x @ w
            with torch.no_grad():
                b = a @ w
            with torch.autocast("cpu", enabled=False):
                c = x @ w  # float32 again
            d = (c @ w) * b
        return a, b, c, d

    cnt = _differential(fn, backend, torch.randn(3, 4), torch.randn(4, 4, requires_grad=True))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_break_inside_the_block_runs_the_rest_under_it(backend):
    seen = []

    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = x @ w
            with torch.no_grad():
                seen.append(torch.is_autocast_enabled("cpu"))
                print("inside")  # a graph break: print runs for real, under autocast and no_grad
                b = a @ w
            c = a @ w
        return a, b, c, c.float() @ w

    # the graph leaves the block and the break code enters it anew: the weight cache starts empty there, so
    # gradients of w's casts are summed as in separate blocks (bfloat16 rounding differs)
    cnt = _differential(fn, backend, torch.randn(3, 4), torch.randn(4, 4, requires_grad=True), exact=False)
    assert cnt.frame_count == 2
    assert seen == [True, True]  # eager, then compiled


def test_fullgraph_one_graph_with_enter_and_exit_nodes():
    cnt = CompileCounter()
    x, w = torch.randn(4, 5), torch.randn(5, 5)
    assert_equal(framejit.optimize(cnt, nopython=True)(mixed_block)(x, w), mixed_block(x, w))
    assert cnt.frame_count == 1
    names = [getattr(n.target, "__name__", n.target) for n in cnt.graphs[0].graph.nodes if n.op == "call_function"]
    assert names.count("_enter_autocast") == 1 and names.count("_exit_autocast") == 1
    assert names.index("_enter_autocast") < names.index("matmul") < names.index("_exit_autocast")


def test_autocast_outside_on_or_off_selects_the_right_entry():
    def fn(x, w):
        return x @ w

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt)(fn)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    assert compiled(x, w).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_equal(compiled(x, w), fn(x, w))
    with torch.autocast("cpu", dtype=torch.float16):
        assert_equal(compiled(x, w), fn(x, w))
    assert_equal(compiled(x, w), fn(x, w))
    assert cnt.frame_count == 3  # off, bfloat16, float16; off again reuses the first


def test_block_entered_in_the_trace_under_an_outer_autocast():
    def fn(x, w):
        with torch.autocast("cpu", enabled=False):
            a = x @ w
        return a, x @ w

    cnt = CompileCounter()
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = _autocast_state()
        assert_equal(framejit.optimize(cnt, nopython=True)(fn)(x, w), fn(x, w))
        assert _autocast_state() == before
    assert_equal(framejit.optimize(cnt, nopython=True)(fn)(x, w), fn(x, w))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_decorated_function_called_in_the_trace(backend):
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def project(x, w):
        return x @ w

    def fn(x, w):
        return project(x.cos(), w).float() + project(x, w)

    cnt = _differential(fn, backend, torch.randn(3, 4), torch.randn(4, 2, requires_grad=True))
    assert cnt.frame_count == 1


def test_autocast_as_a_decorator_inside_the_trace_is_a_break():
    def fn(x, w):
        project = torch.autocast("cpu")(torch.matmul)
        return project(x, w)

    x, w = torch.randn(2, 2), torch.randn(2, 2)
    out = framejit.explain(fn)(x, w)
    assert any("decorator" in r.reason for r in out.break_reasons)
    _differential(fn, "eager", x, w, grads=False)


def test_deprecated_cpu_amp_autocast():
    def fn(x, w):
        with torch.cpu.amp.autocast():
            return x @ w

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        cnt = _differential(fn, "eager", x, w, grads=False)
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_two_breaks_in_one_block_and_code_after_it(backend):
    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = x @ w
            print("first")
            b = a @ w
            print("second")  # the continuation breaks again inside the block it was handed entered
            c = b @ w
        return a, b, c, x @ w  # the last one runs after the block, in float32

    cnt = _differential(fn, backend, torch.randn(3, 4), torch.randn(4, 4, requires_grad=True), exact=False)
    assert cnt.frame_count == 3
