"""Dtypes eager's CPU kernels refuse where the meta kernels accept them: the compiled program raises eager's error
there, under a compiler too (variables/kernel_refusals.py); ops eager accepts still compile into one graph."""

import pytest
import torch
import torch.nn.functional as F

import framejit
from framejit.variables import kernel_refusals

LONG, BOOL, F64 = torch.long, torch.bool, torch.float64

REFUSED = {
    "sub_bool": lambda x: x.long() - (x > 0),
    "sub_python_bool": lambda x: (x * 2) - True,
    "isub_python_bool_into_long": lambda x: x.long().sub_(True),
    "mm_mixed": lambda x: x.double() @ x.t(),
    "linear_mixed": lambda x: F.linear(x.double(), x),
    "layer_norm_mixed": lambda x: F.layer_norm(x.double(), (4,), torch.ones(4), torch.zeros(4)),
    "round_long": lambda x: x.long().round(decimals=1),
    "abs_bool": lambda x: (x > 0).abs(),
    "softmax_long": lambda x: x.long().softmax(0),
    "argmax_bool": lambda x: (x > 0).argmax(),
    "topk_bool": lambda x: (x > 0).topk(2),
    "std_long": lambda x: x.long().std(),
    "index_put_mixed": lambda x: x.index_put_((torch.zeros(1, dtype=LONG),), torch.ones(1, dtype=F64)),
    "mul_float_into_long": lambda x: x.long().mul_(1.5),
}

ACCEPTED = {
    "floor_divide_long": lambda x: (x.long() + 3) // (x.long().abs() + 1),
    "remainder_long": lambda x: (x.long() + 5) % (x.long().abs() + 1),
    "index_long": lambda x: x[torch.tensor([2, 0])] * 2,
    "embedding": lambda x: F.embedding(torch.tensor([[0, 2]]), x) + 1,
    "where_bool": lambda x: torch.where(x > 0, x, -x),
    "keepdim_flag": lambda x: x.sum(-1, True) * 2,
    "cross_entropy": lambda x: F.cross_entropy(x, torch.tensor([0, 1, 2])),
}


def _outcome(fn, x):
    try:
        return ("returned", fn(x))
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e), str(e))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_op_eagers_kernel_refuses_raises_eagers_error_compiled(case, backend):
    fn = REFUSED[case]
    want = _outcome(fn, torch.randn(3, 4))
    assert want[0] == "raised"
    got = _outcome(framejit.compile(fn, backend=backend), torch.randn(3, 4))
    assert got == want


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_ops_eagers_kernels_accept_stay_in_one_graph(case):
    fn = ACCEPTED[case]
    x = torch.randn(3, 4)
    explained = framejit.explain(fn)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    torch.testing.assert_close(framejit.compile(fn, backend="inductor")(x), fn(x))


def test_ops_of_one_floating_dtype_run_no_sample(monkeypatch):
    runs = []
    original = kernel_refusals._run
    monkeypatch.setattr(kernel_refusals, "_run", lambda *a: runs.append(a) or original(*a))

    def model(x, w):
        return F.layer_norm(torch.relu(x @ w) * 2, (4,)).sum(-1, keepdim=True)

    framejit.compile(model, backend="eager")(torch.randn(3, 4), torch.randn(4, 4))
    assert runs == []
    with pytest.raises(RuntimeError):
        framejit.compile(REFUSED["sub_bool"], backend="eager")(torch.randn(3, 4))
    assert runs  # (the check does run where the dtypes differ)


def test_the_sample_run_leaves_the_random_generator_as_it_was():
    # (scaled_dot_product_attention draws its dropout's mask; a bool mask makes the dtypes differ)
    def attention(q, mask):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask > 0, dropout_p=0.5) + torch.rand(4, 8)

    q, mask = torch.randn(2, 4, 8), torch.randint(0, 2, (4, 4))
    torch.manual_seed(0)
    want = attention(q, mask)
    torch.manual_seed(0)
    got = framejit.compile(attention, backend="eager")(q, mask)
    torch.testing.assert_close(got, want)


def test_a_symbolic_size_in_an_index_stays_symbolic():
    # (a real op on a slice to a symbolic size would pin the symbol to its value: a compile for every length)
    from framejit.testing import CompileCounter

    positions = torch.arange(64).view(1, 64)

    def f(ids):
        return ids + positions[:, : ids.shape[1]]

    counter = CompileCounter()
    compiled = framejit.compile(f, backend=counter)
    for length in (8, 11, 13, 17):
        ids = torch.randint(0, 9, (2, length))
        torch.testing.assert_close(compiled(ids), f(ids))
    assert counter.frame_count == 2


@pytest.mark.parametrize("case", ["sub_python_bool", "mm_mixed", "layer_norm_mixed"])
def test_refused_dtypes_are_found_at_symbolic_sizes_too(case):
    # (the sample takes this call's sizes, read from the symbols' hints without a guard)
    fn = REFUSED[case]
    compiled = framejit.compile(fn, backend="inductor", dynamic=True)
    for rows in (3, 5):
        want = _outcome(fn, torch.randn(rows, 4))
        assert _outcome(compiled, torch.randn(rows, 4)) == want
