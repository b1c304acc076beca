"""Backends from packages framejit does not depend on: `tensorrt` (Torch-TensorRT), `tvm` (Apache TVM),
`ipex` (Intel Extension for PyTorch).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from framejit.backends.common import (
    BackendUnavailable,
    declines_autograd,
    detached_clones,
    require,
    returns_tuple,
    tensor_devices,
)
from framejit.backends.registry import register_backend


def _trace(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> torch.jit.ScriptModule:
    """TorchScript of the graph, traced on copies of the inputs (tracing runs the graph)."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return torch.jit.trace(gm, tuple(detached_clones(example_inputs)), check_trace=False)


@register_backend(name="tensorrt")
def tensorrt(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any] | None:
    """NVIDIA TensorRT through Torch-TensorRT's TorchScript frontend (its other frontends go through
    torch.export/TorchDynamo). CUDA only, inference only."""
    torch_tensorrt = require(
        "torch_tensorrt",
        backend="tensorrt",
        install="pip install torch-tensorrt (a build matching your torch and CUDA versions)",
    )
    if tensor_devices(example_inputs) != {"cuda"}:
        raise BackendUnavailable(
            "tensorrt", f"TensorRT needs CUDA tensors, got inputs on {sorted(tensor_devices(example_inputs))}"
        )
    if declines_autograd("tensorrt", example_inputs):
        return None
    return torch_tensorrt.compile(_trace(gm, example_inputs), ir="ts", inputs=list(example_inputs))


@register_backend(name="tvm")
def tvm(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any] | None:
    """Apache TVM: import the FX graph with Relax's FX frontend, build for the CPU (llvm), run in its VM."""
    tvm_mod = require("tvm", backend="tvm", install="pip install apache-tvm (or a TVM build with Relax and LLVM)")
    from tvm import relax  # type: ignore[import-not-found]
    from tvm.relax.frontend.torch import from_fx  # type: ignore[import-not-found]

    if tensor_devices(example_inputs) - {"cpu"}:
        raise BackendUnavailable(
            "tvm",
            "framejit's tvm backend builds for the CPU (llvm target); got inputs on "
            f"{sorted(tensor_devices(example_inputs))}",
        )
    if declines_autograd("tvm", example_inputs):
        return None
    input_info = [(tuple(x.shape), str(x.dtype).removeprefix("torch.")) for x in example_inputs]
    module = from_fx(gm, input_info)
    vm = relax.VirtualMachine(relax.build(module, target="llvm"), tvm_mod.cpu())
    as_tuple = returns_tuple(gm)

    def run_tvm(*args: torch.Tensor) -> Any:
        out = vm["main"](*[tvm_mod.nd.array(a.detach().contiguous().numpy()) for a in args])
        outs = [out] if isinstance(out, tvm_mod.nd.NDArray) else list(out)  # one array, or a tuple of them
        results = tuple(torch.from_numpy(o.numpy()) for o in outs)
        return results if as_tuple else results[0]

    return run_tvm


@register_backend(name="ipex")
def ipex(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any] | None:
    """Intel Extension for PyTorch: importing it registers its TorchScript fusion passes; trace and freeze."""
    require(
        "intel_extension_for_pytorch",
        backend="ipex",
        install="pip install intel-extension-for-pytorch (a build matching your torch version)",
    )
    if declines_autograd("ipex", example_inputs):
        return None
    traced = _trace(gm, example_inputs)
    return torch.jit.freeze(traced.eval())
