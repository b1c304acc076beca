"""A compiled graph's outputs come back laid out in memory as eager's ops lay them out
(as_eager/output_layouts.py): a program that reads the layout, or views the output, does what it does eagerly."""

import pytest
import torch

import framejit
from framejit.as_eager.output_layouts import dim_order

BACKENDS = ["aot_eager", "inductor", "onnxrt"]
# (a backend that runs the graph as its torch ops instead of compiling it warns: here that fails the test)
pytestmark = pytest.mark.filterwarnings("error::framejit.exc.BackendFallbackWarning")


def written_transposed(x):
    t = x.tanh().transpose(0, 1) * 0.5
    t.masked_fill_(t > 0, 0)  # (its functional form, masked_fill, returns a contiguous tensor)
    return t


def channels_last_sum(x):
    return x.contiguous(memory_format=torch.channels_last) + 1


def _layout(t):
    return t.shape, t.stride(), t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, shape", [(written_transposed, (3, 8)), (channels_last_sum, (2, 3, 4, 5))])
def test_outputs_come_back_in_eagers_layout(backend, fn, shape):
    if backend == "onnxrt":
        pytest.importorskip("onnxruntime")
    compiled = framejit.compile(fn, backend=backend)
    for _ in range(3):
        x = torch.randn(*shape)
        want, got = fn(x), compiled(x)
        assert _layout(got) == _layout(want)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_view_of_the_output_fails_or_works_as_in_eager(backend):
    def program(x):
        t = written_transposed(x)
        return t.view(-1)  # (eager: the output is transposed, so this raises)

    with pytest.raises(RuntimeError, match="view size is not compatible"):
        program(torch.randn(3, 8))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        framejit.compile(program, backend=backend)(torch.randn(3, 8))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_layout_copy_passes_gradients(backend):
    def program(x):
        t = x.transpose(0, 1) * x.transpose(0, 1)  # (saves x for backward)
        t.masked_fill_(t > 1, 0)  # (its functional form returns a contiguous tensor)
        return t

    weights = torch.arange(24.0).view(8, 3)
    grads = []
    for fn in (program, framejit.compile(program, backend=backend)):
        torch.manual_seed(0)
        x = torch.randn(3, 8, requires_grad=True)
        out = fn(x)
        assert out.stride() == (1, 8) and out.requires_grad
        (out * weights).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0])


def test_dim_order_names_only_dense_layouts_other_than_contiguous():
    assert dim_order(torch.zeros(3, 4)) is None
    assert dim_order(torch.zeros(3, 4).t()) == (1, 0)
    assert dim_order(torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)) == (0, 2, 3, 1)
    assert dim_order(torch.zeros(3, 4)[:, ::2]) is None  # not dense: no layout to copy into
    assert dim_order(torch.zeros(1, 4).t()) is None  # (a dim of one: contiguous all the same)
    assert dim_order(torch.zeros(4).expand(3, 4)) is None
