"""DTensor under framejit on 2 gloo ranks: DTensor arguments are graph inputs (a fake DTensor each), the methods
that take a mesh and placements (redistribute, to_local, full_tensor, DTensor.from_local) are graph ops with those
baked in, so each program is one graph, as under torch.compile, under eager, aot_eager and inductor; results and
gradients equal eager's; another placement recompiles; a tensor-parallel MLP compiles against eager."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend
from tests.distributed.ranks import WORLD_SIZE, two_rank_tests

pytestmark = pytest.mark.slow  # (processes on 2 ranks: tens of seconds per module)


def _programs(mesh):
    def redistribute(d, x):
        return d.redistribute(mesh, [Replicate()]).to_local() * x.sin()

    def full(d, x):
        return (d * 2).full_tensor() * x.cos()

    def made_here(d, x):
        rows = x[:, d.to_local().shape[0] * 0 : 3]  # (a local 4 x 3 block)
        return DTensor.from_local(rows + 1, mesh, [Shard(1)]).full_tensor().cos() * d.full_tensor()

    return redistribute, full, made_here


def _args(mesh, rank, requires_grad=False):
    torch.manual_seed(0)
    d = distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)]).requires_grad_(requires_grad)
    return d, (torch.randn(4, 6) + rank).requires_grad_(requires_grad)


def check_dtensor_programs_are_one_graph_equal_to_eager_as_torch_compile(rank: int) -> None:
    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    for fn in _programs(mesh):
        expected = fn(*_args(mesh, rank))
        for backend in ("eager", "aot_eager", "inductor"):
            framejit.reset()
            counter = CompileCounterWithBackend(backend)
            got = framejit.compile(fn, backend=counter, fullgraph=True)(*_args(mesh, rank))
            torch.testing.assert_close(got, expected)
            assert counter.frame_count == 1, (fn.__name__, backend)
        seen: list[type] = []

        def inputs(gm, example_inputs):
            seen.extend(type(x) for x in example_inputs)
            return gm.forward

        framejit.compile(fn, backend=inputs)(*_args(mesh, rank))
        assert DTensor in seen, (fn.__name__, seen)
        theirs = CompileCounter()
        torch._dynamo.reset()
        torch.compile(fn, backend=theirs)(*_args(mesh, rank))
        assert theirs.frame_count == 1, fn.__name__


def check_gradients_equal_eager_under_aot_eager(rank: int) -> None:
    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    for fn in _programs(mesh):
        framejit.reset()
        eager, compiled = _args(mesh, rank, True), _args(mesh, rank, True)
        fn(*eager).sum().backward()
        framejit.compile(fn, backend="aot_eager", fullgraph=True)(*compiled).sum().backward()
        for e, c in zip(eager, compiled):
            assert type(c.grad) is type(e.grad), fn.__name__
            torch.testing.assert_close(c.grad, e.grad)


def check_another_placement_recompiles(rank: int) -> None:
    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    counter, failures = CompileCounter(), []
    fn = framejit.optimize(counter, guard_fail_fn=failures.append)(lambda d: d.to_local() * 2)
    x = torch.randn(4, 6)
    for placement, n in ((Shard(0), 1), (Shard(0), 1), (Shard(1), 2), (Replicate(), 3)):
        d = distribute_tensor(x, mesh, [placement])
        torch.testing.assert_close(fn(d), d.to_local() * 2)
        assert counter.frame_count == n, placement
    assert "Replicate()" in failures[-1].reason, failures[-1].reason


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(6, 8), torch.nn.Linear(8, 6)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) * 2


def check_tensor_parallel_mlp_equals_eager(rank: int) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (WORLD_SIZE,))

    def mlp():
        torch.manual_seed(0)
        return parallelize_module(MLP(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    eager, compiled = mlp(), mlp()
    x = torch.randn(3, 6)
    counter = CompileCounterWithBackend("aot_eager")
    report = framejit.explain(mlp())(x)
    opt = framejit.compile(compiled, backend=counter)
    for _ in range(2):
        expected, got = eager(x), opt(x)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(q.grad.full_tensor(), p.grad.full_tensor(), msg=name)
    theirs = CompileCounter()
    torch._dynamo.reset()
    torch.compile(mlp(), backend=theirs)(x)
    assert counter.frame_count == theirs.frame_count, (counter.frame_count, theirs.frame_count, str(report))


results, test_on_two_ranks = two_rank_tests(__name__)
