"""Fixtures of the frame-hook tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from framejit._C import _hook


@pytest.fixture(autouse=True)
def clean_hook() -> Iterator[None]:
    """Every test starts and ends with no callback on this thread and zeroed counters."""
    _hook.set_callback(None)
    _hook.reset_stats()
    yield
    _hook.set_callback(None)
