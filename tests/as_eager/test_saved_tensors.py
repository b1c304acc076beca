"""Autograd's view of a compiled graph's saved tensors, as eager's ops give it (framejit/as_eager/saved_versions.py):
a tensor eager's ops saved for backward (an input, an output, a view of one) and written in place before the
backward makes the compiled backward raise as eager's does, though the graph (one AOTAutograd node) saved other
tensors. Each test runs the program eagerly and compiled, backward included, and compares results, gradients and
errors."""

from __future__ import annotations

import pytest
import torch

import framejit
from tests.as_eager.differential import MODIFIED, differential, leaf, nonleaf

BACKENDS = ["aot_eager", "inductor"]


# -- the saved tensor is written after the graph ----------------------------------------------------------------


def output_saved_by_its_op_written_later(x):
    t = x[1:].max()  # max saves its result
    print("", end="")  # a break: the write below is outside the graph
    t.add_(t)
    return t


def input_view_saved_written_later(x):
    t = torch.minimum(x * 2, x[-1])  # minimum saves x[-1], a view of the input
    print("", end="")
    x.add_(1)
    return t


def global_read_after_graph_write(x):
    G.relu_()  # the graph writes G, then saves it for the matmul
    t = x @ G
    print("", end="")
    G[0] = 5.0
    return t


def view_of_dropped_output_written(y):
    t5 = torch.tanh(y).sum(0)
    t6 = torch.minimum(t5[1:], torch.tensor(2.0)).amin(0)  # saves t5[1:]
    print("", end="")
    t5 -= 0.25  # t5 dies when the frame returns; the saved view of it lives on
    return t6


def view_written_by_an_op_that_saves(y):
    t = (y.t() @ y).view(4, 2, 2)
    t.exp_()  # exp_ saves its result, t: autograd wraps its node in t's base's CopySlices (fuzz 4845 of 2400000)
    print("", end="")
    t.add_(1)
    return t


def saved_view_written_after_a_graph_ending_under_no_grad(y):
    # fuzz 3104 of seed 6200800: the rows of t12 lead to max's saved t11, and the graph ends inside the no_grad
    # block, where a view made again had no autograd node to check from
    t11 = (y * y)[..., 1:3]
    t12 = t11.max().sub(y)
    for row in t12:
        with torch.no_grad():
            int(y[..., 0].argmax())  # a break inside the block
        t11[-1] = row[-1]
    return t11


