"""The public entry points: optimize, compile, optimize_assert, run, disable, reset."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

from framejit import eval_frame, logs
from framejit.backends.registry import backend_name, lookup_backend


def optimize(
    backend: Any = "inductor",
    *,
    nopython: bool = False,
    dynamic: bool | None = None,
    guard_export_fn: Callable | None = None,
    guard_fail_fn: Callable | None = None,
    disable: bool = False,
) -> Any:
    """A context that captures frames into graphs compiled by `backend`: decorator, module wrapper,
    or `with` block (capturing the frames called inside it)."""
    if disable or _disabled_by_environment():
        return _Identity()
    logs.sections()  # a misspelt FRAMEJIT_LOGS fails here, at the call that set up capture
    compiler = lookup_backend(backend)
    name = backend if isinstance(backend, str) else backend_name(compiler)
    return eval_frame.make_context(
        compiler, name, nopython=nopython, dynamic=dynamic, guard_fail_fn=guard_fail_fn, guard_export_fn=guard_export_fn
    )


def _disabled_by_environment() -> bool:
    """FRAMEJIT_DISABLE=1 turns compiling off without a code change (torch.compile's TORCH_COMPILE_DISABLE)."""
    return os.environ.get("FRAMEJIT_DISABLE", "") == "1"


def optimize_assert(backend: Any = "inductor", **kwargs: Any) -> Any:
    """optimize(backend, nopython=True): the first graph break raises framejit.exc.Unsupported."""
    return optimize(backend, nopython=True, **kwargs)


def compile(
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> Any:
    """Like torch.compile: `compile(fn)`, `@compile`, `@compile(backend=..., fullgraph=True)`."""
    if model is None:
        return functools.partial(
            compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if not callable(model):
        raise TypeError(f"framejit.compile expects a function or nn.Module, got {type(model).__name__}")
    if disable or _disabled_by_environment():
        return model
    logs.sections()
    compiler = lookup_backend(backend)
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"framejit.compile: options must be a dict of backend options, got {type(options).__name__}")
    if mode is not None or options:
        if not getattr(compiler, "accepts_mode_and_options", False):
            raise ValueError(f"backend {backend!r} does not take mode/options")
        check = getattr(compiler, "check_mode_and_options", None)
        if check is not None:  # an unknown mode or option fails here, as torch.compile's do, not at the first call
            check(mode, options)
        compiler = functools.partial(compiler, mode=mode, options=options)
    name = backend if isinstance(backend, str) else backend_name(compiler)
    return eval_frame.make_context(compiler, name, nopython=fullgraph, dynamic=dynamic)(model)


def run(fn: Any = None) -> Any:
    """Run-only mode: use what is already compiled, never compile anything new."""
    return eval_frame.RUN_ONLY if fn is None else eval_frame.RUN_ONLY(fn)


class _Identity:
    """optimize(..., disable=True): leaves code alone."""

    def __call__(self, fn: Any) -> Any:
        return fn

    def __enter__(self) -> "_Identity":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


disable = eval_frame.disable
reset = eval_frame.reset
OptimizedModule = eval_frame.OptimizedModule
