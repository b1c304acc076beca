"""Gradients eager leaves None (framejit/as_eager/unused_grads.py): an input whose outputs got no gradient, or
that is only read as numbers, gets None from a compiled training graph, as in eager; the gradients that are there
are eager's."""

import os
import subprocess
import sys

import pytest
import torch

import framejit


def _reads_floats(x, y):
    r = x * 2
    v = float(y.tanh().amax())  # a graph output read only as a number (a break)
    return r + v


def _reads_a_list(x, y):
    r = x * 2
    vals = y.tanh().tolist()
    return r + vals[0]


def _branches_on(x, y):
    r = x * 2
    if (y * 3).sum():  # the graph's value, read by the branch only
        r = r + 1
    return r


def _reads_and_keeps(x, y):
    t = y.tanh()
    v = float(t.amax())
    return x * v + t  # t is read and returned: y's gradient is real


@pytest.mark.parametrize("fn", [_reads_floats, _reads_a_list, _branches_on, _reads_and_keeps])
def test_gradients_of_inputs_only_read_as_numbers_are_none_as_in_eager(fn):
    # a graph output that requires grad but is only read as data gets no gradient: AOTAutograd would give it a
    # zero one, and y.grad would be zeros where eager leaves None
    def leaves():
        torch.manual_seed(0)
        return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)

    eager_x, eager_y = leaves()
    fn(eager_x, eager_y).sum().backward()
    x, y = leaves()
    framejit.compile(fn, backend="aot_eager")(x, y).sum().backward()
    torch.testing.assert_close(x.grad, eager_x.grad)
    assert (y.grad is None) == (eager_y.grad is None)
    if eager_y.grad is not None:
        torch.testing.assert_close(y.grad, eager_y.grad)


