"""Dynamic shapes: symbolic sizes, the dynamic= policy, mark_dynamic / mark_static, shape guards.

Every test is differential (compiled results equal eager's on each size) and counts compiles; the expected
counts are torch.compile's on the same sequences of sizes (automatic dynamic: static first, then the dims that
changed)."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter


def reshape_and_slice(x, y):
    b, n = x.shape
    h = x.view(b, -1, 2) * 2
    z = h.sum(-1) + y[: n // 2]
    return z.relu(), x.size(0) * 3


def inputs(b, n, requires_grad=False):
    torch.manual_seed(b * 100 + n)
    return torch.randn(b, n, requires_grad=requires_grad), torch.randn(n)


def run_sizes(fn, sizes, **compile_kwargs):
    cnt = CompileCounter()
    compiled = framejit.compile(fn, backend=cnt, **compile_kwargs)
    for size in sizes:
        args = inputs(*size)
        torch.testing.assert_close(compiled(*args), fn(*args))
    return cnt.frame_count


SIZES = [(3, 8), (4, 8), (5, 8), (6, 10), (7, 12), (9, 12)]


@pytest.mark.parametrize(
    "dynamic, sizes, compiles",
    [
        (True, SIZES, 1),  # symbolic from the start
        (False, SIZES, 6),  # every new size compiles
        (None, [(3, 8), (4, 8), (5, 8), (6, 8)], 2),  # automatic: dim 0 changed once, then it is symbolic
        (None, SIZES, 3),  # ... and dim 1 when it changes too
        (None, [(3, 8)] * 4, 1),
    ],
)
def test_the_policy_decides_how_often_new_sizes_compile(dynamic, sizes, compiles):
    assert run_sizes(reshape_and_slice, sizes, dynamic=dynamic) == compiles


def test_config_dynamic_shapes_means_dynamic_everywhere():
    with framejit.config.patch(dynamic_shapes=True):
        assert run_sizes(reshape_and_slice, SIZES) == 1
    with framejit.config.patch(automatic_dynamic_shapes=False):
        assert run_sizes(reshape_and_slice, SIZES[:3]) == 3


def test_sizes_0_and_1_are_specialised():
    # a size of 1 broadcasts differently, so it is never symbolic (as in torch.compile)
    assert run_sizes(reshape_and_slice, [(1, 8), (3, 8), (4, 8)], dynamic=True) == 2


def branch_on_size(x):
    if x.shape[0] > 4:
        return x * 2
    return x - 1


def test_a_branch_on_a_size_is_a_guard_on_the_symbol():
    cnt = CompileCounter()
    compiled = framejit.compile(branch_on_size, backend=cnt, dynamic=True)
    for n in (2, 3, 4, 5, 6, 9, 3):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), branch_on_size(x))
    assert cnt.frame_count == 2  # one graph for n <= 4, one for n > 4


def loop_over_size(x):
    total = x.sum() * 0
    for i in range(x.shape[0]):  # range() needs the number: the size is specialised
        total = total + x[i].sum() * i
    return total


def test_a_size_the_code_needs_as_a_number_is_specialised():
    cnt = CompileCounter()
    compiled = framejit.compile(loop_over_size, backend=cnt, dynamic=True)
    for n in (3, 4, 3):
        x = torch.randn(n, 2)
        torch.testing.assert_close(compiled(x), loop_over_size(x))
    assert cnt.frame_count == 2


def test_mark_dynamic_makes_a_dim_symbolic_from_the_first_compile():
    cnt = CompileCounter()
    compiled = framejit.compile(reshape_and_slice, backend=cnt)
    for b in (3, 4, 5, 8):
        x, y = inputs(b, 8)
        framejit.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x, y), reshape_and_slice(x, y))
    assert cnt.frame_count == 1


def test_mark_static_keeps_a_dim_static_under_dynamic_true():
    cnt = CompileCounter()
    compiled = framejit.compile(reshape_and_slice, backend=cnt, dynamic=True)
    for b in (3, 4, 5):
        x, y = inputs(b, 8)
        framejit.mark_static(x)
        torch.testing.assert_close(compiled(x, y), reshape_and_slice(x, y))
    assert cnt.frame_count == 3


@pytest.mark.parametrize("bad", [3, [1.0], None])
def test_marking_a_non_tensor_is_a_clear_error(bad):
    with pytest.raises(TypeError, match="framejit.mark_dynamic expects a tensor, got"):
        framejit.mark_dynamic(bad, 0)


def test_marking_a_dim_out_of_range_is_a_clear_error():
    with pytest.raises(IndexError, match="dim 2 is out of range for a tensor of 2 dims"):
        framejit.mark_dynamic(torch.ones(2, 3), 2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_training_through_a_dynamic_graph_matches_eager(backend):
    compiled = framejit.compile(reshape_and_slice, backend=backend, dynamic=True)
    for size in SIZES[:4]:
        x, y = inputs(*size, requires_grad=True)
        z, _ = compiled(x, y)
        z.sum().backward()
        ex, ey = inputs(*size, requires_grad=True)
        ez, _ = reshape_and_slice(ex, ey)
        ez.sum().backward()
        torch.testing.assert_close(z, ez)
        torch.testing.assert_close(x.grad, ex.grad)


def test_inductor_compiles_one_kernel_for_every_size():
    compiles = []

    def counting_inductor(gm, example_inputs):
        compiles.append(gm)
        return framejit.lookup_backend("inductor")(gm, example_inputs)

    compiled = framejit.compile(reshape_and_slice, backend=counting_inductor, dynamic=True)
    for size in SIZES[:3]:
        args = inputs(*size)
        torch.testing.assert_close(compiled(*args), reshape_and_slice(*args))
    assert len(compiles) == 1


def test_size_arithmetic_is_in_the_graph_and_the_guards_are_readable():
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = framejit.compile(reshape_and_slice, backend=record, dynamic=True)
    compiled(*inputs(4, 8))
    (gm,) = graphs
    code = gm.code
    assert "size()" in code and "floordiv" in code or "//" in code, code
    failures = []
    compiled_branch = framejit.optimize(CompileCounter(), dynamic=True, guard_fail_fn=failures.append)(branch_on_size)
    compiled_branch(torch.randn(6))
    compiled_branch(torch.randn(3))
    (failure,) = failures
    assert "dynamic size" in failure.reason and "L['x'].size()[0]" in failure.reason, failure.reason


def test_automatic_dynamic_recompile_reason_names_the_size():
    failures = []
    compiled = framejit.optimize(CompileCounter(), guard_fail_fn=failures.append)(reshape_and_slice)
    compiled(*inputs(3, 8))
    compiled(*inputs(4, 8))
    (failure,) = failures
    assert "L['x']" in failure.reason and "shape" in failure.reason and "3" in failure.reason, failure.reason


def take_first(x, seq_len):
    return x[:, :seq_len] * seq_len


def test_an_int_argument_that_varies_becomes_symbolic():
    cnt = CompileCounter()
    compiled = framejit.compile(take_first, backend=cnt)
    x = torch.randn(2, 20)
    for n in (4, 5, 6, 9, 13):
        torch.testing.assert_close(compiled(x, n), take_first(x, n))
    assert cnt.frame_count == 2  # 4, then every other length
    assert [n.op for n in cnt.graphs[1].graph.nodes].count("placeholder") == 2, "seq_len is an input of the graph"


def numpy_step(x, n):
    # eager's results keep numpy's types: np.int64 / 2 is np.float64, n + 1 np.int64, n > 3 np.bool_
    return {"scaled": x * n, "half": n / 2, "next": n + 1, "big": n > 3, "n": n, "ones": torch.ones(n + 2)}


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_numpy_integer_argument_is_symbolic_from_the_first_call(backend):
    # as torch.compile: a program feeding np.int64 steps compiles once, 0 and 1 included (TorchDynamo's
    # test_unspec `test_no_recompilations`); the numbers reach Python as the numpy types eager gives
    import numpy as np

    cnt = CompileCounter()
    compiled = framejit.compile(
        numpy_step,
        backend=lambda gm, example_inputs: (
            cnt(gm, example_inputs) and framejit.backends.lookup_backend(backend)(gm, example_inputs)
        ),
    )
    x = torch.arange(12.0).view(6, 2)
    for n in [np.int64(i) for i in range(7)]:
        got, want = compiled(x, n), numpy_step(x, n)
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
        torch.testing.assert_close(got, want)
    assert cnt.frame_count == 1
    compiled(x, np.int32(2))  # another numpy type is another entry
    assert cnt.frame_count == 2
    rows = framejit.compile(lambda x, n: x[:n] * 2, backend=backend)
    for n in [np.int64(i) for i in (4, 2, 6, 5)]:  # (slices of 0 and 1 rows specialise, as sizes do)
        torch.testing.assert_close(rows(x, n), x[:n] * 2)


def numpy_builtins(x, n):
    return x + 1, abs(n), max(n, 3), min(n, 2), n**2, n % 3, float(n), int(n), n * 1.5, -n


def test_builtins_on_a_numpy_integer_keep_eagers_types():
    import numpy as np

    compiled = framejit.compile(numpy_builtins, backend="eager")
    for n in [np.int64(i) for i in (4, 5, -3, 1, 0, 8)]:
        got, want = compiled(torch.ones(2), n), numpy_builtins(torch.ones(2), n)
        assert [type(v) for v in got] == [type(v) for v in want]  # max(n, 3) is n itself, or 3
        torch.testing.assert_close(got, want)


def repeat_n(x, n):
    for _ in range(n):  # the loop needs the number: specialised, and checked by value
        x = x * 2
    return x


def test_an_int_argument_the_code_needs_as_a_number_is_checked_by_value():
    cnt = CompileCounter()
    compiled = framejit.compile(repeat_n, backend=cnt)
    x = torch.randn(3)
    for n in (2, 3, 4, 3, 2):
        torch.testing.assert_close(compiled(x, n), repeat_n(x, n))
    assert cnt.frame_count == 3


def data_dependent_sizes(x):
    positive = x[x > 0]
    return positive * 2 + positive.sum(), torch.nonzero(x), x.unique()


def item_feeds_a_size(x):
    n = x.sum().item()
    return torch.zeros(n) + 1, x * n


DATA = [torch.tensor([1.0, -2.0, 3.0]), torch.tensor([-1.0, -2.0, 3.0]), torch.tensor([5.0, 2.0, 3.0, 4.0])]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_data_dependent_sizes_stay_in_the_graph_under_fullgraph(backend):
    cnt = CompileCounter()
    compiled = framejit.compile(
        data_dependent_sizes,
        backend=framejit.testing.CompileCounterWithBackend(backend) if backend != "eager" else cnt,
        fullgraph=True,
    )
    for x in DATA:
        got, want = compiled(x), data_dependent_sizes(x)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    compiled = framejit.compile(item_feeds_a_size, backend="eager", fullgraph=True)
    for x in (torch.tensor([1, 2]), torch.tensor([3, 4])):
        got, want = compiled(x), item_feeds_a_size(x)
        assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_data_dependent_sizes_break_the_graph_elsewhere_with_the_reason():
    for fn, x in ((data_dependent_sizes, DATA[0]), (item_feeds_a_size, torch.tensor([1, 2]))):
        out = framejit.explain(fn)(x)
        assert out.graph_break_count >= 1
        assert "data-dependent" in out.break_reasons[0].reason, out.break_reasons[0].reason
        got, want = framejit.compile(fn, backend="eager")(x), fn(x)
        assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_a_number_read_out_of_a_tensor_and_needed_in_python_is_an_error_under_fullgraph():
    def needs_the_number(x):
        return [1] * int(x.sum().item())

    with pytest.raises(framejit.exc.Unsupported, match="data-dependent"):
        framejit.compile(needs_the_number, backend="eager", fullgraph=True)(torch.tensor([1, 2]))


def test_mark_dynamic_on_a_dim_the_code_specialises_is_an_error_under_fullgraph():
    x = torch.randn(3, 2)
    framejit.mark_dynamic(x, 0)
    with pytest.raises(
        framejit.exc.Unsupported,
        match=r"mark_dynamic\(L\['x'\], 0\) asked for a symbolic size, but "
        r"the code needs it to be 3",
    ):
        framejit.compile(loop_over_size, backend="eager", fullgraph=True)(x)
    # without fullgraph the size is specialised: right results, a recompile for another size
    cnt = CompileCounter()
    compiled = framejit.compile(loop_over_size, backend=cnt)
    for n in (3, 4):
        x = torch.randn(n, 2)
        framejit.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), loop_over_size(x))
    assert cnt.frame_count == 2


def test_mark_dynamic_range_is_guarded():
    cnt = CompileCounter()
    compiled = framejit.compile(reshape_and_slice, backend=cnt)
    for b in (3, 4, 6, 5):
        x, y = inputs(b, 8)
        framejit.mark_dynamic(x, 0, min=2, max=6)
        torch.testing.assert_close(compiled(x, y), reshape_and_slice(x, y))
    assert cnt.frame_count == 1
    x, y = inputs(9, 8)
    framejit.mark_dynamic(x, 0, min=2, max=6)
    torch.testing.assert_close(compiled(x, y), reshape_and_slice(x, y))  # outside the range: runs as Python
    with pytest.raises(framejit.exc.Unsupported, match=r"mark_dynamic\(L\['x'\], 0, min=2, max=6\): the size is 9"):
        framejit.compile(reshape_and_slice, backend="eager", fullgraph=True)(x, y)


def _view_by_shape_after_a_branch(x, y, k, xs):
    if k > 1:
        torch.maximum(y, xs[0])
        x.clone()
        return y.view(*y.shape[:-1], 2, 3)
    return y


def test_a_size_known_again_after_being_symbolic_reaches_python_as_an_int():
    # automatic dynamic made the size symbolic, then a guard fixed it: `*y.shape[:-1]` (a call the trace breaks
    # at) got the SymInt itself as an argument, which the real op refuses
    compiled = framejit.compile(_view_by_shape_after_a_branch, backend="eager")
    for n, k in ((3, 1), (3, 1), (5, 2), (3, 2)):
        x, y = torch.randn(n, 6), torch.randn(n, 6)
        torch.testing.assert_close(compiled(x, y, k, [x, y]), _view_by_shape_after_a_branch(x, y, k, [x, y]))


def _pads_to_a_multiple_of_8(x):
    n = x.shape[1]
    return torch.nn.functional.pad(x, (0, (8 - n % 8) % 8)) * 2


def _longest_side(x):
    n = max(x.shape[0], x.shape[1])  # builtin max of sizes: torch.sym_max, no guard
    return x.new_zeros(n) + x.sum()


def _plus_its_length(x):
    return x + len(x) + x.__len__()  # len() of a tensor with a symbolic first dim: a size node, not a constant


@pytest.mark.parametrize("fn", [_pads_to_a_multiple_of_8, _longest_side, _plus_its_length])
def test_symbolic_sizes_reach_pad_and_builtin_max_without_a_break(fn, caplog):
    cnt = CompileCounter()
    compiled = framejit.compile(fn, backend=cnt, dynamic=True, fullgraph=True)
    for shape in [(2, 5), (6, 3), (4, 7), (9, 12)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1
    assert "ran as Python" not in caplog.text  # the graph itself ran, not a fallback after it raised


class _Window(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.width = 3

    def forward(self, x):
        return x[:, : self.width] * 2


def test_a_modules_int_attribute_stays_static_under_dynamic_true():
    # as in TorchDynamo: sizes vary, a module's configuration does not (T5's bucket counts made its position
    # bucketing break the graph when they were symbolic)
    m = _Window()
    cnt = CompileCounter()
    compiled = framejit.compile(m, backend=cnt, dynamic=True)
    for n in (4, 5, 6):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 1
    placeholders = [n.target for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    assert not any("width" in str(p) for p in placeholders), placeholders
    m.width = 5  # guarded by value: a new graph
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 2


class _Stepper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.step = 0

    def forward(self, x):
        self.step += 1  # a counter the module keeps: it changes at every call
        if self.step % 5 == 0:
            return self.lin(x) * 0
        return self.lin(x) + self.step


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_modules_int_attribute_that_changes_becomes_symbolic(dynamic):
    # automatic dynamic, as for an int argument: static at first (a module's configuration never changes), then
    # symbolic once it changed, so a counter does not compile at every call (and fall back past the cache limit)
    eager, m = _Stepper(), _Stepper()
    m.load_state_dict(eager.state_dict())
    cnt = CompileCounter()
    compiled = framejit.compile(m, backend=cnt, dynamic=dynamic)
    x = torch.randn(2, 4)
    for _ in range(20):
        torch.testing.assert_close(compiled(x), eager(x))
    assert m.step == eager.step == 20
    assert cnt.frame_count <= 5  # 0 and 1 are specialised, then `step % 5 == 0` once, not one per call


@framejit.disable
def _opaque(t):
    return None


def _writes_through_a_view_after_a_break(x, w):
    t = x.unsqueeze(0)
    with torch.no_grad():
        if w.max() > 1:  # a break: the next graph takes t, a view of x, and x itself
            t.zero_()
            _opaque(x[-1])
    return x * 2


def test_a_view_input_and_its_base_in_one_dynamic_graph():
    # the view's fake was made with symbols of its own, unrelated to its base's: AOTAutograd could not trace it
    compiled = framejit.compile(_writes_through_a_view_after_a_break, backend="aot_eager")
    w = torch.full((4,), 2.0)
    for n in (3, 3, 5, 6):  # automatic dynamic: the third call compiles with the first dim symbolic
        x0 = torch.randn(n, 4, requires_grad=True)
        x1 = x0.detach().clone().requires_grad_()
        torch.testing.assert_close(compiled(x0 * 1, w), _writes_through_a_view_after_a_break(x1 * 1, w))


class _Config:
    image_size = (8, 8)
    heads = 2


class _PatchCheck(torch.nn.Module):
    """ViT's size check and a config int, under dynamic=True."""

    def __init__(self):
        super().__init__()
        self.config = _Config()

    def forward(self, x):
        b, c, h, w = x.shape
        if h != self.config.image_size[0] or w != self.config.image_size[1]:
            raise ValueError("the image size does not match the model's")
        return x.view(b, self.config.heads, -1).sum(-1) * 2


