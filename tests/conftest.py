"""Every test starts from an empty framejit cache and default config."""

import pytest

# the shared helpers assert like test code: pytest rewrites their asserts too
pytest.register_assert_rewrite("tests.helpers", "tests.graph_breaks.harness", "tests.corpus.harness")
import torch

import framejit


@pytest.fixture(autouse=True)
def _fresh_framejit():
    framejit.reset()
    torch.manual_seed(0)
    yield
    framejit.reset()
