"""Every test starts from an empty framejit cache and default config."""
import pytest
import torch

import framejit


@pytest.fixture(autouse=True)
def _fresh_framejit():
    framejit.reset()
    torch.manual_seed(0)
    yield
    framejit.reset()
