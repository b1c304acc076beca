"""Fixtures of the capture corpus."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    before = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(before)
