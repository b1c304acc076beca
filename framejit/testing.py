"""Helpers for tests: counting and recording backends, and tolerant comparison of results."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from framejit.backends.registry import lookup_backend


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


class CompileCounter:
    """A backend that counts compiled frames (graphs) and their ops, and runs graphs eagerly."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.frame_count += 1
        self.op_count += _op_count(gm)
        self.graphs.append(gm)
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []


class CompileCounterWithBackend(CompileCounter):
    """Counts like CompileCounter, then compiles with the named backend."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        super().__call__(gm, example_inputs)
        return lookup_backend(self.backend)(gm, example_inputs)


class EagerAndRecordGraphs:
    """A backend that records each graph (`.graphs`) and runs it eagerly."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return gm.forward


def same(a: Any, b: Any, tol: float = 1e-4, equal_nan: bool = False) -> bool:
    """Whether two (nested) results are equal: tensors within tol, everything else exactly."""
    la, sa = pytree.tree_flatten(a)
    lb, sb = pytree.tree_flatten(b)
    if sa != sb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.dtype == torch.bool or not x.is_floating_point() and not x.is_complex():
                if not torch.equal(x, y):
                    return False
            elif not torch.allclose(x, y, rtol=tol, atol=tol, equal_nan=equal_nan):
                return False
        elif isinstance(x, float) and isinstance(y, float):
            if abs(x - y) > tol * max(1.0, abs(y)) and not (equal_nan and x != x and y != y):
                return False
        elif x is y:
            continue
        elif _plain_object(x) and type(x) is type(y):  # a user object without __eq__: compared by its attributes
            if not same(vars(x), vars(y), tol, equal_nan):
                return False
        elif x != y:
            return False
    return True


def _plain_object(x: Any) -> bool:
    return type(x).__eq__ is object.__eq__ and hasattr(x, "__dict__") and not isinstance(x, (type, torch.nn.Module))
