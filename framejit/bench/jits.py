"""The two JITs `framejit bench` compares, behind one interface: wrap a module, then count graphs and breaks.

This is the one place in framejit that uses torch._dynamo / torch.compile: as the comparison.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from torch import nn

import framejit
from framejit import eval_frame
from framejit.exc import Unsupported
from framejit.fate import GraphFate
from framejit.testing import CompileCounterWithBackend


def reset_all() -> None:
    """Forget everything both JITs compiled, so runs don't share caches (or guard-failure counts)."""
    framejit.reset()
    if "torch._dynamo" in sys.modules:
        import torch._dynamo
        import torch._dynamo.utils

        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()


class _FallbackLog(logging.Handler):
    """Collects framejit's messages about frames it ran as Python (they are not graph breaks)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        # the core's own lines only (backends' loggers are children); breaks arrive through on_break
        if record.name == "framejit" and not msg.startswith("graph break at"):
            self.messages.append(msg)


class FramejitJit:
    name = "framejit"

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.counter = CompileCounterWithBackend(backend)
        self.breaks: list[Unsupported] = []
        self.fates: list[GraphFate] = []

    def wrap(self, module: nn.Module) -> Callable[..., Any]:
        # make_context rather than framejit.compile: it takes the hooks that count breaks and graphs' fates
        return eval_frame.make_context(
            self.counter,
            self.backend,
            on_break=self.breaks.append,
            on_graph=lambda gm, compiled, fate: self.fates.append(fate),
        )(module)

    def counts(self) -> tuple[int | None, int | None, list[str]]:
        notes = []
        for b in self.breaks:
            where = b.user_stack[-1] if b.user_stack else None
            place = f" ({where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
            notes.append(f"graph break{place}: {b.msg}")
        notes += [f"graph {i}: {fate}" for i, fate in enumerate(self.fates, 1) if fate.fell_back]
        return self.counter.frame_count, len(self.breaks), notes

    def compiled(self) -> str | None:
        """How many graphs the backend compiled whole, of all it was handed: "3/3"."""
        return f"{sum(not f.fell_back for f in self.fates)}/{len(self.fates)}"


class FallbackWatch:
    """While active, records framejit's "runs ... as Python" and internal-error log lines (`.messages`)."""

    def __init__(self) -> None:
        self.handler = _FallbackLog()
        self.messages = self.handler.messages

    def __enter__(self) -> "FallbackWatch":
        self.logger = logging.getLogger("framejit")
        self.level = self.logger.level
        self.logger.addHandler(self.handler)
        if self.logger.getEffectiveLevel() > logging.INFO:
            self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


class TorchJit:
    name = "torch.compile"

    def __init__(self, backend: str) -> None:
        import torch._dynamo
        import torch._dynamo.testing

        # torch's own backend of that name where it has one; otherwise framejit's compiler function
        known = torch._dynamo.list_backends(exclude_tags=())
        target: Any = backend if backend in known else framejit.lookup_backend(backend)
        self.backend = backend
        self.counter = torch._dynamo.testing.CompileCounterWithBackend(target)

    def wrap(self, module: nn.Module) -> Callable[..., Any]:
        import torch

        return torch.compile(module, backend=self.counter)

    def counts(self) -> tuple[int | None, int | None, list[str]]:
        from torch._dynamo.utils import counters

        breaks = counters.get("graph_break", {})
        notes = [f"graph break: {reason} (x{n})" for reason, n in breaks.items()]
        return self.counter.frame_count, sum(breaks.values()), notes

    def compiled(self) -> str | None:
        return None  # torch.compile does not say


def torch_backend(name: str) -> Callable[..., Any]:
    """torch.compile's backend `name`, after a reset (the fuzzer's reference: each program from an empty cache)."""
    import torch._dynamo

    torch._dynamo.reset()
    return torch._dynamo.lookup_backend(name)


def torch_compile(
    fn: Callable[..., Any], backend: Callable[..., Any], dynamic: bool | None = None
) -> Callable[..., Any]:
    import torch

    return torch.compile(fn, backend=backend, dynamic=dynamic)


def torch_mark_dynamic(t: Any, dim: int) -> None:
    """torch.compile's own mark of a dynamic dim (the fuzzer's reference marks what framejit's side marks)."""
    import torch._dynamo

    torch._dynamo.mark_dynamic(t, dim)


def make_jit(kind: str, backend: str) -> FramejitJit | TorchJit:
    return FramejitJit(backend) if kind == "framejit" else TorchJit(backend)
