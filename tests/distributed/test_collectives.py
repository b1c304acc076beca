"""Collectives traced into the graph (the c10d in-place API and the functional collectives), on 2 gloo ranks:
each compiled function equals eager, is one graph under fullgraph=True, and its backward is right."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import framejit
from tests.distributed.ranks import two_rank_tests

pytestmark = pytest.mark.slow  # (processes on 2 ranks: tens of seconds per module)

BACKENDS = ("eager", "aot_eager")


def _same(expected, got) -> None:
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        if isinstance(e, torch.Tensor):
            e = e.wait() if isinstance(e, funcol.AsyncCollectiveTensor) else e
            assert type(g) is torch.Tensor, type(g)
            torch.testing.assert_close(g, e, rtol=0, atol=0)
        else:
            assert e == g


def _one_graph_each_backend(fn, make_input) -> None:
    """fn compiled under each backend with fullgraph=True equals eager (on a fresh input each: the collectives
    write into their arguments); one graph, no break."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # funcol's deprecated names, called eagerly
        x = make_input()
        expected = fn(x)
        report = framejit.explain(fn)(make_input())
        assert (report.graph_count, report.graph_break_count) == (1, 0), [b.reason for b in report.break_reasons]
        for backend in BACKENDS:
            framejit.reset()
            x_compiled = make_input()
            _same(expected, framejit.compile(fn, backend=backend, fullgraph=True)(x_compiled))
            torch.testing.assert_close(x_compiled, x, rtol=0, atol=0)  # the in-place writes to the argument too


def _rank_input(rank: int):
    return lambda: torch.arange(6.0).reshape(2, 3) * (rank + 1)


def check_inplace_all_reduce_and_rank_queries(rank: int) -> None:
    def fn(t):
        dist.all_reduce(t)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t * dist.get_world_size() + dist.get_rank()

    _one_graph_each_backend(fn, _rank_input(rank))


def check_inplace_gathers_scatters_broadcast(rank: int) -> None:
    def fn(t):
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t)
        whole = torch.empty(4, 3)
        dist.all_gather_into_tensor(whole, t)
        mine = torch.empty(2, 3)
        dist.reduce_scatter_tensor(mine, torch.cat([t, t * 2]))
        dist.broadcast(t, src=1)
        return torch.stack(parts), whole, mine, t

    _one_graph_each_backend(fn, _rank_input(rank))


def check_functional_collectives(rank: int) -> None:
    group = dist.group.WORLD

    def fn(t):
        summed = funcol.all_reduce(t, "sum", group)
        averaged = funcol.all_reduce(t, "avg", [0, 1])
        rows = funcol.all_gather_tensor(t, 0, group)
        cols = funcol.all_gather_single(t, 1, group)
        scattered = funcol.reduce_scatter_tensor(torch.cat([t, t]), "sum", 0, group)
        scattered_cols = funcol.reduce_scatter_single(torch.cat([t, t], dim=1), "max", 1, group)
        return funcol.wait_tensor(summed) + 1, averaged, rows, cols, scattered, scattered_cols

    _one_graph_each_backend(fn, _rank_input(rank))


def check_all_to_all_and_coalesced(rank: int) -> None:
    group = dist.group.WORLD

    def fn(t):
        even = funcol.all_to_all_single(t, None, None, group)
        # rank 0 sends 2 then 4 items, rank 1 sends 3 and 3: rank 0 gets 2 + 3, rank 1 gets 4 + 3
        uneven = funcol.all_to_all_single(t.reshape(6), [[2, 3], [4, 3]][rank], [2 + rank, 4 - rank], group)
        exchanged = torch.empty_like(t)
        dist.all_to_all_single(exchanged, t * 2)
        summed, largest = funcol.all_reduce_coalesced([t, t.T], "sum", group)
        return even, uneven, exchanged, summed, largest

    _one_graph_each_backend(fn, _rank_input(rank))


def check_backward_through_all_reduce(rank: int) -> None:
    torch.manual_seed(0)
    weight = torch.randn(3, 3)

    def fn(x, w):
        reduced = funcol.all_reduce(x @ w, "sum", dist.group.WORLD).sin() * (rank + 1)
        sends, gets = [2 + rank, 4 - rank], [[2, 3], [4, 3]][rank]  # uneven: see check_all_to_all_and_coalesced
        exchanged = funcol.all_to_all_single_autograd(reduced.reshape(6), gets, sends, dist.group.WORLD)
        return reduced.sum() + (exchanged * torch.arange(len(exchanged))).sum()

    def grads(f):
        w = weight.clone().requires_grad_()
        x = _rank_input(rank)().requires_grad_()
        f(x, w).backward()
        return x.grad, w.grad

    expected = grads(fn)
    _same(expected, grads(framejit.compile(fn, backend="aot_eager", fullgraph=True)))


def check_async_op_breaks_with_its_reason(rank: int) -> None:
    def fn(t):
        dist.all_reduce(t, async_op=True).wait()
        return t + 1

    make = _rank_input(rank)
    expected = fn(make())
    report = framejit.explain(fn)(make())
    assert any("async_op=True" in b.reason for b in report.break_reasons), [b.reason for b in report.break_reasons]
    _same(expected, framejit.compile(fn, backend="eager")(make()))


results, test_on_two_ranks = two_rank_tests(__name__)
