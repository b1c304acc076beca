"""Helpers that relpkg.model imports inside its functions."""

import torch

SCALE = 3


def double(x):
    return x * 2


def shift(x):
    return torch.relu(x) + 1
