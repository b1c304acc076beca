"""Backends with planted bugs, imported by the fuzzer's worker subprocesses (`--backend tests.fuzz.planted:NAME`)
to check that the fuzzer reports what is wrong, and a right one that records what the compiler gave it."""

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


def _read_as_contiguous(t: Any) -> Any:
    if not isinstance(t, torch.Tensor) or t.is_contiguous():
        return t
    strides, step = [], 1
    for size in reversed(t.shape):
        strides.insert(0, step)
        step *= max(int(size), 1)
    return t.as_strided(t.shape, strides, t.storage_offset())


def ignore_strides(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Reads every non-contiguous tensor input as if it were contiguous (its memory in row-major order): right
    for contiguous inputs only, so only a fuzzer that varies layouts catches it."""
    return lambda *args: gm.forward(*[_read_as_contiguous(a) for a in args])


SYMBOLIC_DIM0: list[bool] = []  # per graph `record_dim0` compiled in this process: was the first input's dim 0 symbolic


def record_dim0(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A right backend that records whether the first tensor input's dim 0 was traced as a symbol."""
    for node in gm.graph.nodes:
        value = node.meta.get("example_value") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            SYMBOLIC_DIM0.append(isinstance(value.shape[0], torch.SymInt))
            break
    return gm.forward
