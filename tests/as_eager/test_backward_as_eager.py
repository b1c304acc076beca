"""A training graph's backward runs where, and reads what, eager's would: the program may write in place after
the graph into what eager's ops did not save or its backward does not reach (as_eager/autograd_parts.py,
saved_versions.py). Each test runs a program eagerly and compiled on equal leaves and compares the backward's
outcome: the same gradients, or the same error."""

import copy

import pytest
import torch

import framejit
from framejit.backends import aot_autograd
from framejit.as_eager.unused_grads import output_dependencies
from tests.helpers import CompilerRecorder

BACKENDS = ["aot_eager", "inductor"]


def _leaves(*shapes):
    torch.manual_seed(0)
    return [torch.randn(*s, requires_grad=True) for s in shapes]


def _run(fn, leaves, after, loss):
    """fn on clones of the leaves, `after(outputs, args)` (the program's code after the graph), then backward
    through `loss(outputs)`: the leaves' gradients, or the error's type and its first words."""
    args = [leaf.clone() for leaf in leaves]
    outputs = fn(*args)
    after(outputs, args)
    try:
        loss(outputs).backward()
    except RuntimeError as e:
        return ("raised", str(e).split(":")[0])
    return [leaf.grad for leaf in leaves]


def _assert_as_eager(fn, shapes, after, loss, backend):
    want = _run(fn, _leaves(*shapes), after, loss)
    got = _run(framejit.compile(fn, backend=backend), _leaves(*shapes), after, loss)
    if isinstance(want, tuple):
        assert got == want
        return
    assert not isinstance(got, tuple), got
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w)


def _an_output_another_output_saves(x, w):
    y = x * x + x
    return y, torch.maximum(w, y).sum()  # `maximum` saves y; y's own backward never reaches it


