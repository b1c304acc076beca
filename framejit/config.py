"""User settings, read once per compile into a frozen Options object.

Set them as module attributes (`framejit.config.debug = True`) or temporarily
with `framejit.config.patch(debug=True)` as a context manager or decorator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from typing import Any

debug: bool = False  # print ORIGINAL/MODIFIED BYTECODE, GUARDS and the graph per compiled frame
verbose: bool = False  # full tracebacks for internal errors
log_level: int = logging.WARNING  # level of the `framejit` logger (INFO: graph breaks, recompiles, fallbacks)
output_code: bool = False  # print each graph's code and let backends that generate code show theirs
dynamic_shapes: bool = False  # dynamic=True everywhere: every input dim symbolic from the first compile
automatic_dynamic_shapes: bool = True  # dynamic=None: a dim whose size changed is symbolic in the recompile
cache_size_limit: int = 8  # compiled entries per code object (and per module instance: entries for
#   other objects guarded by identity, e.g. other nn.Linear, do not count)
accumulated_cache_size_limit: int = 256  # compiled entries per code object for all objects together
suppress_errors: bool = False  # backend failures warn and fall back instead of raising
warn_on_fallback: bool = True  # warn (exc.BackendFallbackWarning) when a backend runs a graph as its torch ops
inline_depth_limit: int = 32  # nested user-function inlining depth before Unsupported
instruction_budget: int = 1_000_000  # symbolic instructions per compiled frame (inlined calls included): a
#   Python loop is unrolled into the graph up to it (about 3 s of tracing), then runs as Python
capture_scalar_outputs: bool = False  # `.item()` (and tolist) stays in the graph as an unbacked symbol instead of
#   a graph break, as torch.compile's setting of that name (always so under fullgraph=True)
capture_dynamic_output_shape_ops: bool = False  # nonzero, masked_select, unique... stay in the graph with an
#   unbacked size instead of a graph break (always so under fullgraph=True)
optimize_ddp: bool = True  # a graph traced inside DistributedDataParallel's forward is compiled as one piece per
#   gradient bucket, so each bucket's all-reduce starts while the backward goes on (distributed/ddp_split.py)

_NAMES = (
    "debug",
    "verbose",
    "log_level",
    "output_code",
    "dynamic_shapes",
    "automatic_dynamic_shapes",
    "cache_size_limit",
    "accumulated_cache_size_limit",
    "suppress_errors",
    "warn_on_fallback",
    "inline_depth_limit",
    "instruction_budget",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "optimize_ddp",
)


@dataclasses.dataclass(frozen=True)
class Options:
    """A snapshot of the settings one compile runs with. (The cache size limits are read when deciding
    whether to compile at all.)"""

    debug: bool
    verbose: bool
    log_level: int
    output_code: bool
    suppress_errors: bool
    warn_on_fallback: bool
    inline_depth_limit: int
    instruction_budget: int
    capture_scalar_outputs: bool
    capture_dynamic_output_shape_ops: bool
    optimize_ddp: bool
    dynamic_shapes: bool
    automatic_dynamic_shapes: bool

    def dynamic(self, asked: bool | None) -> bool | None:
        """The dynamic-shape policy for a context made with `dynamic=asked` (shapes.py): True, False, or None
        for automatic."""
        if asked is not None:
            return asked
        if self.dynamic_shapes:
            return True
        return None if self.automatic_dynamic_shapes else False


def snapshot() -> Options:
    mod = sys.modules[__name__]
    return Options(**{f.name: getattr(mod, f.name) for f in dataclasses.fields(Options)})


class patch(contextlib.ContextDecorator):
    """Temporarily change settings: `with config.patch(debug=True): ...` or as a decorator."""

    def __init__(self, **changes: Any) -> None:
        unknown = set(changes) - set(_NAMES)
        if unknown:
            raise AttributeError(f"framejit.config has no setting(s) {sorted(unknown)}; known: {list(_NAMES)}")
        self.changes = changes
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> "patch":
        mod = sys.modules[__name__]
        self._saved.append({k: getattr(mod, k) for k in self.changes})
        for k, v in self.changes.items():
            setattr(mod, k, v)
        return self

    def __exit__(self, *exc: object) -> None:
        mod = sys.modules[__name__]
        for k, v in self._saved.pop().items():
            setattr(mod, k, v)
