"""Record types shared across the pipeline: guards, cache entries, backends.

Frozen dataclasses with keyword fields; never unpack them positionally.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable, Protocol

import torch


class Backend(Protocol):
    """A compiler: takes the captured graph and its real example inputs, returns a callable."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]: ...


@dataclasses.dataclass(frozen=True)
class Guard:
    """One check a cache entry needs to hold before its compiled code may run.

    `name` is the source expression (e.g. "L['a']", "G['torch']"), `kind` the
    guard type (TENSOR_MATCH, ID_MATCH, FUNCTION_MATCH, EQUALS, TYPE_MATCH,
    LEN_MATCH, DICT_KEYS, NO_HOOKS, GRAD_MODE, DEFAULT_DTYPE, DEFAULT_DEVICE, AUTOCAST), `code_list` the Python
    expressions (over L[...] / G[...]) that must all be true.
    """

    name: str
    kind: str
    code_list: tuple[str, ...]
    source_kind: str = "local"

    def __str__(self) -> str:
        return f"{self.source_kind} {self.name!r} {self.kind}: " + " and ".join(self.code_list)


@dataclasses.dataclass(frozen=True)
class GuardFailure:
    """Handed to `guard_fail_fn` when no cache entry of a code object matched."""

    code: types.CodeType
    guard: Guard
    reason: str

    def __str__(self) -> str:
        return f"{self.code.co_name} ({self.code.co_filename}:{self.code.co_firstlineno}): {self.reason}"


@dataclasses.dataclass(frozen=True)
class CompiledFrame:
    """What converting one frame produced: the replacement code, its guards and graphs."""

    code: types.CodeType            # the transformed code object (parameters: the original argument slots)
    guard_fn: Callable[..., bool]   # guard_fn(func, *arg_slots) -> bool
    guards: tuple[Guard, ...]
    check_fn_source: str            # the generated source of guard_fn, for debugging
    graph_names: tuple[str, ...]    # __compiled_fn_<n> names of the graphs this code calls
    constants: dict[str, Any]       # the objects guard expressions name as ___c<n>
    watched: tuple[Any, ...]        # objects guarded by id: when one dies, the entry is dropped
    passthrough: bool = False       # `code` is the original body: this path had no tensor op
    reads_tensors: bool = True      # the trace read some tensor
    identity: tuple[tuple[str, int], ...] = ()  # (argument, id) guarded by identity: the objects it is for
