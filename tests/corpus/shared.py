"""Globals that the programs of more than one corpus file read."""

import torch.nn as nn


def sin_plus(v):
    return v.sin() + 1


GLOBAL_TABLE = {"scale": 2.0, "shift": -1.0}

MODULE_LIST = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
