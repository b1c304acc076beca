"""DDP, compiled: when each gradient bucket's all-reduce starts, and the step time, side by side with eager DDP and
torch.compile (2 ranks, gloo on 127.0.0.1, CPU).

Run from the repository root: python benchmarks/distributed.py [--backend inductor] [--steps N]

The model is 8 x Linear(1024, 1024) with ReLU, wrapped as compile(DDP(model)) with 4 MiB buckets (about one layer
each). A comm hook stamps the time of each bucket's all-reduce launch; a launch's place in the backward is
(launch - start of backward()) / (end of backward() - start), averaged over the timed steps. Eager DDP launches the
first bucket early (the last layer's gradients are ready first); a graph compiled whole launches every bucket after
its one backward node; split at the buckets (framejit's optimize_ddp, torch.compile's DDPOptimizer), the launches
spread again. The step time is forward, backward and an SGD step, median of the timed steps; each JIT compiles
during 3 warm-up steps first.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402

WIDTH, DEPTH, BATCH, BUCKET_MB = 1024, 8, 64, 4


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def _wrapped(mode: str, backend: str):
    torch.manual_seed(0)
    ddp = DDP(MLP(), bucket_cap_mb=BUCKET_MB)
    launches: list[float] = []

    def hook(state, bucket):
        launches.append(time.perf_counter())
        return default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, hook)
    if mode == "eager":
        return ddp, launches
    if mode.startswith("framejit"):
        return framejit.compile(ddp, backend=backend), launches
    return torch.compile(ddp, backend=backend), launches


def _measure(mode: str, backend: str, steps: int) -> tuple[float, float, float]:
    """(first launch, last launch) as fractions of the backward, and the median step time in ms."""
    model, launches = _wrapped(mode, backend)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(dist.get_rank())
    firsts, lasts, step_ms = [], [], []
    for step in range(3 + steps):
        x = torch.randn(BATCH, WIDTH, generator=gen)
        begin = time.perf_counter()
        loss = model(x).square().mean()
        launches.clear()
        start = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
        opt.step()
        opt.zero_grad()
        done = time.perf_counter()
        if step >= 3:
            firsts.append((launches[0] - start) / (end - start))
            lasts.append((launches[-1] - start) / (end - start))
            step_ms.append((done - begin) * 1e3)
    return statistics.mean(firsts), statistics.mean(lasts), statistics.median(step_ms)


def _rank_main(rank: int, port: int, backend: str, steps: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)  # two ranks on the machine's cores
    rows = []
    for mode in ("eager", "framejit", "framejit (optimize_ddp=False)", "torch.compile", "torch.compile (off)"):
        framejit.reset()
        torch._dynamo.reset()
        with (
            framejit.config.patch(optimize_ddp="False" not in mode),
            torch._dynamo.config.patch(optimize_ddp="off" not in mode),
        ):
            first, last, ms = _measure(mode, backend, steps)
        rows.append((mode, first, last, ms))
    dist.destroy_process_group()
    if rank != 0:
        return
    eager_ms = rows[0][3]
    print(f"DDP, {DEPTH} x Linear({WIDTH}, {WIDTH}), {BUCKET_MB} MiB buckets, backend {backend}, 2 gloo ranks")
    print(f"{'mode':32} {'first launch':>12} {'last launch':>12} {'step ms':>9} {'vs eager':>9}")
    for mode, first, last, ms in rows:
        print(f"{mode:32} {first:12.2f} {last:12.2f} {ms:9.1f} {eager_ms / ms:8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_main, args=(port, args.backend, args.steps), nprocs=2)


if __name__ == "__main__":
    main()