def _clamp_first(outputs, args):
    outputs[0].clamp_(-1, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_an_output_only_another_outputs_backward_saved(backend):
    _assert_as_eager(_an_output_another_output_saves, [(3, 4), (4,)], _clamp_first, lambda o: o[0].sum(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_an_output_the_backward_then_needs_raises_as_eager(backend):
    _assert_as_eager(_an_output_another_output_saves, [(3, 4), (4,)], _clamp_first, lambda o: o[1], backend)


def _an_output_and_what_saves_it(x):
    t = x * 2 + 1
    return t, t.logsumexp(0)  # logsumexp saves t (and so does the graph's node); t's own backward never reads it


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", [0, 1], ids=["from_the_output", "through_what_saved_it"])
def test_writing_an_output_that_an_op_on_another_outputs_path_saved(backend, loss):
    # eager: a backward from t alone is fine, one through logsumexp raises; the node unpacks t either way
    _assert_as_eager(_an_output_and_what_saves_it, [(3, 4)], _clamp_first, lambda o: o[loss].sum(), backend)


def _an_input_one_output_reads(h, w):
    v = w.sin()  # one computation: both outputs read v
    return h * v, v.relu()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic", [False, None], ids=["static", "sizes_that_change"])
def test_an_input_only_an_unreached_output_reads_keeps_its_history_unvisited(backend, dynamic):
    # one autograd node for the graph would give h a gradient (None, from the gate) whenever v.relu() gets one,
    # and autograd then runs h's history: exp's backward, which reads h, written since. At the second size the
    # graph has a symbolic size, and the value passed between its parts (v) a symbolic shape.
    def run(graph, n):
        leaf, w = _leaves((n, 4), (n, 4))
        h = leaf.exp()  # eager's exp saves its result, h
        _, kept = graph(h, w)
        h.add_(1)  # eager allows it: exp's backward never runs
        kept.sum().backward()
        return leaf.grad, w.grad

    compiled = framejit.compile(_an_input_one_output_reads, backend=backend, dynamic=dynamic)
    for n in (3, 5, 6):
        want = run(_an_input_one_output_reads, n)
        got = run(compiled, n)
        assert got[0] is None and want[0] is None
        torch.testing.assert_close(got[1], want[1])


def _recomputable_from_its_input(x):
    return torch.maximum(x + 2 * x, x + 1.5)  # eager saves the two sums; a min-cut partitioner saves x


def _abs_input(outputs, args):
    args[0].abs_()


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_an_input_the_partitioner_saved_where_eager_saved_none_of_it(backend):
    _assert_as_eager(_recomputable_from_its_input, [(3, 4)], _abs_input, lambda o: o.sum(), backend)


def _loss_and_logits(x, w):
    logits = (x @ w).relu()
    return logits, logits.pow(2).mean()


def _two_heads(x, w):
    h = (x @ w).relu()
    return h.sum(1), h.pow(2).mean()


@pytest.mark.parametrize(
    "fn, parts, history",
    [
        (_loss_and_logits, 1, False),
        (_two_heads, 1, False),
        (_an_output_another_output_saves, 1, True),
        (_an_input_one_output_reads, 3, True),
    ],
)
def test_a_graph_splits_only_where_an_input_with_a_history_feeds_some_outputs(fn, parts, history):
    recorder = CompilerRecorder()
    x, w = torch.randn(3, 4), torch.randn(4, 4, requires_grad=True)
    if history:
        x, w = torch.randn(3, 4, requires_grad=True).exp(), torch.randn(4, requires_grad=True)
    compiled = framejit.compile(fn, backend=aot_autograd(fw_compiler=recorder.fw, bw_compiler=recorder.bw))
    for got, want in zip(compiled(x, w), fn(x, w)):
        torch.testing.assert_close(got, want)
    assert len(recorder.forward) == parts


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_training_with_sizes_that_change(backend):
    # the size change makes the graph's sizes symbolic; the fake batch_norm then moves the version of the running
    # statistics it saved, which eager's kernel does not: that was taken for a write after the save (also with an
    # in-place ReLU after it, which gives the fake output another autograd node: a ResNet's block)
    def run(model, call):
        torch.manual_seed(0)
        grads = []
        for n in (3, 4, 5):
            x = torch.randn(n, 6, requires_grad=True)
            call(x).sum().backward()
            grads.append(x.grad)
        return grads + [model[1].running_mean.clone()] + [p.grad for p in model.parameters()]

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(inplace=True))
    eager_model = copy.deepcopy(model)
    for got, want in zip(run(model, framejit.compile(model, backend=backend)), run(eager_model, eager_model)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first_as_python", [False, True], ids=["in_a_graph", "as_python"])
def test_one_batch_norm_on_both_sides_of_a_break(backend, first_as_python):
    # the first batch_norm saves the running statistics (eager's does, and its kernel updates them without moving
    # their versions); the second graph's update is a copy into them, which moves the version: framejit's check
    # (the first in a graph) or eager's op's own (the first run as Python) took it for a write after the save
    norm = torch.nn.BatchNorm1d(6)
    first_norm = framejit.disable(lambda x: norm(x)) if first_as_python else norm

    def step(x, y):
        first = first_norm(x)
        print("", end="")  # a break
        return first * norm(y)

    eager_norm = copy.deepcopy(norm)
    leaves = _leaves((3, 6), (3, 6))
    step(*[leaf.clone() for leaf in leaves]).sum().backward()
    want = [leaf.grad for leaf in leaves] + [p.grad for p in norm.parameters()] + [norm.running_mean.clone()]
    norm.load_state_dict(eager_norm.state_dict())
    norm.zero_grad()
    leaves = _leaves((3, 6), (3, 6))
    framejit.compile(step, backend=backend)(*[leaf.clone() for leaf in leaves]).sum().backward()
    got = [leaf.grad for leaf in leaves] + [p.grad for p in norm.parameters()] + [norm.running_mean.clone()]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_value_computed_before_a_write_does_not_depend_on_what_the_write_reads():
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(x, n):
        v = x.sin()
        m = v * 2  # before the write
        v.mul_(n.sum())
        return m, v

    framejit.compile(fn, backend=keep)(torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True))
    deps, _ = output_dependencies(graphs[0].graph)
    assert deps == [frozenset({0}), frozenset({0, 1})]


def _saving_op_on_every_path(x):
    h = x.exp()  # saves its result, and leads to both outputs: a second backward raises in eager too
    return h * 2, h.sum()


def _adds_then_a_save(x):
    g = x + 1  # leads to both outputs, saving nothing
    return g, g.sin()


@pytest.mark.parametrize("fn, parts", [(_loss_and_logits, 1), (_saving_op_on_every_path, 1), (_adds_then_a_save, 2)])
def test_a_graph_splits_where_a_second_backward_would_fail_only_compiled(fn, parts):
    recorder = CompilerRecorder()
    compiled = framejit.compile(fn, backend=aot_autograd(fw_compiler=recorder.fw, bw_compiler=recorder.bw))
    args = (torch.randn(3, 4, requires_grad=True),) + (
        (torch.randn(4, 4, requires_grad=True),) if fn is _loss_and_logits else ()
    )
    for got, want in zip(compiled(*args), fn(*args)):
        torch.testing.assert_close(got, want)
    assert len(recorder.forward) == parts


def _written_under_no_grad(x, y):
    r = y / y * 0.5
    with torch.no_grad():
        r += 1  # eager keeps r's history: a write without grad does not detach
    return r * x


def _view_written_under_no_grad(x, y):
    r = (x * y).exp()
    with torch.no_grad():
        r[0].zero_()
    return r, r.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_written_under_no_grad, _view_written_under_no_grad])
