"""torch.autograd.Function calls in training graphs of AOTAutograd backends: AOTAutograd traces forward and backward
once into its own graph, which differs from eager's per-call run of the user's Python where the backward has side
effects, gives None gradients, wants unmaterialized gradients or reads a gradient's layout. Such a graph runs as
its torch ops (the real apply); a Function without any of these is still compiled. Gradients equal eager's."""

import pytest
import torch
from torch.autograd.function import once_differentiable

import framejit
from tests.helpers import assert_equal, clone, compiled_and_eager_grads


def _fate(fn, backend, *inputs):
    """What the backend made of fn's single graph (explain's graph fate, as text)."""
    out = framejit.explain(framejit.compile(fn, backend=backend))(*clone(list(inputs)))
    assert len(out.graph_fates) == 1
    return str(out.graph_fates[0])


class NoGradForSecond(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y, None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_none_gradient_stays_none(backend):
    """aot_eager gave y a zero gradient where eager leaves y.grad None."""

    def fn(x, y):
        return NoGradForSecond.apply(x, y).sin()

    inputs = [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]
    assert compiled_and_eager_grads(fn, backend, inputs).frame_count == 1
    if backend == "aot_eager":  # the call runs as its torch ops; the sin after it compiles
        fate = _fate(fn, backend, *inputs)
        assert fate.startswith("1 part(s) compiled by aot_eager, 1 run as torch ops: the backward of")
        assert "no gradient for its input 1" in fate


class TwoOutputsOneGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b, a + b

    @staticmethod
    def backward(ctx, grad_prod, grad_sum):
        a, b = ctx.saved_tensors
        return grad_prod * b + grad_sum, None


def test_what_comes_after_the_calls_aotautograd_must_not_trace_compiles():
    """The graph is cut after the last such call: what comes before runs as torch ops with the calls (a call may
    give an argument no gradient: a compiled node computing it would give zeros), what comes after compiles."""

    def fn(x, y):
        a = x.sin()
        p, q = TwoOutputsOneGradient.apply(a, y * 2)
        r = NoGradForSecond.apply(p.cos() + q * a, y)
        return (r * x).tanh()

    inputs = [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]
    compiled_and_eager_grads(fn, "aot_eager", inputs)
    fate = _fate(fn, "aot_eager", *inputs)
    assert fate.startswith("1 part(s) compiled by aot_eager, 1 run as torch ops")


class Unmaterialized(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        (x,) = ctx.saved_tensors
        if grad_b is None:  # eager passes None for the output the loss does not use
            return grad_a * x * 10
        return (grad_a + grad_b) * x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_unmaterialized_gradients_reach_backward_as_none(backend):
    """aot_eager passed zeros for the unused output: the backward took the other branch."""
    compiled_and_eager_grads(
        lambda x: Unmaterialized.apply(x),
        backend,
        [torch.randn(4, requires_grad=True)],
        loss=lambda out: out[0].sin().sum(),
    )


class CountsBackwards(torch.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad):
        CountsBackwards.calls.append(len(CountsBackwards.calls))
        (x,) = ctx.saved_tensors
        return grad * x.exp()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_backward_with_python_side_effects_runs_at_every_backward(backend):
    """aot_eager ran the backward's Python once, when it traced it."""
    compiled = framejit.compile(lambda x: CountsBackwards.apply(x).sum(), backend=backend)
    CountsBackwards.calls.clear()
    for _ in range(3):
        x = torch.randn(2, requires_grad=True)
        compiled(x).backward()
        assert_equal(x.grad, x.detach().exp())
    assert CountsBackwards.calls == [0, 1, 2]


class ScalesByGradStride(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (grad.stride()[-1] + 1) + x * 0  # eager's gradient of sum() is expanded: stride 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_backward_reading_its_gradients_layout_sees_eagers(backend):
    compiled_and_eager_grads(lambda x: ScalesByGradStride.apply(x), backend, [torch.randn(2, 3, requires_grad=True)])


class ScalesByListItems(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factors):
        ctx.save_for_backward(factors[0], factors[1])
        return x * (factors[0] + factors[1])

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * (a + b), None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensors_in_a_list_argument_get_no_gradient(backend):
    """They are no inputs of the Function (eager leaves their .grad None); aot_eager gave them zeros. The graph
    still compiles: the gate of each input knows the call passes no gradient to a list's tensors."""

    def fn(x, a, b):
        return ScalesByListItems.apply(x, [a, b]).cos()

    inputs = [torch.randn(3, requires_grad=True) for _ in range(3)]
    compiled_and_eager_grads(fn, backend, inputs)
    if backend == "aot_eager":
        assert _fate(fn, backend, *inputs) == "compiled by aot_eager"


class TimesThreeInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(3)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_mark_dirty_writes_in_place_as_eager(backend):
    def fn(w):
        y = torch.ones(2, 2) @ w
        TimesThreeInPlace.apply(y)
        return y.sum() + y.mean()

    compiled_and_eager_grads(fn, backend, [torch.eye(2, requires_grad=True)])


class PlusOneGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b + a + b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * (b + 1), grad * (a + 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_one_tensor_passed_twice_gets_both_gradients(backend):
    compiled_and_eager_grads(lambda x: PlusOneGrad.apply(x, x).sum(), backend, [torch.randn(5, requires_grad=True)])


class Inner(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 2


class Outer(torch.autograd.Function):
    """Calls Inner in its forward, and differentiates Inner in its backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Inner.apply(x) * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            y = Inner.apply(leaf)
        return torch.autograd.grad(y, leaf, grad)[0] + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_nested_functions(backend):
    def fn(x):
        return Outer.apply(Inner.apply(x)).sum()

    compiled_and_eager_grads(fn, backend, [torch.randn(4, requires_grad=True)])


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


class CubeOnce(Cube):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


def _second_derivative(fn, x):
    (first,) = torch.autograd.grad(fn(x), x, create_graph=True)
    return first, torch.autograd.grad(first.sum(), x)[0]


def test_double_backward_as_eager_with_the_eager_backend():
    """The node is eager's own: a differentiable backward differentiates again; once_differentiable refuses."""
    x = torch.tensor([2.0, -1.0], requires_grad=True)
    compiled = framejit.compile(lambda t: Cube.apply(t).sum(), backend="eager")
    assert_equal(_second_derivative(compiled, x), _second_derivative(lambda t: Cube.apply(t).sum(), x))
    once = framejit.compile(lambda t: CubeOnce.apply(t).sum(), backend="eager")
    with pytest.raises(RuntimeError, match="does not require grad"):
        _second_derivative(once, x)
    with pytest.raises(RuntimeError, match="does not require grad"):
        _second_derivative(lambda t: CubeOnce.apply(t).sum(), x)


def test_a_function_without_any_of_these_is_compiled():
    def fn(x):
        return Cube.apply(x.tanh()) + CubeOnce.apply(x)

    x = torch.randn(4, requires_grad=True)
    compiled_and_eager_grads(fn, "aot_eager", [x])
    assert _fate(fn, "aot_eager", x) == "compiled by aot_eager"


class AmpMatmul(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_custom_fwd_and_custom_bwd_wrappers_are_read(backend):
    """torch.amp's wrappers set and read ctx attributes; the trace reads them (one graph)."""
    inputs = [torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)]
    cnt = compiled_and_eager_grads(lambda a, b: AmpMatmul.apply(a, b).relu(), backend, inputs, fullgraph=True)
    assert cnt.frame_count == 1


class PrintsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + x

    @staticmethod
    def backward(ctx, grad):
        print("backward ran")
        return grad


def test_a_print_in_backward_prints_at_every_backward(capsys):
    compiled = framejit.compile(lambda x: PrintsInBackward.apply(x).sum(), backend="aot_eager", fullgraph=True)
    for _ in range(2):
        compiled(torch.randn(3, requires_grad=True)).backward()
    assert capsys.readouterr().out == "backward ran\n" * 2


class NoisyScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, size):
        noise = torch.rand(size)
        ctx.save_for_backward(noise)
        return x * noise

    @staticmethod
    def backward(ctx, grad):
        (noise,) = ctx.saved_tensors
        return grad * noise, None


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_forward_drawing_random_numbers_draws_eagers(backend):
    """The draws inside the call are eager's, in eager's order with the graph's own (the graph is marked as drawing
    random numbers: it never runs twice)."""

    def fn(x, n):
        return NoisyScale.apply(x, n) + torch.rand(n)

    x = torch.randn(3, requires_grad=True)
    torch.manual_seed(1)
    expected = fn(x, 3)
    torch.manual_seed(1)
    assert_equal(framejit.compile(fn, backend=backend)(clone(x), 3), expected)


class ReturnsItsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class ReturnsAView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)[1:]

    @staticmethod
    def backward(ctx, grad):
        return torch.cat([grad.new_zeros(1), grad * 3]).view(2, 2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_function_returning_its_input_or_a_view_of_it(backend):
    def fn(x):
        y = ReturnsItsInput.apply(x)
        z = ReturnsAView.apply(x * 1)
        return (y.cos() if y is x else y.sin()) + z.sum(), z._is_view()

    compiled_and_eager_grads(fn, backend, [torch.randn(2, 2, requires_grad=True)], loss=lambda out: out[0].sum())


def test_a_graph_that_must_stay_whole_runs_as_torch_ops_with_such_a_call():
    """A graph drawing random numbers is not cut: all of it runs as torch ops, in eager's order of draws."""

    def fn(x, y):
        return torch.nn.functional.dropout(NoGradForSecond.apply(x.sin(), y * 2), 0.5).cos()

    inputs = [torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)]
    torch.manual_seed(0)
    expected = fn(*inputs)
    torch.manual_seed(0)
    actual = framejit.compile(fn, backend="aot_eager")(*clone(inputs))
    assert_equal(actual, expected)
    torch.manual_seed(0)
    assert _fate(fn, "aot_eager", *inputs).startswith("runs as torch ops, not compiled by aot_eager: the backward")
