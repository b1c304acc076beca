"""DDP under framejit on 2 gloo ranks: the graph traced inside DDP's forward is split at DDP's gradient buckets
(config.optimize_ddp), each bucket's all-reduce starts before the backward ends, and everything equals eager DDP:
outputs, losses, every gradient, and the parameters after several optimizer steps."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

import framejit
from framejit.exc import NothingCompiledWarning
from tests.distributed.ranks import two_rank_tests

pytestmark = pytest.mark.slow  # (processes on 2 ranks: tens of seconds per module)

WIDTH = 64
LAYER_BYTES = (WIDTH * WIDTH + WIDTH) * 4  # one Linear(64, 64)'s weight and bias
CAP_MB = 2 * LAYER_BYTES / 2**20  # two layers fill a bucket


class Stack(nn.Module):
    def __init__(self, depth: int = 6, unused_branch: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(depth))
        self.unused = nn.Linear(WIDTH, WIDTH) if unused_branch else None

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def _pair(rank: int, wrap, **ddp_options):
    """(eager DDP, compiled DDP) of one model (same weights on both ranks), and an input for each rank."""
    torch.manual_seed(0)
    model = Stack(unused_branch=ddp_options.get("find_unused_parameters", False))
    eager = DDP(copy.deepcopy(model), bucket_cap_mb=CAP_MB, **ddp_options)
    compiled = wrap(copy.deepcopy(model), lambda m: DDP(m, bucket_cap_mb=CAP_MB, **ddp_options))
    return eager, compiled


def _outer(model, ddp):  # compile(DDP(m))
    return framejit.compile(ddp(model), backend="aot_eager")


def _inner(model, ddp):  # DDP(compile(m))
    return ddp(framejit.compile(model, backend="aot_eager"))


def _train_side_by_side(rank: int, eager, compiled, steps: int = 4, accumulate: int = 1) -> None:
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    opt_c = torch.optim.SGD(compiled.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        for micro in range(accumulate):
            x = torch.randn(8, WIDTH, generator=gen)
            sync = micro == accumulate - 1
            for model in (eager, compiled):
                ctx = model.no_sync() if not sync else torch.enable_grad()
                with ctx:
                    out = model(x)
                    loss = out.square().mean()
                    loss.backward()
                if model is eager:
                    expected_out, expected_loss = out, loss
            torch.testing.assert_close(out, expected_out)
            torch.testing.assert_close(loss, expected_loss)
        for p_e, p_c in zip(eager.parameters(), compiled.parameters()):
            torch.testing.assert_close(p_c.grad, p_e.grad)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    for p_e, p_c in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(p_c, p_e)


def _pieces(ddp_module) -> list[str]:
    report = framejit.explain(ddp_module)(torch.randn(8, WIDTH))
    assert report.graph_count == 1, report.graph_count
    return report.graph_fates[0].pieces


def check_graph_is_split_at_the_buckets(rank: int) -> None:
    torch.manual_seed(0)
    pieces = _pieces(DDP(Stack(), bucket_cap_mb=CAP_MB))
    assert len(pieces) == 3 and all(p.startswith("4 parameters") for p in pieces), pieces
    with framejit.config.patch(optimize_ddp=False):
        assert _pieces(DDP(Stack(), bucket_cap_mb=CAP_MB)) == []
    assert _pieces(DDP(Stack())) == []  # the default 25 MiB buckets hold the whole model: one piece


def check_compile_of_ddp_trains_as_eager(rank: int) -> None:
    _train_side_by_side(rank, *_pair(rank, _outer))


def check_ddp_of_compiled_module_trains_as_eager(rank: int) -> None:
    _train_side_by_side(rank, *_pair(rank, _inner))


def check_no_sync_accumulation(rank: int) -> None:
    _train_side_by_side(rank, *_pair(rank, _outer), steps=2, accumulate=3)


def check_unused_parameters_and_static_graph(rank: int) -> None:
    _train_side_by_side(rank, *_pair(rank, _outer, find_unused_parameters=True), steps=3)
    _train_side_by_side(rank, *_pair(rank, _outer, static_graph=True), steps=3)


def check_inference_in_pieces(rank: int) -> None:
    eager, compiled = _pair(rank, _outer)
    x = torch.randn(8, WIDTH) + rank
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), eager(x))
    torch.testing.assert_close(compiled.eval()(x), eager.eval()(x))


def check_ddp_of_torch_modules_alone_says_nothing_compiled(rank: int) -> None:
    """DDP's forward and nn.Sequential's are torch internals: no graph (as under torch.compile), and it is said."""
    sequential = DDP(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()))
    x = torch.randn(4, WIDTH)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = framejit.compile(sequential, backend="eager")(x)
    said = [str(w.message) for w in caught if issubclass(w.category, NothingCompiledWarning)]
    assert len(said) == 1 and "DistributedDataParallel.forward" in said[0], said
    torch.testing.assert_close(out, sequential(x))


class _MatmulLog(TorchDispatchMode):
    """Appends "mm" to `events` for each matrix product the backward runs."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            self.events.append("mm")
        return func(*args, **(kwargs or {}))


def check_buckets_reduce_before_the_backward_ends(rank: int) -> None:
    """Split at the buckets, the first buckets' all-reduces are launched while the backward still has matrix
    products to run; compiled whole (optimize_ddp=False), every launch comes after the last of them."""

    def events(optimize_ddp: bool) -> list[str]:
        torch.manual_seed(0)
        ddp = DDP(Stack(), bucket_cap_mb=CAP_MB)
        log: list[str] = []

        def hook(state, bucket):
            log.append("launch")
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(None, hook)
        with framejit.config.patch(optimize_ddp=optimize_ddp):
            compiled = framejit.compile(ddp, backend="aot_eager")
            for _ in range(2):  # (the first backward also rebuilds DDP's buckets)
                log.clear()
                loss = compiled(torch.randn(8, WIDTH)).sum()
                with _MatmulLog(log):
                    loss.backward()
        return log

    framejit.reset()
    split, whole = events(True), events(False)  # (the split graph is guarded: not reused once optimize_ddp is off)
    assert split.count("launch") == whole.count("launch") == 3
    last_mm = max(i for i, e in enumerate(split) if e == "mm")
    assert split.index("launch") < last_mm, split
    assert whole.index("launch") > max(i for i, e in enumerate(whole) if e == "mm"), whole


results, test_on_two_ranks = two_rank_tests(__name__)
