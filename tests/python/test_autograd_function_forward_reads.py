"""What the trace learns by reading a torch.autograd.Function's forward before the graph calls its real apply: a
forward with Python side effects, or one returning what a graph op cannot, is a graph break naming the Function
(the call runs as Python, as in eager, once per call); what the forward reads is guarded; keywords, defaults and
enum arguments reach it as eager's apply passes them; the reading leaves nothing in the graph."""

import warnings
from enum import Enum

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import framejit
from framejit.testing import CompileCounter
from tests.helpers import assert_equal, clone, compiled_and_eager_grads, run_fullgraph, targets


class AppendsToItsArgument(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, out_list):
        out_list.append(x.sin())
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2, None


def _collects(x):
    found = []
    y = AppendsToItsArgument.apply(x, found)
    return y + 1, found


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_forward_writing_into_a_list_it_gets_is_one_graph_and_the_list_is_eagers(backend):
    """The forward appends to a list made by the caller: the write is replayed onto the caller's list, and the
    tensor appended is the one the forward made (an extra output of the node), so the list is eager's."""
    x = torch.randn(3, requires_grad=True)
    cnt = compiled_and_eager_grads(_collects, backend, [x], loss=lambda out: out[0].sum() + out[1][0].sum())
    assert cnt.frame_count == 1
    assert framejit.explain(_collects)(x).graph_break_count == 0
    out, found = run_fullgraph(_collects, x)
    assert len(found) == 1
    assert_equal(found[0], x.detach().sin())  # made under no_grad, as forward runs


SEEN = []


class RecordsItsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        SEEN.append(x.sum())
        return x.cos()

    @staticmethod
    def backward(ctx, grad):
        return grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_forward_writing_a_global_runs_once_per_call_with_real_tensors(backend):
    """Before, the trace ran the forward on fake tensors (a FakeTensor landed in the global list) and, under
    aot_eager, the compiled graph never ran it again."""

    def fn(x):
        return RecordsItsInput.apply(x * 2) + 1

    compiled = framejit.compile(fn, backend=backend)
    SEEN.clear()
    xs = [torch.randn(4, requires_grad=True) for _ in range(3)]
    for x in xs:
        assert_equal(compiled(x), fn(x))
    assert len(SEEN) == 6  # three compiled calls, three eager ones
    assert not any(isinstance(t, FakeTensor) for t in SEEN)
    assert_equal(SEEN[0::2], SEEN[1::2])


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


class ReturnsAnObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return Pair(x.sin(), x.cos()), x * 3

    @staticmethod
    def backward(ctx, grad_pair, grad):
        return grad * 3


def test_a_forward_returning_an_object_breaks_and_its_tensors_are_real():
    """The object's tensors came back from the fake run as FakeTensors (a crash where the program read them)."""

    def fn(x):
        pair, y = ReturnsAnObject.apply(x)
        return pair, pair.a + y

    x = torch.randn(5, requires_grad=True)
    pair, total = framejit.compile(fn, backend="eager")(clone(x))
    expected_pair, expected_total = fn(x)
    assert not isinstance(pair.a, FakeTensor)
    assert_equal([pair.a, pair.b, total], [expected_pair.a, expected_pair.b, expected_total])
    reason = framejit.explain(fn)(x).break_reasons[0].reason
    assert "ReturnsAnObject returns" in reason and "Pair" in reason


SCALE = 2.0


class ScaledByAGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * SCALE

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * SCALE  # not the true gradient: shows this backward ran


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_what_forward_and_backward_read_is_guarded(backend):
    """aot_eager traced the global into its graph once: a new value was ignored (no guard)."""
    global SCALE

    def fn(x):
        return ScaledByAGlobal.apply(x).sin()

    compiled = framejit.compile(fn, backend=backend)
    x = torch.randn(3, requires_grad=True)
    for SCALE in (2.0, 5.0):
        actual_x = clone(x)
        actual, expected = compiled(actual_x), fn(x)
        assert_equal(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        assert_equal(actual_x.grad, x.grad)
        x.grad = None
    SCALE = 2.0


class BreaksInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x + x
        framejit.graph_break()
        return y * x

    @staticmethod
    def backward(ctx, grad):
        return grad * 7


def test_a_forward_the_trace_cannot_read_runs_as_python_with_its_reason():
    def fn(x):
        return BreaksInForward.apply(x.relu()) - 1

    compiled_and_eager_grads(fn, "eager", [torch.randn(4, requires_grad=True)])
    reason = framejit.explain(fn)(torch.randn(4)).break_reasons[0].reason
    assert reason.startswith("the forward of autograd.Function BreaksInForward cannot be traced")


class Warns(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        warnings.warn("forward ran")
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_a_forward_that_warns_warns_once_per_call():
    compiled = framejit.compile(lambda x: Warns.apply(x) * 2, backend="eager")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            compiled(torch.randn(2))
    assert [str(w.message) for w in record if "forward ran" in str(w.message)] == ["forward ran"] * 3


def test_a_function_put_in_the_graph_by_the_user_is_not_read():
    @framejit.allow_in_graph
    class Allowed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            framejit.graph_break()  # (eager ignores it; the trace never reads it)
            ctx.n = x.size(0)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.n

    x = torch.rand(2, 3)
    assert_equal(run_fullgraph(lambda t: Allowed.apply(t) + 1, x), Allowed.apply(x) + 1)


class Mode(Enum):
    SIN = 0
    COS = 1


class ByMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mode):
        ctx.mode = mode
        ctx.save_for_backward(x)
        return x.sin() if mode is Mode.SIN else x.cos()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (grad * x.cos() if ctx.mode is Mode.SIN else -grad * x.sin()), None


def test_an_enum_argument_is_held_by_the_node_and_guarded():
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(lambda x, mode: ByMode.apply(x, mode) * 2)
    for mode in (Mode.SIN, Mode.COS, Mode.SIN):
        x = torch.randn(3, requires_grad=True)
        cx = clone(x)
        actual, expected = compiled(cx, mode), ByMode.apply(x, mode) * 2
        assert_equal(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        assert_equal(cx.grad, x.grad)
    assert cnt.frame_count == 2


class OldStyleKeywords(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=1.0, shift=0.0):
        ctx.scale, ctx.needs = scale, ctx.needs_input_grad
        return x * scale + shift

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale * len(ctx.needs), None, None


class WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x, scale=2.0, bias=1.0, *rest):
        return x * scale + bias + sum(rest)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.count = len(inputs)  # defaults bound in: as many inputs as forward's positional parameters

    @staticmethod
    def backward(ctx, grad):
        return (grad * ctx.count,) + (None,) * (ctx.count - 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: OldStyleKeywords.apply(x, scale=3.0),
        lambda x: OldStyleKeywords.apply(x, 2.0, shift=1.0),
        lambda x: WithSetupContext.apply(x, bias=4.0),
        lambda x: WithSetupContext.apply(x, 3.0, 1.0, 2.0),
    ],
)
def test_keywords_and_defaults_reach_forward_as_eagers_apply_binds_them(call):
    cnt = compiled_and_eager_grads(call, CompileCounter(), [torch.randn(4, requires_grad=True)], fullgraph=True)
    assert cnt.frame_count == 1


class NeedsTwo(torch.autograd.Function):
    @staticmethod
    def forward(x, y):
        return x + y

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


def test_a_call_eagers_apply_refuses_raises_a_type_error_the_program_catches():
    def add_or_shift(x):
        try:
            return NeedsTwo.apply(x)
        except TypeError:
            return x + 10

    def fn(x):  # (a handler is routed in a called function; the captured frame's own breaks)
        return add_or_shift(x) * 2

    x = torch.randn(3)
    assert_equal(run_fullgraph(fn, x), fn(x))


def test_reading_the_function_leaves_one_node_per_call():
    def fn(x):
        return ByMode.apply(x, Mode.SIN).relu()

    cnt = CompileCounter()
    framejit.optimize(cnt)(fn)(torch.randn(3, requires_grad=True))
    assert [getattr(t, "__name__", t) for t in targets(cnt.graphs[0])] == ["ByMode_apply", torch.relu.__name__]