G = torch.randn(4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn, make_args",
    [
        (output_saved_by_its_op_written_later, nonleaf(3, 4)),
        (input_view_saved_written_later, nonleaf(3, 4)),
        (global_read_after_graph_write, leaf(3, 4)),
        (view_of_dropped_output_written, leaf(3, 4)),
        (view_written_by_an_op_that_saves, nonleaf(3, 4)),
        (saved_view_written_after_a_graph_ending_under_no_grad, leaf(3, 4)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_a_saved_tensor_written_after_the_graph_makes_backward_raise_as_eager(fn, make_args, backend):
    error = differential(fn, make_args, backend)
    assert error is not None and MODIFIED in error


def saved_result_written_in_the_graph(x):
    y = x.exp()  # exp saves its result; the graph writes it before returning
    y.add_(1)
    return y


def saved_result_written_in_the_graph_behind_a_view_written_later(x, y):
    # fuzz 331, as minimised: relu saves t3, which the graph then writes; the loss reaches it through t4, a view
    # that, written after the break at the raise, autograd rebases on its base
    t3 = x.cumsum(-1).prod(1, keepdim=True).relu()
    x = x + x
    t4 = t3.roll(1, 0).unsqueeze(-1)
    lst5 = [torch.cat([t3, t3], dim=0), torch.cat([t3, t3], dim=0)]
    try:
        t3 -= t3.detach()
        raise KeyError("8")
    except (KeyError, IndexError):
        t4.clamp_(-1, 1)
    finally:
        if (lst5[0] * lst5[0]).max() > 1:
            p9, p10 = (lst5[0], y.masked_fill(y < 0, 0))
            p11, p12 = (t3.long(), torch.softmax(p9, dim=-1))
        else:
            t15 = torch.softmax(x.unsqueeze(0).sum(2, keepdim=True), dim=-1)
    return t4


def _two_leaves():
    torch.manual_seed(0)
    return torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn", [saved_result_written_in_the_graph, saved_result_written_in_the_graph_behind_a_view_written_later]
)
def test_a_saved_tensor_written_inside_the_graph_makes_backward_raise_as_eager(fn, backend):
    error = differential(fn, nonleaf(3, 4) if fn is saved_result_written_in_the_graph else _two_leaves, backend)
    assert error is not None and MODIFIED in error


# -- writes eager's backward does not mind: no error, eager's gradients ------------------------------------------


def unsaved_output_written_later(x):
    t = x + 1  # add saves nothing
    print("", end="")
    t.mul_(2)
    return t


def saved_tensor_of_an_output_without_gradient(x):
    a = x[1:].max()  # saves its result, but `a` is not differentiated
    b = x.sum() * 3
    print("", end="")
    a.add_(1)
    return b


def model_step(x):
    h = torch.nn.functional.linear(x, W).relu()
    return (h * h).mean(0)


W = torch.randn(5, 4, requires_grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn, make_args",
    [
        (unsaved_output_written_later, nonleaf(3, 4)),
        (saved_tensor_of_an_output_without_gradient, nonleaf(3, 4)),
        (model_step, leaf(3, 4)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_writes_eager_allows_keep_eager_gradients(fn, make_args, backend):
    W.grad = None
    assert differential(fn, make_args, backend) is None


def minimum_with_last_row(x):
    return torch.minimum(x * 2, x[-1])


def test_an_input_written_after_the_backward_raises_nothing():
    framejit.reset()
    compiled = framejit.optimize("aot_eager")(minimum_with_last_row)
    x = torch.randn(3, 4, requires_grad=True)
    compiled(x).sum().backward()
    with torch.no_grad():
        x.add_(1)  # after the backward: nothing checks any more
    x.grad = None
    compiled(x).sum().backward()
    expected = x.detach().clone().requires_grad_()
    minimum_with_last_row(expected).sum().backward()
    torch.testing.assert_close(x.grad, expected.grad)


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class _Checkpointed(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Block() for _ in range(3)])
        self.reentrant = reentrant

    def forward(self, x):
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.reentrant)
        return x.pow(2).mean()


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_activation_checkpointing_recomputes_what_the_forward_saved(reentrant, backend):
    # non-reentrant checkpointing checks that the backward's recomputation (eager) saves the tensors the forward
    # saved: under its hooks the compiled blocks run their own ops (a compiled graph saves others)
    torch.manual_seed(0)
    model = _Checkpointed(reentrant)
    compiled_model = _Checkpointed(reentrant)
    compiled_model.load_state_dict(model.state_dict())
    x = torch.randn(4, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    loss = model(x)
    loss.backward()
    compiled_loss = framejit.optimize(backend)(compiled_model)(x2)
    compiled_loss.backward()
    assert torch.allclose(loss, compiled_loss) and torch.allclose(x.grad, x2.grad, atol=1e-6)
    for p, q in zip(model.parameters(), compiled_model.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6)


def test_graphs_under_saved_tensor_hooks_give_eager_gradients():
    def fn(x, w):
        return (x @ w).tanh().sum()

    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 3, requires_grad=True)
    with torch.autograd.graph.save_on_cpu():
        framejit.optimize("aot_eager")(fn)(x, w).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    fn(x, w).backward()
    assert torch.allclose(got[0], x.grad) and torch.allclose(got[1], w.grad)


def twice_the_same_computation(x):
    rows = [x[-1], x.amax(0)]
    return [torch.topk(rows[0], 2, dim=-1).values, torch.topk(rows[0], 2, dim=-1).values]  # (fuzz 5798)


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_computed_twice_stay_two_tensors(backend):
    # AOTAutograd's common-subexpression elimination merges the two: a write into one showed in the other
    x = torch.randn(3, 4, requires_grad=True)
    first, second = framejit.compile(twice_the_same_computation, backend=backend)(x)
    assert first is not second and first.data_ptr() != second.data_ptr()
    want = twice_the_same_computation(x)[0].detach().clone()
    with torch.no_grad():
        first.add_(1)
    torch.testing.assert_close(second.detach(), want)
    (first.sum() + 2 * second.sum()).backward()
    expected = torch.zeros_like(x)
    expected[-1].scatter_(0, torch.topk(x[-1], 2).indices, 3.0)
    torch.testing.assert_close(x.grad, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_backward_through_a_freed_graph_raises_eagers_error_first(backend):
    # call 0's product saved g; call 1 writes g, then a backward through both calls' outputs reaches call 0's
    # node, freed by the first backward: eager raises "a second time" before any version check (fuzz 1826)
    def step(x, g, kept):
        g.mul_(2)
        r = (x * g).logsumexp(0)
        print("", end="")
        kept.append(r * g)  # a graph of its own, saving its input g
        return kept

    def errors(fn):
        torch.manual_seed(0)
        x, g, kept, raised = torch.randn(8, requires_grad=True), torch.randn(8), [], []
        for _ in range(2):
            try:
                sum(t.sum() for t in fn(x, g, kept)).backward()
            except RuntimeError as e:
                raised.append(str(e).split(".")[0])
        return raised

    framejit.reset()
    want = errors(step)
    assert want and "second time" in want[0]
    assert errors(framejit.compile(step, backend=backend)) == want


@pytest.mark.parametrize("retain_graph", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backward_after_one_that_raised_midway_raises_as_eager(backend, retain_graph):
    # amin saved its result, which exp_ wrote. Eager's first backward runs exp_'s node, frees what it saved and
    # raises "modified" at amin's; the next backward meets exp_'s freed node: "second time" (unless the first kept
    # the graph). The compiled check raises before the graph's node runs (fuzz 8269 of seed 2400000)
    def step(x, kept):
        t = x.roll(1, 0)
        if not kept:
            kept.append(t.amin(0))
        kept[0].exp_()
        return kept[0][1:]

    def errors(fn):
        x, kept, raised = torch.randn(4, 6, requires_grad=True), [], []
        for _ in range(2):
            try:
                fn(x, kept).sum().backward(retain_graph=retain_graph)
            except RuntimeError as e:
                raised.append(str(e).split(".")[0])
        return raised

    framejit.reset()
    want = errors(step)
    assert len(want) == 2 and ("second time" in want[1]) != retain_graph
    assert [e.split(":")[0] for e in errors(framejit.compile(step, backend=backend))] == [e.split(":")[0] for e in want]


def _expanded_min_written_after_a_break(x, y):
    t, u = y.amin(-1, keepdim=True).expand(2), x * 2  # amin saves its result
    print("", end="")
    t.add_(1)  # eager: "more than one element of the written-to tensor refers to a single memory location"
    return u


def _gapped_exp_viewed_after_a_break(x, y):
    t, u = (x * 3).exp()[:, :2], x * 2  # exp saves its result
    print("", end="")
    return t.view(-1), u  # eager: "view size is not compatible with input tensor's size and stride"


@pytest.mark.parametrize("fn", [_expanded_min_written_after_a_break, _gapped_exp_viewed_after_a_break])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_copied_for_backward_keeps_eagers_layout(fn, backend):
    # an output saved on some outputs' paths only comes back a copy (saved_versions.holding_saved_tensors); a
    # dense clone let a write into an expanded tensor, or a view of a gapped one, pass (fuzz 7947 of seed 2700000)
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError) as eager_error:
        fn(x, y)
    with pytest.raises(RuntimeError) as error:
        framejit.compile(fn, backend=backend)(x, y)
    assert str(error.value) == str(eager_error.value)


@pytest.mark.parametrize("layout", ["expanded", "transposed", "gapped"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_copied_for_backward_keeps_the_layout_the_backward_was_compiled_for(layout, backend):
    # `sin` saves `t` on the way from its own output only: the node's saved copy of it must keep t's strides, which
    # inductor's compiled backward asserts (a dense copy of an expanded input failed them: fuzz 673 of 6500000)
    def program(t, x):
        return torch.sin(t), x + 1

    def make_args():
        torch.manual_seed(0)
        base = (
            torch.randn(1, 6)
            if layout == "expanded"
            else torch.randn(6, 5)
            if layout == "transposed"
            else torch.randn(5, 12)
        )
        base.requires_grad_()
        t = base.expand(5, 6) if layout == "expanded" else base.t() if layout == "transposed" else base[:, ::2]
        return t, torch.randn(5, 6, requires_grad=True), base

    grads = []
    for fn in (program, framejit.compile(program, backend=backend)):
        t, x, base = make_args()
        for _ in range(2):  # (the second call reuses the compiled backward)
            s, _ = fn(t, x)
            s.sum().backward()
        grads.append(base.grad)
    torch.testing.assert_close(grads[1], grads[0])
