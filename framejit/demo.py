"""`python -m framejit demo`: the seeds' examples, captured with a printing backend."""

from __future__ import annotations

import logging
from typing import Any, Callable

import torch
from torch import nn

import framejit


def printing_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    print("my_compiler() called with FX graph:")
    gm.graph.print_tabular()
    return gm.forward


def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


class MockModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(torch.cos(x))


class LinearRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(10, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(self.lin(x))


def toy_example(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def _show(title: str, eager: Callable[..., Any], compiled: Callable[..., Any], *args: Any) -> None:
    print(f"\n=== {title} ===")
    got = compiled(*args)
    expected = eager(*args)
    print(f"eager:    {expected}\ncompiled: {got}\nequal: {framejit.testing.same(got, expected)}")


def main() -> int:
    logging.basicConfig(format="[framejit] %(message)s")
    logging.getLogger("framejit").setLevel(logging.INFO)
    torch.manual_seed(0)
    x, y = torch.randn(10), torch.randn(10)
    _show("fn(x, y) = cos(x) + sin(y)", fn, framejit.optimize(printing_backend)(fn), x, y)
    mock = MockModule()
    _show("MockModule", mock, framejit.optimize(printing_backend)(mock), x)
    lin = LinearRelu()
    _show(
        "Linear + relu, fullgraph=True",
        lin,
        framejit.compile(lin, backend=printing_backend, fullgraph=True),
        torch.randn(8, 10),
    )
    print("\n=== toy_example (100 random calls) ===")
    compiled = framejit.optimize(printing_backend)(toy_example)
    ok = all(
        framejit.testing.same(compiled(a, b), toy_example(a, b))
        for a, b in ((torch.randn(10), torch.randn(10)) for _ in range(100))
    )
    print(f"100 calls equal to eager: {ok}")
    print("\n=== explain(toy_example) ===")
    print(framejit.explain(toy_example)(torch.randn(10), torch.randn(10)))
    return 0
