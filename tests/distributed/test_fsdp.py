"""FSDP2 (`fully_shard`) under framejit on 2 gloo ranks: as many graphs as torch.compile or fewer, no recompile
over the steps, and everything equal to eager FSDP2 (outputs, losses, gradients and parameter shards after
several optimizer steps)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from torch._dynamo.testing import CompileCounter
from torch.distributed.fsdp import fully_shard

import framejit
from tests.distributed.ranks import two_rank_tests

pytestmark = pytest.mark.slow  # (processes on 2 ranks: tens of seconds per module)


class Block(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class Net(nn.Module):
    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(depth))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _sharded(model: nn.Module) -> nn.Module:
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _steps(model: nn.Module, rank: int, steps: int = 3) -> list[torch.Tensor]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    seen = []
    for _ in range(steps):
        out = model(torch.randn(6, 16, generator=gen))
        loss = out.square().mean()
        loss.backward()
        seen += [out.detach(), loss.detach(), *(_local(p.grad).clone() for p in model.parameters())]
        opt.step()
        opt.zero_grad()
    return seen + [_local(p).detach().clone() for p in model.parameters()]


def check_compile_of_fully_shard_trains_as_eager(rank: int) -> None:
    torch.manual_seed(0)
    base = Net()
    expected = _steps(_sharded(copy.deepcopy(base)), rank)
    graphs: list[int] = []

    def counting(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    compiled = framejit.compile(_sharded(copy.deepcopy(base)), backend=counting)
    got = _steps(compiled, rank, steps=1)
    after_first = len(graphs)
    framejit.reset()
    graphs.clear()
    compiled = framejit.compile(_sharded(copy.deepcopy(base)), backend=counting)
    got = _steps(compiled, rank)
    assert len(graphs) == after_first, f"recompiled over the steps: {graphs}"
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)

    torch._dynamo.reset()
    counter = CompileCounter()  # the reference count: torch.compile side by side, counting only
    _steps(torch.compile(_sharded(copy.deepcopy(base)), backend=counter), rank)
    # each block's forward is a graph under both (twice: the first block's input needs no grad); framejit also
    # compiles the head after the blocks, which torch.compile runs as Python (Net.forward after FSDP's hook)
    assert counter.frame_count == 2 and after_first == counter.frame_count + 1, (after_first, counter.frame_count)


def check_root_only_fully_shard_compiles_as_torch_compile(rank: int) -> None:
    """One fully_shard over a whole model, inputs of two batch sizes: a static graph then a dynamic one, as
    torch.compile (no recompile on FSDP's all-gather buffers), and equal to eager."""
    torch.manual_seed(0)
    base = Block()

    def run(model: nn.Module) -> list[torch.Tensor]:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        seen = []
        for step in range(4):
            out = model(torch.randn(4 + step % 2, 16, generator=gen))
            out.sum().backward()
            seen += [out.detach(), *(_local(p.grad).clone() for p in model.parameters())]
            opt.step()
            opt.zero_grad()
        return seen

    expected = run(fully_shard(copy.deepcopy(base)))
    graphs: list[torch.fx.GraphModule] = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    framejit.reset()
    for e, g in zip(expected, run(framejit.compile(fully_shard(copy.deepcopy(base)), backend=counting)), strict=True):
        torch.testing.assert_close(g, e)
    torch._dynamo.reset()  # (the other check compiled Block.forward with torch.compile)
    counter = CompileCounter()
    run(torch.compile(fully_shard(copy.deepcopy(base)), backend=counter))
    assert len(graphs) == counter.frame_count == 2, (len(graphs), counter.frame_count)


results, test_on_two_ranks = two_rank_tests(__name__)