def test_square_dims_share_a_symbol_and_a_fixed_size_folds():
    # duck sizing, as in torch.compile: h and w (both 8) are one symbol; `h != 8` fixes it, and `w != 8` is then
    # arithmetic on a known number, not an op to refuse (ViT broke its graph there). A config's int stays a
    # constant under dynamic=True (only one that changed between compiles becomes symbolic)
    m = _PatchCheck()
    cnt = CompileCounter()
    compiled = framejit.compile(m, backend=cnt, dynamic=True, fullgraph=True)
    for b in (2, 3, 5):
        x = torch.randn(b, 4, 8, 8)
        torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 1
    placeholders = [n.target for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    assert not any("heads" in str(p) for p in placeholders), placeholders


def _mean_of_rows(x):
    return x.sum(0) / x.shape[1]


def test_duck_sized_dims_that_stop_being_equal_compile_once_more():
    cnt = CompileCounter()
    compiled = framejit.compile(_mean_of_rows, backend=cnt, dynamic=True)
    for shape in [(4, 4), (6, 6), (4, 6), (5, 7)]:  # equal dims share a symbol; the first unequal pair recompiles
        x = torch.randn(*shape)
        torch.testing.assert_close(compiled(x), _mean_of_rows(x))
    assert cnt.frame_count == 2


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a):
        self.calls += 1
        return a * 2


def _counted_loop(counter, x):
    counter(x)
    j = 0
    while j < 4:
        j += 1
        x.abs().sqrt().sum().item()  # a break: the loop runs in continuations, j and counter.calls symbolic there
        counter(x / 3)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_two_symbolic_ints_of_one_value_stay_two_in_the_backend(backend):
    # the loop's continuation compiled with counter.calls and j both 3: AOTAutograd, given the ints as examples,
    # gave them one symbol (duck sizing), and its graph then wrote j + 1 into the counter on later calls (fuzz 8655
    # of seed 2000000). Backends get the trace's symbols as the examples
    seen = []

    def recording(gm, example_inputs):
        seen.extend(v for v in example_inputs if not isinstance(v, torch.Tensor))
        return framejit.backends.lookup_backend(backend)(gm, example_inputs)

    eager, compiled = _Counting(), _Counting()
    fn = framejit.compile(_counted_loop, backend=recording)
    x = torch.randn(3, 6, requires_grad=True)
    for _ in range(3):
        _counted_loop(eager, x)
        fn(compiled, x)
        assert compiled.calls == eager.calls
    assert seen and all(isinstance(v, torch.SymInt) for v in seen)
