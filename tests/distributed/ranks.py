"""Run checks on 2 ranks (gloo on 127.0.0.1, a free port, spawned processes), bounded in time.

`run_checks(module, names)` starts the ranks once; each rank runs every named check (a function of the module
taking the rank) and records "ok" or the failure. A test then asserts its own check passed on both ranks, so a
module's checks share one start of the processes: a test module ends with
`results, test_on_two_ranks = two_rank_tests(__name__)`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import socket
import tempfile
import time
import traceback
from typing import Any

import pytest
import torch.multiprocessing as mp

WORLD_SIZE = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, module_name: str, names: list[str], out_dir: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    module = importlib.import_module(module_name)
    results: dict[str, Any] = {}
    try:
        for name in names:
            try:
                results[name] = getattr(module, name)(rank) or "ok"
            except Exception:
                results[name] = traceback.format_exc()
            dist.barrier()  # a failed check on one rank must not leave the other in a collective
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)
        dist.destroy_process_group()


def run_checks(module_name: str, names: list[str], timeout_s: float = 150.0) -> dict[str, list[Any]]:
    """{check name: [rank 0's result, rank 1's result]}; a rank that did not report gives a missing result."""
    with tempfile.TemporaryDirectory() as out_dir:
        ctx = mp.start_processes(
            _rank_main,
            args=(free_port(), module_name, names, out_dir),
            nprocs=WORLD_SIZE,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=max(deadline - time.monotonic(), 0.1)):  # True once every rank has ended
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the ranks of {module_name} ran past {timeout_s} s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                p.join(5)
        per_rank = []
        for rank in range(WORLD_SIZE):
            path = os.path.join(out_dir, f"rank{rank}.json")
            if not os.path.exists(path):
                per_rank.append({})
                continue
            with open(path) as f:
                per_rank.append(json.load(f))
    return {name: [r.get(name, f"rank {i} did not report") for i, r in enumerate(per_rank)] for name in names}


def two_rank_tests(module_name: str, timeout_s: float = 150.0) -> tuple[Any, Any]:
    """(the module-scoped fixture that runs the module's `check_*` functions on the ranks, the test of each)."""
    checks = sorted(name for name in vars(sys.modules[module_name]) if name.startswith("check_"))

    @pytest.fixture(scope="module")
    def results() -> dict[str, list[Any]]:
        return run_checks(module_name, checks, timeout_s)

    @pytest.mark.parametrize("check", checks)
    def test_on_two_ranks(results: dict[str, list[Any]], check: str) -> None:
        for rank, outcome in enumerate(results[check]):
            assert outcome == "ok", f"rank {rank}:\n{outcome}"

    return results, test_on_two_ranks
