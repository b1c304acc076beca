"""`ofi`: TorchScript trace + `torch.jit.optimize_for_inference` (the seeds' "speedy backend"), for inference graphs.

A frozen TorchScript module has no autograd: for a graph whose outputs need gradients it returns None (the
seeds' composition pattern then tries its next backend), and says why in the `framejit.backends` log."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from framejit.backends.common import declines_autograd, detached_clones, log, versions_of, written_inputs
from framejit.backends.registry import register_backend


@register_backend(name="ofi")
def ofi(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any] | None:
    """Trace the graph to TorchScript and optimize it for inference (freezing, fusions); None for training graphs
    and for graphs that write to their inputs."""
    if declines_autograd("ofi", example_inputs):
        return None
    clones = detached_clones(example_inputs)
    before = versions_of(clones)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # Traced on copies: tracing runs the graph once. check_trace=False: no second and third run.
        traced = torch.jit.trace(gm, tuple(clones), check_trace=False)
    written = written_inputs(gm, clones, before)
    if written:
        # Freezing may fold or reorder in-place updates of inputs (BatchNorm running stats in train mode).
        log.warning(
            "ofi: this graph writes to its inputs %s in place; ofi compiles pure inference graphs only, "
            "returning None so that a composing backend can fall back",
            written,
        )
        return None
    return torch.jit.optimize_for_inference(traced)
