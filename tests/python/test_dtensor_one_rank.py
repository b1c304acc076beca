"""DTensor traced on a one-rank gloo group in this process (the fast tier; tests/distributed/test_dtensor.py runs
2 ranks): DTensor arguments are graph inputs, to_local/redistribute/full_tensor/from_local are one graph under
eager and aot_eager, as torch.compile's, equal to eager with gradients; placements and meshes are guarded; what
is not traced breaks naming DTensor and the attribute."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import framejit
from framejit.testing import CompileCounter

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")


@pytest.fixture(scope="module")
def mesh():
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def programs(mesh):
    from torch.distributed.tensor import DTensor, Replicate, Shard

    def redistribute(d, x):
        return d.redistribute(mesh, [Replicate()]).to_local() * x.sin()

    def full(d, x):
        return (d * 2).full_tensor() * x.cos()

    def made_here(d, t):
        local = DTensor.from_local(t, d.device_mesh, [Shard(1)]).full_tensor().cos()
        return local * d.to_local(grad_placements=d.placements) if d.placements[0].is_shard() else local

    return redistribute, full, made_here


def args(mesh, requires_grad=False):
    from torch.distributed.tensor import Shard, distribute_tensor

    torch.manual_seed(0)
    d = distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)])
    return d.requires_grad_(requires_grad), torch.randn(4, 6, requires_grad=requires_grad)


def test_dtensor_programs_are_one_graph_with_dtensor_inputs_as_torch_compile(mesh):
    from torch.distributed.tensor import DTensor

    for fn in programs(mesh):
        seen: list[type] = []

        def backend(gm, example_inputs):
            seen.extend(type(x) for x in example_inputs)
            return gm.forward

        torch.testing.assert_close(framejit.compile(fn, backend=backend, fullgraph=True)(*args(mesh)), fn(*args(mesh)))
        assert sorted(seen, key=str) == [torch.Tensor, DTensor], (fn.__name__, seen)
        ours, theirs = CompileCounter(), CompileCounter()
        framejit.compile(fn, backend=ours)(*args(mesh))
        torch._dynamo.reset()
        torch.compile(fn, backend=theirs)(*args(mesh))
        assert ours.frame_count == theirs.frame_count == 1, fn.__name__


def test_gradients_through_dtensor_methods_equal_eager_under_aot_eager(mesh):
    for fn in programs(mesh):
        framejit.reset()
        eager, compiled = args(mesh, requires_grad=True), args(mesh, requires_grad=True)
        fn(*eager).sum().backward()
        framejit.compile(fn, backend="aot_eager", fullgraph=True)(*compiled).sum().backward()
        for e, c in zip(eager, compiled):
            assert type(c.grad) is type(e.grad), fn.__name__
            torch.testing.assert_close(c.grad, e.grad)


def test_another_placement_or_mesh_recompiles_naming_it(mesh):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    counter, failures = CompileCounter(), []
    fn = framejit.optimize(counter, guard_fail_fn=failures.append)(lambda d: d.to_local() + 1)
    x = torch.randn(4, 6)
    fn(distribute_tensor(x, mesh, [Shard(0)]))
    fn(distribute_tensor(x, init_device_mesh("cpu", (1,)), [Shard(0)]))  # an equal mesh: no recompile
    assert counter.frame_count == 1
    torch.testing.assert_close(fn(distribute_tensor(x, mesh, [Replicate()])), x + 1)
    assert counter.frame_count == 2 and "Replicate()" in failures[-1].reason, failures[-1].reason
    named = init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
    fn(distribute_tensor(x, named, [Replicate()]))
    assert counter.frame_count == 3 and "L['d'].device_mesh" in failures[-1].reason, failures[-1].reason


def test_a_dtensor_attribute_not_traced_breaks_naming_it_and_matches_eager(mesh):
    def fn(d):
        return d.to_local() * 2, d._spec.num_shards

    d, _ = args(mesh)
    for e, g in zip(fn(d), framejit.compile(fn, backend=CompileCounter())(d)):
        torch.testing.assert_close(g, e)
    reasons = [b.reason for b in framejit.explain(fn)(d).break_reasons]
    assert any("torch.distributed.tensor.DTensor._spec" in r for r in reasons), reasons


def test_a_graph_that_communicates_and_raises_does_not_run_again(mesh):
    """A graph that fails at run time after a collective raises, as torch.compile's: run again as Python (what
    framejit does for other graphs), it would communicate twice where the other ranks do not."""
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def fn(x, idx):
        return funcol.all_reduce(x, "sum", group)[idx] * 2

    compiled = framejit.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(3), torch.tensor([2])), fn(torch.ones(3), torch.tensor([2])))
    collectives = []
    for run in (fn, compiled):
        before = group._get_sequence_number_for_group()
        with pytest.raises(IndexError):
            run(torch.ones(3), torch.tensor([5]))
        collectives.append(group._get_sequence_number_for_group() - before)
    assert collectives == [1, 1]
