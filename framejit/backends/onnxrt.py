"""`onnxrt`: export the graph to ONNX (TorchScript-based exporter) and run it in ONNX Runtime's CPU provider."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any, Callable

import torch

from framejit.backends.common import (
    BackendUnavailable,
    declines_autograd,
    detached_clones,
    log,
    require,
    returns_tuple,
    tensor_devices,
    versions_of,
    written_inputs,
)
from framejit.backends.registry import register_backend

INSTALL = "pip install 'framejit[onnx]'  (onnx==1.23.2, onnxruntime==1.31.1)"


@register_backend(name="onnxrt")
def onnxrt(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any] | None:
    """Export to ONNX and return a function that runs the model in an ONNX Runtime session."""
    ort = require("onnxruntime", backend="onnxrt", install=INSTALL)
    require("onnx", backend="onnxrt", install=INSTALL)  # the exporter serializes through it
    if declines_autograd("onnxrt", example_inputs):
        return None
    if tensor_devices(example_inputs) - {"cpu"}:
        raise BackendUnavailable(
            "onnxrt",
            f"runs on ONNX Runtime's CPU provider, but the graph's inputs are on "
            f"{sorted(tensor_devices(example_inputs))}",
        )
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        log.warning("onnxrt: the graph has non-tensor inputs, which ONNX cannot take; returning None")
        return None

    names = [f"input_{i}" for i in range(len(example_inputs))]
    clones = detached_clones(example_inputs)
    before = versions_of(clones)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad(), _native_output_to_log():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice and tracer warnings
        # Exported from copies: exporting traces, i.e. runs, the graph.
        torch.onnx.export(gm, tuple(clones), buffer, dynamo=False, input_names=names)
    written = written_inputs(gm, clones, before)
    if written:
        log.warning(
            "onnxrt: this graph writes to its inputs %s in place, which an ONNX graph cannot; "
            "returning None so that a composing backend can fall back",
            written,
        )
        return None

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # spinning threads starve torch's
    session = ort.InferenceSession(buffer.getvalue(), sess_options=options, providers=["CPUExecutionProvider"])
    # The exporter drops inputs the graph does not use; feed only the ones the session asks for.
    feeds = [(names.index(i.name), i.name) for i in session.get_inputs()]
    as_tuple = returns_tuple(gm)

    def run_onnx(*args: torch.Tensor) -> Any:
        # .numpy() shares memory with CPU tensors; as_tensor shares it with ORT's result arrays.
        outputs = session.run(None, {name: args[i].detach().contiguous().numpy() for i, name in feeds})
        results = tuple(torch.as_tensor(out) for out in outputs)
        return results if as_tuple else results[0]

    return run_onnx


@contextlib.contextmanager
def _native_output_to_log() -> Iterator[None]:
    """Moves what native code prints to stdout and stderr (file descriptors 1 and 2) into the debug log.

    When an op cannot be exported, the TorchScript exporter prints the whole TorchScript graph from C++: its
    log switch is always on, because torch.onnx's `setup_onnx_logging` tests the function
    `_jit_is_onnx_log_enabled` instead of calling it. The exception already says which op failed; a graph dump on
    the user's terminal (autotune tries onnxrt on every inference graph) says nothing more."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as sink:
        for fd in saved:
            os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            printed = sink.read().decode(errors="replace")
            if printed:
                log.debug("onnxrt: the exporter printed:\n%s", printed)
