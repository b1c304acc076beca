"""Backends with planted bugs, imported by the fuzzer's worker subprocesses (`--backend tests.fuzz.planted:NAME`)
to check that the fuzzer reports what is wrong."""
from __future__ import annotations

from typing import Any, Callable

import torch


def _perturbed(out: Any) -> Any:
    if isinstance(out, torch.Tensor) and out.is_floating_point():
        return out + 1e-2
    if isinstance(out, (list, tuple)):
        return type(out)(_perturbed(o) for o in out)
    return out


def perturb(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Every floating output of every graph is off by 1e-2."""
    return lambda *args: _perturbed(gm.forward(*args))


def perturb_atan(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Graphs that call torch.atan get outputs off by 1e-2; every other graph is right."""
    if not any(node.target in (torch.atan, "atan") for node in gm.graph.nodes):
        return gm.forward
    return perturb(gm, example_inputs)