def test_a_number_read_from_a_detached_output_warns_as_eager():
    # `float()` of a tensor that requires grad warns (once per process, hence a fresh one), at the program's
    # line: the output the graph returns detached for the break requires grad as eager's does
    script = (
        "import warnings, torch, framejit\n"
        "warnings.simplefilter('always')\n"
        "from tests.as_eager.test_unused_grads import _reads_floats\n"
        "framejit.compile(_reads_floats, backend='aot_eager')(torch.randn(3, requires_grad=True),\n"
        "                                                      torch.randn(3, requires_grad=True))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Converting a tensor with requires_grad=True to a scalar" in done.stderr
    line = _reads_floats.__code__.co_firstlineno + 2
    assert f"test_unused_grads.py:{line}: UserWarning" in done.stderr, done.stderr


def _keeps_an_unused_local(x, y):
    t1 = y.t() @ y  # a graph output (live after the break), never differentiated
    t3 = torch.topk(x, 2, dim=-1).values
    print("", end="")
    t1 = torch.where(t1 > 0, t1, t1)
    return t3


def _stores_into_its_argument(x, ys):
    ys[-1] = x.sub(ys[0])  # an output the caller keeps but never differentiates
    return ys[0].cos() * 2


def _chains_unused_outputs(x, y):
    m = y @ y  # feeds only the next graph's unused output
    print("", end="")
    x2 = torch.maximum(x, m)
    print("", end="")
    return x.sin()


def _uses_everything(x, y):
    a = x * y
    print("", end="")
    return a.sum() + (y * 2).sum()


def _starts_in_no_grad(x, y):
    with torch.set_grad_enabled(False):
        t = (x * 2) @ (x * 2).t()  # a graph whose first ops run without grad, its last with
    return y[-1] * 2


def _returns_a_view_written_later(x, y):
    p = torch.sort(x, dim=-1).values
    v = y.sum().item()
    t = p.t()  # a view of the previous graph's output, returned; the output is written in place after
    s = t[t > 0].sum()
    p.view(-1).add_(1)
    return t


def _writes_into_a_view_output_after_a_break(x, y):
    t = (torch.cat([x, y], dim=0) * 2).T  # a view of an intermediate, written after the break: autograd rebases
    if (t > 0).any():  # it on its base, and the gradient passes the base's node, not the view's
        t[torch.tensor([0, 2])] = y.sum()
    return t


def _writes_into_a_view_output_of_ops_saving_nothing(x, y):
    t = torch.cat([torch.cat([x, y], dim=0), torch.cat([y, x], dim=0)], dim=1).T  # (runs as torch ops: fuzz 7275)
    if (t > 0).any():
        t[torch.tensor([0, 2])] = y.sum()
    return t


G_STATE = torch.zeros(3)


def _writes_into_a_global(x, y):
    G_STATE[G_STATE < 1] = x.mean()  # the global now carries x's gradient
    d = {"a": G_STATE.sum(0), "b": G_STATE.sum(0) * 2}
    print("", end="")
    return G_STATE * y[0, 0]


def _adds_a_detached_value_into_a_global(x, y):
    h = x * 2
    u = y * 3
    G_STATE.add_(h.detach().sum())  # a write into an input that carries no gradient out of the graph
    print("", end="")
    kept = [h]
    return u


def _writes_a_value_made_without_grad_into_a_global(x, y):
    h = x * 2
    u = y * 3
    G_STATE.add_(torch.where(h.new_ones(3) > 0, 1.0, 0.0))  # h's data flows there, no gradient does
    print("", end="")
    kept = [h]
    return u


def _breaks_inside_no_grad(x, y):
    h = x * 2
    u = y * 3
    with torch.no_grad():  # the graph ends with grad off (a break inside the block)
        print("", end="")
    kept = [h]
    return u


def _keeps_views_of_an_input_it_divides_by(x, y):
    t = y.exp().sum(0)
    t.add_(t, alpha=2)
    for view in (x.unsqueeze(-1), x.unsqueeze(-1)):  # the views stay on the stack across the break: outputs
        if (view / t).max() > 1:  # x reaches no differentiable output: AOTAutograd gave it zeros (fuzz 3334)
            pass
    return t


def _writes_into_a_view_of_an_input_after_a_break(x, y):
    v = x[: x.shape[0] - 1].t()  # (a symbolic slice under dynamic shapes: made again by as_strided)
    p = (x.exp() * y).sum()
    print("", end="")
    v.mul_(y[:-1].t())  # rebases the caller's x on the write: its history now passes y
    return x + p


def _writes_a_view_of_an_input_made_before_a_no_grad_block(x, y):
    t = y.amin(0)  # (saves: the graph compiles)
    v = x[None]  # made with grad on; the graph ends inside the block, where the view is made again
    with torch.no_grad():
        print("", end="")
    v += 2.0  # eager allows it; a view made under no_grad refuses it (fuzz 2117 of seed 2300000)
    return t * 2 + x


@pytest.mark.parametrize(
    "fn",
    [
        _keeps_an_unused_local,
        _stores_into_its_argument,
        _chains_unused_outputs,
        _uses_everything,
        _starts_in_no_grad,
        _returns_a_view_written_later,
        _writes_into_a_global,
        _adds_a_detached_value_into_a_global,
        _writes_a_value_made_without_grad_into_a_global,
        _breaks_inside_no_grad,
        _writes_into_a_view_output_after_a_break,
        _writes_into_a_view_output_of_ops_saving_nothing,
        _keeps_views_of_an_input_it_divides_by,
        _writes_into_a_view_of_an_input_after_a_break,
        _writes_a_view_of_an_input_made_before_a_no_grad_block,
    ],
)
@pytest.mark.parametrize("dynamic", [False, True])
def test_inputs_only_unused_outputs_depend_on_get_none_as_gradient(fn, dynamic):
    # one autograd node for all of a graph's outputs gives zeros to an input whose outputs got no gradient; eager
    # leaves None (and the gradients that are there are eager's)
    def leaves():
        torch.manual_seed(0)
        return torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)

    def call(f, x, y):
        return f(x.clone(), [y.clone(), y.clone()]) if fn is _stores_into_its_argument else f(x.clone(), y.clone())

    global G_STATE
    eager_x, eager_y = leaves()
    G_STATE = torch.zeros(3)
    call(fn, eager_x, eager_y).sum().backward()
    x, y = leaves()
    G_STATE = torch.zeros(3)
    call(framejit.compile(fn, backend="aot_eager", dynamic=dynamic), x, y).sum().backward()
    for got, want in ((x.grad, eager_x.grad), (y.grad, eager_y.grad)):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want)
