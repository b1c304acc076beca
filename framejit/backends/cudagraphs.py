"""`cudagraphs`: record the graph's CUDA kernels once into a CUDA graph and replay it on each call (no per-kernel
launch cost). CUDA only; training works through AOTAutograd (forward and backward are each one CUDA graph).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.backends.aot import aot_autograd
from framejit.backends.common import BackendUnavailable
from framejit.backends.registry import register_backend


def _check_cuda(example_inputs: list[Any]) -> None:
    devices = [x.device.type for x in example_inputs if isinstance(x, torch.Tensor)]
    elsewhere = sorted({d for d in devices if d != "cuda"})
    if elsewhere:
        raise BackendUnavailable(
            "cudagraphs",
            f"CUDA graphs need every tensor on a CUDA device, but "
            f"{sum(d != 'cuda' for d in devices)} of this graph's "
            f"{len(devices)} tensor inputs are on {', '.join(elsewhere)}; "
            f"move the model and inputs to CUDA (.to('cuda')) or use another "
            f"backend (eager, inductor) on CPU",
        )
    if not torch.cuda.is_available():
        raise BackendUnavailable("cudagraphs", "CUDA is not available in this torch build or on this machine")


def cudagraph_capture(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[[list[Any]], Any]:
    """An ATen-graph compiler (boxed, for aot_autograd): warm up on a side stream, record, replay."""
    _check_cuda(example_inputs)
    static_inputs = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in example_inputs]
    # Warm-up run on a side stream, as CUDA graph capture requires (lazy inits, cuBLAS workspaces).
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        gm(*static_inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        static_outputs = gm(*static_inputs)
    as_sequence = isinstance(static_outputs, (list, tuple))
    outputs = list(static_outputs) if as_sequence else [static_outputs]

    def replay(args: list[Any]) -> Any:
        for dst, src in zip(static_inputs, args):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        args.clear()  # boxed convention: drop the caller's references early
        graph.replay()
        copied = [x.clone() if isinstance(x, torch.Tensor) else x for x in outputs]
        return copied if as_sequence else copied[0]

    replay._boxed_call = True  # type: ignore[attr-defined]
    return replay


_cudagraphs_aot = aot_autograd(fw_compiler=cudagraph_capture)


@register_backend(name="cudagraphs")
def cudagraphs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """CUDA graphs for forward (and backward) through AOTAutograd; a clear error for CPU tensors."""
    _check_cuda(example_inputs)  # before AOTAutograd does any work, so that the error names the real problem
    return _cudagraphs_aot(gm, example_inputs)
