"""framejit.mark_unbacked, as torch._dynamo.mark_unbacked: the dim is an unbacked symbol from the first compile (no
size hint in the trace, so no 0/1 specialisation and no recompile for another size); code that needs its value is a
data-dependent graph break."""

import pytest
import torch

import framejit
from framejit.shapes import is_symbolic
from framejit.testing import CompileCounter, CompileCounterWithBackend, same

from tests.helpers import line_of, torch_compile_side_by_side


def _reduce(x, w):
    return (x * 2).sum(0) + w


def _marked(*shape, dims=0):
    x = torch.randn(*shape)
    framejit.mark_unbacked(x, dims)
    return x


def test_one_compile_for_every_size_zero_and_one_included():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_reduce)
    w = torch.randn(3)
    for n in (5, 1, 0, 7):
        x = _marked(n, 3)
        assert same(f(x, w), _reduce(x, w))
    assert cnt.frame_count == 1
    (placeholder, *_) = [n for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    size = placeholder.meta["example_value"].shape[0]
    assert is_symbolic(size) and str(size).startswith("u"), size
    assert size.node.hint is None, "unbacked: the trace has no size for it"


def test_a_size_of_one_at_the_first_compile_is_not_specialised():
    """mark_dynamic would make a size of 1 a constant; mark_unbacked does not."""
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_reduce)
    w = torch.randn(3)
    for n in (1, 4):
        x = _marked(n, 3)
        assert same(f(x, w), _reduce(x, w))
    assert cnt.frame_count == 1


def test_same_graph_count_as_torch_compile():
    ours, theirs = CompileCounter(), CompileCounter()
    w = torch.randn(3)
    with torch_compile_side_by_side():
        for n in (1, 0, 6):
            x = _marked(n, 3)
            torch._dynamo.decorators.mark_unbacked(x, 0)
            assert same(framejit.optimize(ours)(_reduce)(x, w), torch.compile(_reduce, backend=theirs)(x, w))
    assert ours.frame_count == theirs.frame_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_backends_compile_the_unbacked_graph_once(backend):
    cnt = CompileCounterWithBackend(backend)
    f = framejit.optimize(cnt)(_reduce)
    w = torch.randn(3)
    for n in (4, 0, 1, 9):
        x = _marked(n, 3)
        assert same(f(x, w), _reduce(x, w))
    assert cnt.frame_count == 1


def _branch(x):
    if x.shape[0] > 2:
        return x + 1
    return x - 1


def test_a_branch_on_the_size_is_a_data_dependent_graph_break():
    x = _marked(4, 3)
    assert same(framejit.optimize(CompileCounter())(_branch)(x), x + 1)
    y = _marked(1, 3)
    assert same(framejit.optimize(CompileCounter())(_branch)(y), y - 1)
    (reason,) = framejit.explain(_branch)(_marked(4, 3)).break_reasons
    assert "u0 > 2" in reason.reason and "unbacked size (data-dependent)" in reason.reason
    assert reason.user_stack[-1].lineno == line_of(_branch, "if x.shape[0] > 2")
    with pytest.raises(framejit.exc.Unsupported, match="unbacked size"):
        framejit.compile(_branch, backend="eager", fullgraph=True)(_marked(4, 3))


def test_guards_still_check_the_other_dims():
    cnt = CompileCounter()
    f = framejit.optimize(cnt)(_reduce)
    for shape in ((4, 3), (2, 5), (7, 5)):
        x, w = _marked(*shape), torch.randn(shape[1])
        assert same(f(x, w), _reduce(x, w))
    assert cnt.frame_count == 2, "a new size of the unmarked dim recompiles; the marked one never does"


def test_misuse_is_an_error():
    with pytest.raises(TypeError, match="framejit.mark_unbacked expects a tensor"):
        framejit.mark_unbacked([1, 2], 0)
    with pytest.raises(IndexError, match="framejit.mark_unbacked: dim 2 is out of range"):
        framejit.mark_unbacked(torch.randn(2, 2), 2)
