"""Helpers shared by the built-in backends: install hints for optional packages, and what a graph needs."""

from __future__ import annotations

import functools
import importlib
import logging
from types import ModuleType
from typing import Any, Callable, Sequence

import torch

from framejit._C import _hook
from framejit.backends.registry import is_builtin
from framejit.exc import BackendOutputError
from framejit.op_effects import batch_norm_stats_written

log = logging.getLogger("framejit.backends")  # a child of "framejit": its handlers and level apply


class BackendUnavailable(RuntimeError):
    """A backend cannot run here: its package is not installed, or it needs a device these tensors are not on.

    The message always says what to do (which package to install, which device to use); a composing backend
    catches it like any other failure and tries its next candidate."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(f"backend {backend!r}: {message}")
        self.backend = backend


def without_capture(fn: Callable[..., Any], *, compiler: bool = False) -> Callable[..., Any]:
    """`fn` made to run with framejit's frame capture off (and whatever it calls), keeping `_boxed_call`.

    For code that runs later, from a user frame under capture, rather than inside framejit's compile (which already
    runs with capture off): AOTAutograd compiles the backward lazily, on the first `loss.backward()`, and that
    compiler (inductor's C++ build, filelock, a user's bw_compiler) and the backward it returns must not be traced
    as user code. TorchDynamo wraps the same two in `disable` for the same reason. A `compiler` also runs on a
    data-stack chunk of its own, as framejit's compile does (`_C/data_stack.c`)."""

    call = _hook.call_compiler if compiler else functools.partial(_hook.call_with_callback, None)

    @functools.wraps(fn)
    def run_without_capture(*args: Any, **kwargs: Any) -> Any:
        return call(fn, *args, **kwargs)

    if getattr(fn, "_boxed_call", False):
        run_without_capture._boxed_call = True  # type: ignore[attr-defined]
    return run_without_capture


def require(module: str, *, backend: str, install: str) -> ModuleType:
    """Import an optional package for `backend`, or raise BackendUnavailable naming what to install.

    Imported lazily (inside the compiler) so that `import framejit` stays light and works without it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # `from None`: the user needs the install hint, not the ImportError's traceback
        raise BackendUnavailable(
            backend, f"needs the package {module!r}, which is not installed ({e}); install it with: {install}"
        ) from None


def needs_autograd(example_inputs: Sequence[Any]) -> bool:
    """Whether the graph's outputs must carry autograd history (grad mode on and some input requires grad).

    framejit guards each graph on grad mode, so a graph compiled under `torch.no_grad()` only ever runs there."""
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def declines_autograd(backend: str, example_inputs: Sequence[Any]) -> bool:
    """For inference-only backends: whether this graph needs autograd, in which case the backend returns None
    (so that a composing backend falls back) after saying why in the log."""
    if not needs_autograd(example_inputs):
        return False
    log.warning(
        "%s: this graph needs autograd (grad mode is on and an input requires grad); %s compiles inference "
        "graphs only (run under torch.no_grad() or torch.inference_mode()), returning None so that a "
        "composing backend can fall back",
        backend,
        backend,
    )
    return True


def detached_clones(example_inputs: Sequence[Any]) -> list[Any]:
    """Copies of the inputs to trace or export with: tracing runs the graph, and running it on the real inputs
    would apply its in-place effects (BatchNorm's running stats) one extra time."""
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in example_inputs]


def versions_of(clones: Sequence[Any]) -> list[int]:
    """Version counters of the inputs, to compare after the graph ran on them (see `written_inputs`)."""
    return [x._version if isinstance(x, torch.Tensor) else 0 for x in clones]


def written_inputs(gm: torch.fx.GraphModule, clones: Sequence[Any], versions: Sequence[int]) -> list[str]:
    """The graph inputs that the graph writes in place, after it ran (traced) on `clones`: those whose version
    counter moved (an in-place op on them or a view of them), and BatchNorm running stats updated in train mode
    (the native kernel writes them without bumping their version counter)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = {
        placeholders[i].name
        for i, (x, v) in enumerate(zip(clones, versions))
        if isinstance(x, torch.Tensor) and x._version != v and i < len(placeholders)
    }
    for node in gm.graph.nodes:
        written |= {a.name for a in batch_norm_stats_written(node) if a.op == "placeholder"}
    return sorted(written)


def returns_tuple(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph returns a tuple/list of values (framejit's graphs do) rather than one value."""
    output = gm.graph.output_node()
    return isinstance(output.args[0], (tuple, list))


def tensor_devices(example_inputs: Sequence[Any]) -> set[str]:
    return {x.device.type for x in example_inputs if isinstance(x, torch.Tensor)}


def check_outputs(
    compiled: Callable[..., Any], gm: torch.fx.GraphModule, backend: Any, backend_name: str, graph_name: str
) -> Callable[..., Any]:
    """`compiled`, checked on each call to return the graph's outputs, unless it is known to: framejit's own
    backends and the graph's own forward are not wrapped (a wrapper costs a Python call per graph call).

    The replacement code reads output i as `result[i]`: a callable that returned one tensor instead of a
    1-tuple would silently give that tensor's first row."""
    if compiled is gm or getattr(compiled, "__self__", None) is gm or is_builtin(backend):
        return compiled
    n = len(gm.graph.output_node().args[0])

    def checked_graph(*args: Any) -> Any:
        out = compiled(*args)
        if not isinstance(out, (tuple, list)) or len(out) != n:
            what = (
                f"a {type(out).__name__} of {len(out)} value(s)"
                if isinstance(out, (tuple, list))
                else f"a value of type {type(out).__name__}, not a tuple or list"
            )
            raise BackendOutputError(
                f"backend {backend_name!r}: the callable it compiled {graph_name} to returned "
                f"{what}; framejit expects a tuple or list of the graph's {n} output(s), "
                f"as gm.forward returns"
            )
        return out

    return checked_graph
