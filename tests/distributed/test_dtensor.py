"""DTensor under framejit on 2 gloo ranks: not traced yet, so no graph gets a DTensor, the code using one runs as
Python (equal to eager), and each break names DTensor and the method."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import framejit
from tests.distributed.ranks import WORLD_SIZE, two_rank_tests

pytestmark = pytest.mark.slow  # (processes on 2 ranks: tens of seconds per module)


def check_dtensor_methods_break_naming_them_and_match_eager(rank: int) -> None:
    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    torch.manual_seed(0)
    sharded = distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)])

    def redistribute(d, x):
        return d.redistribute(mesh, [Replicate()]).to_local() * x.sin()

    def full(d):
        return (d * 2).full_tensor() + 1

    def made_here(t):
        return DTensor.from_local(t, mesh, [Shard(1)]).full_tensor().cos()

    seen: list[type] = []

    def no_dtensor_inputs(gm, example_inputs):
        seen.extend(type(x) for x in example_inputs)
        return gm.forward

    for fn, args, method in (
        (redistribute, (sharded, torch.randn(4, 6)), ".redistribute"),
        (full, (sharded,), "DTensor"),
        (made_here, (torch.randn(4, 3) + rank,), "DTensor.from_local"),
    ):
        expected = fn(*args)
        framejit.reset()
        torch.testing.assert_close(framejit.compile(fn, backend=no_dtensor_inputs)(*args), expected)
        reasons = [b.reason for b in framejit.explain(fn)(*args).break_reasons]
        assert any(method in r and "DTensor" in r for r in reasons), reasons
    assert DTensor not in seen


results, test_on_two_ranks = two_rank_tests(__name__)
