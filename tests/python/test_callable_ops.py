"""torch functions that run a callable the program passes them (associative_scan): one graph node that calls the
real function with the callable, equal to eager in values and gradients; a callable that closes over a traced
tensor is a graph break that names it."""

import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend


def linear_recurrence(left, right):
    """h_t = a_t * h_{t-1} + b_t, as a state-space model's scan combines pairs."""
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def scan_with_a_module_level_function(a, b):
    return associative_scan(linear_recurrence, (a, b), dim=1, combine_mode="generic")[1].relu()


def scan_with_an_inner_function(a, b, w):
    def combine(left, right):  # made in the frame, closing over nothing
        return left[0] * right[0], right[0] * left[1] + right[1]

    h = torch.tanh(b @ w)
    _, states = associative_scan(combine, (a, h), dim=1, combine_mode="generic")
    return states.sum(-1) * 2


def inputs(requires_grad=False):
    torch.manual_seed(0)
    return torch.rand(2, 6, 4), torch.randn(2, 6, 4, requires_grad=requires_grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_an_inner_combine_function_is_frames_compiled_matching_eagers(backend):
    a, b = inputs(requires_grad=True)
    w = torch.randn(4, 4)
    want = scan_with_an_inner_function(a, b, w)
    want.sum().backward()
    want_grad, b.grad = b.grad, None
    cnt = CompileCounterWithBackend(backend)
    got = framejit.optimize(cnt, nopython=True)(scan_with_an_inner_function)(a, b, w)
    got.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(b.grad, want_grad)
    assert cnt.frame_count == 1


def test_a_module_level_combine_function_is_one_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    a, b = inputs()
    compiled = framejit.optimize(backend, nopython=True)(scan_with_a_module_level_function)
    torch.testing.assert_close(compiled(a, b), scan_with_a_module_level_function(a, b))
    torch.testing.assert_close(compiled(a, b), scan_with_a_module_level_function(a, b))  # from the cache
    assert len(graphs) == 1
    targets = [getattr(n.target, "__name__", n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets.count("associative_scan_of_linear_recurrence") == 1, targets


def test_an_inner_function_closing_over_constants_is_made_again_with_them():
    def f(a, b):
        scale = 0.5

        def combine(left, right):
            return left[0] * right[0] * scale, right[0] * left[1] + right[1]

        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")

    a, b = inputs()
    cnt = CompileCounter()
    for got, want in zip(framejit.optimize(cnt, nopython=True)(f)(a, b), f(a, b)):
        torch.testing.assert_close(got, want)
    assert cnt.frame_count == 1


def make_combine(weight):
    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] * weight + right[1]

    return combine


def test_a_closure_from_outside_is_guarded_by_identity():
    def f(combine, a, b):
        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")[1]

    a, b = inputs()
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(f)
    for weight in (1.0, 3.0):  # the same code, another cell: eager's answer, not the first function's
        combine = make_combine(weight)
        torch.testing.assert_close(compiled(combine, a, b), f(combine, a, b))
    assert cnt.frame_count == 2


def test_a_combine_function_closing_over_a_traced_tensor_breaks_and_names_it():
    def f(a, b, w):
        shift = w * 2

        def combine(left, right):
            return left[0] * right[0], right[0] * left[1] + right[1] + shift

        return associative_scan(combine, (a, b), dim=1, combine_mode="generic")[1]

    a, b = inputs()
    w = torch.randn(4)
    reasons = [r.reason for r in framejit.explain(f)(a, b, w).break_reasons]
    assert any("associative_scan() of" in r and "closes over a traced value" in r for r in reasons), reasons
    torch.testing.assert_close(framejit.optimize("eager")(f)(a, b, w), f(a, b, w))


# ---------------------------------------------------------------------------------------------
# torch.utils.checkpoint.checkpoint: traced into the graph, its nodes tagged for recomputation

from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from framejit.backends.aot import aot_autograd  # noqa: E402


def checkpointed_stack(layers, use_checkpoint):
    def block(x, layer, scale=1.0):
        return torch.tanh(layer(x)).sin().cos() * scale

    def forward(x):
        for layer in layers:
            x = checkpoint(block, x, layer, use_reentrant=False, scale=0.5) if use_checkpoint else block(x, layer, 0.5)
        return x.sum()

    return forward


def saved_tensor_counts(fn, x):
    """How many tensors the training graph's forward hands its backward (its outputs past the first; the
    compiler gets the forward graph first, then the backward)."""
    counts = []

    def forward_compiler(gm, example_inputs):
        counts.append(len(gm.graph.output_node().args[0]) - 1)
        return gm

    framejit.optimize(aot_autograd(forward_compiler))(fn)(x).backward()
    return counts[0]


def test_a_checkpointed_block_is_one_graph_that_saves_less_with_eager_gradients():
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
    x = torch.randn(4, 8, requires_grad=True)
    checkpointed = checkpointed_stack(layers, use_checkpoint=True)
    want = checkpointed(x)
    want.backward()
    want_grads = [x.grad, *(p.grad for p in layers.parameters())]
    x.grad = None
    layers.zero_grad(set_to_none=True)
    cnt = CompileCounterWithBackend("aot_eager")
    got = framejit.optimize(cnt, nopython=True)(checkpointed)(x)
    got.backward()
    torch.testing.assert_close(got, want)
    for g, w in zip([x.grad, *(p.grad for p in layers.parameters())], want_grads):
        torch.testing.assert_close(g, w)
    assert cnt.frame_count == 1
    # the partitioner recomputes the regions' activations in backward instead of saving them
    x = x.detach().requires_grad_()
    with_checkpoint = saved_tensor_counts(checkpointed, x)
    framejit.reset()
    without = saved_tensor_counts(checkpointed_stack(layers, use_checkpoint=False), x)
    assert with_checkpoint < without, (with_checkpoint, without)


def test_the_reentrant_checkpoint_runs_as_python():
    layer = nn.Linear(4, 4)

    def f(x):
        return checkpoint(layer, x, use_reentrant=True).relu()

    x = torch.randn(2, 4, requires_grad=True)
    reasons = [r.reason for r in framejit.explain(f)(x).break_reasons]
    assert any("use_reentrant=False" in r for r in reasons), reasons
    torch.testing.assert_close(framejit.optimize("aot_eager")(f)(x), f(x))


def test_a_checkpointed_batchnorm_in_training_runs_as_python_and_updates_its_stats_as_eager_does():
    # eager's backward runs the region again, so the running stats are updated twice: a graph would do it once
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()

    def step(model, call):
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
        call(model, x).pow(2).mean().backward()
        return model[1].running_mean.clone(), model[1].num_batches_tracked.clone(), model[0].weight.grad

    def f(model, x):
        return checkpoint(model, x, use_reentrant=False)

    want = step(make(), f)
    model = make()
    reasons = [r.reason for r in framejit.explain(f)(model, torch.randn(8, 4)).break_reasons]
    assert any(r.startswith("checkpoint of a function") for r in reasons), reasons
    model = make()
    for got, w in zip(step(model, framejit.optimize("aot_eager")(f)), want):
        torch.testing.assert_close(got, w)


def frames_compiled_matching_eager(f, x, nopython=True):
    """f(x).backward() compiled (aot_eager) gives eager's value and x.grad; returns the frame count."""
    want = f(x)
    want.backward()
    want_grad, x.grad = x.grad, None
    cnt = CompileCounterWithBackend("aot_eager")
    got = framejit.optimize(cnt, nopython=nopython)(f)(x)
    got.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x.grad, want_grad)
    return cnt.frame_count


def test_in_place_writes_into_the_regions_own_tensors_stay_in_the_graph():
    def region(x):
        y = x * 2
        y.add_(1)
        total = torch.zeros_like(y)
        total.index_add_(0, torch.tensor([1, 0, 1]), y)  # as an MoE block sums its experts' outputs
        return total.sin()

    def f(x):
        return checkpoint(region, x, use_reentrant=False).sum()

    x = torch.randn(3, 4, requires_grad=True)
    assert frames_compiled_matching_eager(f, x) == 1


def test_a_write_into_a_view_of_a_tensor_from_outside_the_region_breaks():
    def f(x):
        y = x.clone()

        def region(t):
            t[0].add_(1)  # eager's backward would add again when it recomputes
            return t * 2

        return checkpoint(region, y, use_reentrant=False).sum(), y

    x = torch.randn(3, 4, requires_grad=True)
    reasons = [r.reason for r in framejit.explain(f)(x).break_reasons]
    assert any("writes in place into a tensor from outside it" in r for r in reasons), reasons
    got, want = framejit.optimize("aot_eager")(f)(x), f(x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_a_region_that_writes_the_value_an_attribute_holds_stays_one_graph():
    from tests.python.test_module_state import WindowSetter  # sets self.window on every call, as Swin does

    block = WindowSetter()
    x = torch.randn(3, 4, requires_grad=True)
    block(x)  # window is 3 from now on: the region's write changes nothing

    def f(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    assert frames_compiled_matching_eager(f, x) == 1 and block.window == 3


def test_frames_inside_a_checkpoint_that_runs_as_python_run_as_python():
    # the region has a Python side effect, so checkpoint runs as Python; a frame it calls, compiled, would take
    # the is_compiling() path, while backward recomputes the region as plain Python (checkpoint compares what
    # both saved, and raised "Recomputed values ... have different metadata")
    torch.manual_seed(0)
    layer = nn.Linear(4, 4)
    calls = []

    def inner(x):
        if torch.compiler.is_compiling():
            return layer(x).sin().exp().log()
        return layer(x).sin()

    def region(x):
        calls.append(1)
        return inner(x).cos()

    def f(x):
        return checkpoint(region, x, use_reentrant=False).sum()

    x = torch.randn(3, 4, requires_grad=True)
    frames_compiled_matching_eager(f, x, nopython=False)
    assert len(calls) == 4  # eager: a call and a recomputation; compiled: the same


# ---------------------------------------------------------------------------------------------
# functools.partial made in the trace; requires_grad_(True) on a tensor that already requires it

import functools  # noqa: E402


def scaled_sum(x, y, scale=1.0):
    return (x + y) * scale


def test_a_partial_made_in_the_trace_is_called_read_and_returned():
    def f(x):
        g = functools.partial(scaled_sum, scale=2.0)
        h = functools.partial(g, x)  # a partial of a partial: one partial, as functools makes it
        return h(1), g, h, h.func is scaled_sum, h.args[0] is x, h.keywords

    x = torch.randn(3)
    cnt = CompileCounter()
    got = framejit.optimize(cnt, nopython=True)(f)(x)
    want = f(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[3:] == (True, True, {"scale": 2.0}) == want[3:]
    for made, eager in zip(got[1:3], want[1:3]):  # made for real after the graph
        assert type(made) is functools.partial and made.func is eager.func and made.keywords == eager.keywords
        assert all(a is b for a, b in zip(made.args, eager.args))
    torch.testing.assert_close(got[2](5), want[2](5))
    assert cnt.frame_count == 1


def test_requires_grad_true_on_a_tensor_that_requires_grad_changes_nothing():
    w = torch.randn(3, requires_grad=True)

    def f(x):
        y = (x * w).requires_grad_(True)  # as a forward hook making an embedding's output require grad
        return y.sin()

    x = torch.randn(3)
    cnt = CompileCounterWithBackend("aot_eager")
    got = framejit.optimize(cnt, nopython=True)(f)(x)
    torch.testing.assert_close(got, f(x))
    assert got.requires_grad and cnt.frame_count == 1

    def g(x):
        return (x * 2).requires_grad_(True)  # a new leaf: as before, Python makes it

    reasons = [r.reason for r in framejit.explain(g)(x).break_reasons]
    assert any("leaf that requires grad" in r for r in reasons), reasons
    got = framejit.optimize("eager")(g)(x)
    assert got.is_leaf and got.requires_grad
