"""Fixtures of the graph-break tests."""

import pytest

from tests.graph_breaks.harness import EVENTS


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()
