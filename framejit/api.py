"""The public entry points: optimize, compile, optimize_assert, run, disable, reset."""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any, Callable

from torch import nn

from framejit import eval_frame, logs
from framejit.backends.registry import backend_name, lookup_backend
from framejit.exc import FramejitWarning


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
    ctx = _compile_context(fullgraph, dynamic, backend, mode, options, disable)
    return model if ctx is None else ctx(model)


def compile_in_place(
    module: nn.Module,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> nn.Module:
    """torch's `module.compile(...)` for framejit: calls of `module` run compiled from now on, and `module` stays
    the same object (no OptimizedModule wrapper: its state_dict keys are unchanged). As nn.Module.compile does, it
    sets the module's `_compiled_call_impl`, which nn.Module.__call__ calls when set (None undoes it). Returns
    `module`."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"framejit.compile_in_place expects an nn.Module, got {type(module).__name__}")
    ctx = _compile_context(fullgraph, dynamic, backend, mode, options, disable)
    if ctx is not None:
        module._compiled_call_impl = eval_frame.module_call(module, module._call_impl, ctx, module)
    return module


def _compile_context(
    fullgraph: bool, dynamic: bool | None, backend: Any, mode: str | None, options: dict | None, disable: bool
) -> Any:
    """The context compile() applies; None where compiling is off (disable=True, FRAMEJIT_DISABLE=1)."""
    if disable or _disabled_by_environment():
        return None
    logs.sections()
    compiler = lookup_backend(backend)
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"framejit.compile: options must be a dict of backend options, got {type(options).__name__}")
    if mode == "default" and not getattr(compiler, "accepts_mode_and_options", False):
        mode = None  # torch.compile passes no mode for "default"
    if (mode is not None or options) and not getattr(compiler, "accepts_mode_and_options", False):
        _warn_ignored(backend, mode, options)  # as torch.compile, whose backends log and ignore them
    elif mode is not None or options:
        check = getattr(compiler, "check_mode_and_options", None)
        if check is not None:  # an unknown mode or option fails here, as torch.compile's do, not at the first call
            check(mode, options)
        compiler = functools.partial(compiler, mode=mode, options=options)
    name = backend if isinstance(backend, str) else backend_name(compiler)
    return eval_frame.make_context(compiler, name, nopython=fullgraph, dynamic=dynamic)


_warned_ignored: set[tuple[str, str]] = set()


def _warn_ignored(backend: Any, mode: str | None, options: dict | None) -> None:
    """Once per backend and what it ignores: a backend that takes no mode/options compiles without them."""
    name = backend if isinstance(backend, str) else backend_name(backend)
    ignored = ", ".join(f"{k}={v!r}" for k, v in (("mode", mode), ("options", options)) if v)
    if (name, ignored) in _warned_ignored:
        return
    _warned_ignored.add((name, ignored))
    warnings.warn(
        f"framejit.compile: backend {name!r} takes no mode or options; ignoring {ignored} (the inductor backend "
        f"takes them)",
        FramejitWarning,
        stacklevel=eval_frame.user_stacklevel(),
    )


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