def test_a_value_written_under_no_grad_keeps_its_history(backend, fn):
    # AOTAutograd's functional graph computes the written value without grad, and its output came back
    # detached: y.grad was None (fuzz 6674 of seed 2100000). The graph runs as its torch ops instead.
    def loss(outputs):
        return outputs.sum() if isinstance(outputs, torch.Tensor) else outputs[1]

    _assert_as_eager(fn, [(3, 4), (4,)], lambda outputs, args: None, loss, backend)
    compiled = framejit.compile(fn, backend=backend)
    out = compiled(*_leaves((3, 4), (4,)))
    assert all(o.requires_grad for o in (out if isinstance(out, tuple) else (out,)))


def _writes_with_a_value_no_later_op_reads(x, y):
    p = torch.nn.functional.normalize(y, dim=-1)
    r = p.reshape(-1) * 2.0
    b = x - 0.25
    p.mul_(b.norm())  # keeps the ops touching p in one part, which takes b from the part computing it
    return r, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_part_takes_a_value_none_of_its_outputs_depends_on_detached(backend):
    # x has a history whose backward raises (maximum saved x, written since); eager's backward from r never
    # reaches it. The part computing r took b from another part, and its backward ran that part's and x's
    # history (fuzz 274 of seed 400000)
    def grads(fn):
        torch.manual_seed(0)
        lx, ly = torch.randn(3, 6, requires_grad=True), torch.randn(6, requires_grad=True)
        x = lx.clone()
        x += torch.maximum(x, ly)
        r, b = fn(x, ly.clone())
        r.sum().backward()
        return lx.grad, ly.grad

    want = grads(_writes_with_a_value_no_later_op_reads)
    got = grads(framejit.compile(_writes_with_a_value_no_later_op_reads, backend=backend))
    assert want[0] is None and got[0] is None
    torch.testing.assert_close(got[1], want[1])


G_W = torch.randn(8, 8)


def _only_an_item_at_a_break(y):
    t = y / torch.zeros(8)  # inf: its backward gives inf
    torch.minimum(t.sum(0, keepdim=True), G_W).amax().item()  # an output of the graph only item() reads
    return t


def _only_a_float_at_a_break(y):
    t = y / torch.zeros(8)
    print(float(torch.minimum(t.sum(0, keepdim=True), G_W).amax()) > 0)  # float() warns: it comes back requiring grad
    return t


def _only_a_condition_at_a_break(y):
    t = y / torch.zeros(8)
    if t.sum(0).amax():
        return t
    return t * 2


def _read_and_kept(y):
    t = y * 2
    m = torch.minimum(t.sum(0, keepdim=True), G_W).amax()
    m.item()
    return t, m  # m is kept: it stays differentiable, as the backward needs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn", [_only_an_item_at_a_break, _only_a_float_at_a_break, _only_a_condition_at_a_break, _read_and_kept]
)
def test_an_output_a_break_only_reads_the_data_of_gets_no_gradient(fn, backend):
    # returned as it is, the graph's node got a zero gradient for it, and 0 x inf made y's gradient NaN where
    # eager's is inf (fuzz 7343 of seed 2200000); the break's code only reads its value, so it comes back
    # detached (a leaf that requires grad, as eager's value does)
    def loss(outputs):  # (m kept and differentiated: its gradient flows as eager's)
        return outputs.sum() if isinstance(outputs, torch.Tensor) else outputs[0].sum() + outputs[1]

    _assert_as_eager(fn, [(3, 8)], lambda outputs, args: None, loss, backend)
    if fn is _read_and_kept:
        _, m = framejit.compile(fn, backend=backend)(torch.randn(3, 8, requires_grad=True))
        assert m.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_in_eval_then_train_mode_in_one_graph(backend):
    # the eval-mode call saves the running statistics, the train-mode call after it writes them, which eager's
    # kernel does without moving their version: the saved-version check must note the versions eager leaves, not
    # those of the compiled graph's copy into them (fuzz 2165 of seed 2900000)
    def run(compiled):
        torch.manual_seed(0)
        norm = torch.nn.BatchNorm1d(4)

        def step(x):
            out = x
            for train in (False, True, False):
                out = norm.train(train)(out) - x
            return out

        fn = framejit.compile(step, backend=backend) if compiled else step
        x = torch.randn(3, 4, requires_grad=True)
        for _ in range(2):
            fn(x).sum().backward()
        return x.grad, norm.weight.grad, norm.running_mean, norm.running_mean._version

    want = run(False)
    got = run(True)
    for g, w in zip(got[:3], want[:3]):
        torch.testing.assert_close(g, w)
    assert got[3] == want[3]
