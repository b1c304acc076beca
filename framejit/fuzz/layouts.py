"""The memory layouts the runner gives tensor arguments, each built from random values drawn from the call's
generator in a fixed order, so the eager and the compiled run get equal values in equal layouts.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

CONTIGUOUS = "contiguous"
LAYOUTS = {  # name -> what the argument is
    CONTIGUOUS: "a fresh contiguous tensor",
    "transposed": "the transpose of a tensor with the last two sizes swapped (ndim >= 2)",
    "sliced": "every other element of the last dim of a tensor twice as long there (a step of 2)",
    "sliced_rows": "every other row of a tensor with twice the rows (ndim >= 2)",
    "offset": "a contiguous tensor starting 3 elements into its storage",
    "expanded": "size 1 in dim 0 expanded to the size (stride 0): only for arguments the program never writes",
    "channels_last": "a channels_last (NHWC in memory) tensor (ndim 4)",
}
ALIASES = {
    "same": "the same tensor object as an earlier argument",
    "view": "a view of all of an earlier argument",
    "row": "the last row of an earlier argument",
}
# layouts a tensor marked contiguous in the generator may take: `.view(-1)` works on them
VIEWABLE = frozenset([CONTIGUOUS, "offset"])
_OFFSET = 3


def applies(layout: str, ndim: int) -> bool:
    """Whether the layout exists for a tensor of `ndim` dims."""
    if layout in ("transposed", "sliced_rows"):
        return ndim >= 2
    if layout == "channels_last":
        return ndim == 4
    return ndim >= 1 or layout == CONTIGUOUS


def _storage_and_view(layout: str, shape: list[int]) -> tuple[list[int], Callable[[torch.Tensor], torch.Tensor]]:
    """The shape of the tensor drawn and how the argument is made from it."""
    if layout == "transposed":
        return shape[:-2] + [shape[-1], shape[-2]], lambda b: b.transpose(-1, -2)
    if layout == "sliced":
        return shape[:-1] + [2 * shape[-1]], lambda b: b[..., ::2]
    if layout == "sliced_rows":
        return [2 * shape[0]] + shape[1:], lambda b: b[::2]
    if layout == "offset":
        numel = 1
        for d in shape:
            numel *= d
        return [numel + _OFFSET], lambda b: b[_OFFSET:].view(shape)
    if layout == "expanded":
        return [1] + shape[1:], lambda b: b.expand(shape)
    return shape, lambda b: b  # contiguous; channels_last is made contiguous in that format (make)


def make(
    layout: str, shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, train: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(argument, leaf): a tensor of `shape` in `layout` with values from `gen`. Training: the leaf is the tensor
    drawn, requiring grad, and the argument is made from a clone of it (so the program may write it in place)."""
    shape = list(shape)
    if layout not in LAYOUTS or not applies(layout, len(shape)):
        raise ValueError(f"layout {layout!r} does not apply to a tensor of shape {shape}")
    drawn, view = _storage_and_view(layout, shape)
    base = torch.randn(drawn, generator=gen, dtype=dtype)
    if layout == "channels_last":
        base = base.contiguous(memory_format=torch.channels_last)
    if not train:
        return view(base), None
    leaf = base.requires_grad_()
    return view(leaf.clone()), leaf


def alias(kind: str, source: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """An argument that aliases `source` (see the module docstring); `shape` is the argument's own."""
    if kind not in ALIASES:
        raise ValueError(f"unknown alias {kind!r}")
    made = {"same": lambda: source, "view": lambda: source[:], "row": lambda: source[-1]}[kind]()
    if list(made.shape) != list(shape):
        raise ValueError(f"alias {kind!r} of a tensor of shape {list(source.shape)} is not of shape {list(shape)}")
    return made


def describe(layout: Any) -> str:
    if isinstance(layout, (tuple, list)):
        return {"same": "same as {}", "view": "a view of {}", "row": "last row of {}"}[layout[0]].format(layout[1])
    return layout


def is_alias(layout: Any) -> bool:
    return isinstance(layout, (tuple, list))
