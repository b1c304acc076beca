"""Saving an exported program so that it runs without framejit (or without Python, for ONNX): `save_onnx`
and `save_torchscript`.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch.utils import _pytree as pytree

DYNAMIC_DIMS = "framejit_dynamic_dims"  # gm.meta key: {input name: {dim: Dim name}}, set by export


def _inputs(gm: torch.fx.GraphModule, example_args: tuple) -> list[str]:
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    if len(names) != len(example_args) or not all(isinstance(a, torch.Tensor) for a in example_args):
        raise TypeError(
            f"save: pass one example tensor per input of the exported module ({', '.join(names)}); got "
            f"{len(example_args)} argument(s)"
        )
    return names


def save_onnx(gm: torch.fx.GraphModule, path: str, *example_args: Any) -> None:
    """Write `gm` (from framejit.export) as ONNX; its dynamic dims stay dynamic (named axes)."""
    names = _inputs(gm, example_args)
    dynamic = gm.meta.get(DYNAMIC_DIMS, {})
    output = gm.graph.output_node()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notice and tracer warnings about sizes
        torch.onnx.export(
            gm,
            tuple(example_args),
            path,
            dynamo=False,
            input_names=names,
            output_names=[f"output{i}" for i in range(len(pytree.tree_leaves(output.args[0])))],
            dynamic_axes={name: dims for name, dims in dynamic.items() if name in names},
        )


def save_torchscript(gm: torch.fx.GraphModule, path: str, *example_args: Any) -> None:
    """Write `gm` (from framejit.export) as a TorchScript file that `torch.jit.load` runs."""
    _inputs(gm, example_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about sizes read as numbers
        traced = torch.jit.trace(gm, tuple(example_args), check_trace=False)
    traced.save(path)
