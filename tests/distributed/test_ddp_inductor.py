"""DDP split at its buckets with the inductor backend (minutes of C++ compiling on 2 ranks: the slow tier)."""

from __future__ import annotations

import pytest

from tests.distributed.ranks import two_rank_tests
from tests.distributed.test_ddp import _pair, _train_side_by_side

import framejit

pytestmark = pytest.mark.slow


def _inductor(model, ddp):
    return framejit.compile(ddp(model), backend="inductor")


def check_inductor_pieces_train_as_eager(rank: int) -> None:
    eager, compiled = _pair(rank, _inductor)
    _train_side_by_side(rank, eager, compiled, steps=2)


results, test_on_two_ranks = two_rank_tests(__name__, timeout_s=600)
