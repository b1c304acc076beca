"""The Python side of the PEP 523 hook: optimize/run/disable contexts and the compile-on-miss callback."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import types
import warnings
import weakref
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode_stack,
    is_in_any_mode_without_ignore_compile_internals,
)

from framejit import cache, capture_policy, config, logs, policy, shapes, stance
from framejit._C import _hook
from framejit.codeobj import arg_slot_names, is_continuation
from framejit.contracts import GuardFailure
from framejit.convert import GraphCompiler, convert_frame_with_breaks
from framejit.exc import (
    BackendFallbackWarning,
    BreakCode,
    CacheLimitExceeded,
    FramejitError,
    FramejitWarning,
    InternalError,
    NothingCompiledWarning,
    RecompileError,
    Unsupported,
    fullgraph_error,
)
from framejit.break_resume import clear_resume_codes
from framejit.guards import explain_failure
from framejit.tracebacks import add_user_line_note

log = logs.log
_FRAMEJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_compile_lock = threading.RLock()
_fallback: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()  # codes that now always run as Python
_warned_limit: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_warned_frames: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()  # told that (part of) it runs as Python


def reset() -> None:
    """Drop every cache entry, skip mark and compiled graph."""
    with _compile_lock:
        cache.reset()
        clear_resume_codes()
        shapes.reset()
        _fallback.clear()
        _warned_limit.clear()
        _warned_frames.clear()


def snapshot_state() -> tuple:
    """The cache and fallback marks as they are now (explain() restores them afterwards)."""
    with _compile_lock:
        return cache.snapshot(), set(_fallback), set(_warned_limit)


def restore_state(state: tuple) -> None:
    saved, fallback, warned = state
    with _compile_lock:
        cache.restore(saved)
        _fallback.clear()
        _fallback.update(fallback)
        _warned_limit.clear()
        _warned_limit.update(warned)


class FrameCallback:
    """Called by the C hook for a frame with no matching cache entry (see _hook.set_callback)."""

    def __init__(
        self,
        compiler: GraphCompiler,
        *,
        nopython: bool,
        guard_fail_fn: Callable | None,
        guard_export_fn: Callable | None,
    ) -> None:
        self.compiler = compiler
        self.nopython = nopython
        self.guard_fail_fn = guard_fail_fn
        self.guard_export_fn = guard_export_fn
        self.graph_count = 0  # graphs compiled so far
        self.mode_runs = 0  # frames run as Python under a user's TorchDispatchMode
        self.warned_mode = False

    def __call__(self, fn: types.FunctionType, args: tuple) -> Callable | None:
        code = fn.__code__
        if code in _fallback and not self.nopython:
            return None
        if torch.fx._symbolic_trace._is_fx_tracing_flag:  # fx.symbolic_trace calls it with Proxies: leave them to fx
            return None
        if torch._C._functorch.peek_interpreter_stack() is not None:  # inside an eager vmap/grad: its arguments are
            return None  # functorch's wrapped tensors, which fake tensors cannot stand for
        if _in_eager_checkpoint():
            return None
        reason = capture_policy.capture_refusal(code)
        if reason is not None or policy.is_disabled(fn):
            cache.mark_skip(code)
            return None
        if is_in_any_mode_without_ignore_compile_internals():
            self._run_under_dispatch_mode(code)
            return None
        logs.apply_level(config.log_level)
        with _compile_lock:
            existing = cache.entries(code, self)
            for entry in existing:  # another thread may have compiled it meanwhile
                try:
                    if entry.guard_fn(fn, *args):
                        return cache.replacement_function(entry, fn)
                except Exception:  # as in C: a guard that raises is a miss
                    pass
            if existing and stance.current().stance != "default":
                return self._refuse_recompile(fn, args)
            if existing and not self._recompile_allowed(fn, args):
                return None
            return self._compile(fn, args, bool(existing))

    def _run_under_dispatch_mode(self, code: types.CodeType) -> None:
        """A user's TorchDispatchMode is active (FlopCounterMode, a logging mode): the frame runs as Python, so
        that the mode sees eager's ops (a backend's would be others, and the trace's fakes would reach it), as
        torch.compile does; said once (each frame under the mode comes here at every call: nothing more is done)."""
        self.mode_runs += 1
        if self.warned_mode:
            return
        self.warned_mode = True
        modes = [type(m).__qualname__ for m in _get_current_dispatch_mode_stack() if not m.ignore_compile_internals()]
        warnings.warn(
            f"framejit runs frames as Python while a TorchDispatchMode ({', '.join(modes) or 'its handler'}) is "
            f"active, so that it sees eager's ops, as torch.compile does: {frame_label(code)} and what it calls "
            "are not compiled",
            FramejitWarning,
            stacklevel=user_stacklevel(),
        )

    def _refuse_recompile(self, fn: types.FunctionType, args: tuple) -> None:
        """set_stance("eager_on_recompile"): run the frame as Python (its entries still serve later calls);
        set_stance("fail_on_recompile"): raise, saying which guard missed."""
        code = fn.__code__
        if stance.current().stance == "eager_on_recompile":
            log.info("framejit runs %s as Python instead of recompiling it (set_stance)", frame_label(code))
            return None
        frames = cache.compiled_frames(code, self)
        failed = frames and explain_failure(list(frames[0].guards), frames[0].constants, fn, arg_slot_names(code), args)
        why = f": {failed[1]}" if failed else ""
        raise RecompileError(
            f"framejit would recompile {frame_label(code)}, which set_stance('fail_on_recompile') forbids{why}"
        )

    def _recompile_allowed(self, fn: types.FunctionType, args: tuple) -> bool:
        """Report why the entries missed (guard_fail_fn, logs); False once the cache size limit is reached."""
        code = fn.__code__
        frames = cache.compiled_frames(code, self)
        same = _for_same_objects(code, frames, args)
        limit = _reached_limit(frames, same)
        if limit is not None:
            name, value, count = limit
            if code not in _warned_limit:
                _warned_limit.add(code)
                warnings.warn(
                    f"framejit: {frame_label(code)} was recompiled {count} times, reaching "
                    f"config.{name}={value}; it now runs as plain Python for new inputs",
                    stacklevel=user_stacklevel(),
                )
            if self.nopython:
                raise CacheLimitExceeded(f"{frame_label(code)} reached config.{name}={value} under fullgraph=True")
            _fallback.add(code)
            return False
        if same:  # else this is the first compile for these objects (another module instance), not a recompile
            failed = explain_failure(list(same[0].guards), same[0].constants, fn, arg_slot_names(code), args)
            # (none explains it: a guard whose check raised, which counts as a miss)
            why = failed[1] if failed is not None else "no guard explains the miss (one that raised counts as one)"
            if logs.enabled("recompiles", config.debug):
                print(f"RECOMPILING {frame_label(code)}: {why}")
            log.info("recompiling %s: %s", code.co_name, why)
            if failed is not None and self.guard_fail_fn is not None:
                self.guard_fail_fn(GuardFailure(code=code, guard=failed[0], reason=why))
        return True

    def _compile(self, fn: types.FunctionType, args: tuple, has_entries: bool) -> Callable | None:
        code = fn.__code__
        options = config.snapshot()
        logs.sections()  # a misspelt FRAMEJIT_LOGS is the user's error, not a reason to run as Python
        try:
            with _no_saved_tensor_hooks():
                compiled = convert_frame_with_breaks(fn, args, options, self.compiler, nopython=self.nopython)
        except Unsupported as e:
            if self.nopython:
                raise fullgraph_error(e) from None
            log.info("framejit runs %s as Python: %s", frame_label(code), e)
            self._give_up(code, has_entries)
            return None
        except RecursionError:  # too deep to compile from here; Python runs it as it would have (later calls retry)
            log.info("framejit runs %s as Python: the stack is too deep to compile it here", frame_label(code))
            return None
        except Exception as e:  # a backend failure or a bug in framejit; BaseExceptions pass through untouched
            error = (
                e
                if isinstance(e, FramejitError)
                else InternalError(
                    f"internal error while compiling {frame_label(code)}: {type(e).__name__}: {e}\n(set "
                    f"framejit.config.suppress_errors = True to run such frames as Python instead)"
                )
            )
            if self.nopython or not options.suppress_errors:
                if error is e:
                    raise
                raise error from e
            warnings.warn(
                f"framejit: {error}; running {frame_label(code)} as Python (config.suppress_errors)",
                stacklevel=user_stacklevel(),
            )
            _warned_frames.add(code)
            if options.verbose:
                log.warning("framejit: what made %s run as Python:", frame_label(code), exc_info=e)
            self._give_up(code, has_entries)
            return None
        if compiled is None or (
            compiled.passthrough and not compiled.reads_tensors and not has_entries and not is_continuation(code)
        ):
            self._give_up(code, has_entries, nothing_to_compile=True)  # a plain Python helper: skip it
            return None
        if options.warn_on_fallback:
            _warn_fallback(code, compiled.graph_fates)
        self.graph_count += len(compiled.graph_names)
        entry = cache.install(code, compiled, self)
        if self.guard_export_fn is not None:
            self.guard_export_fn(list(compiled.guards))
        return cache.replacement_function(entry, fn)

    @staticmethod
    def _give_up(code: types.CodeType, has_entries: bool, nothing_to_compile: bool = False) -> None:
        """Run this code as Python from now on: skipped in C when nothing could ever be compiled for it,
        else remembered here (a later fullgraph context must still see it fail, and raise)."""
        if nothing_to_compile and not has_entries:
            cache.mark_skip(code)
        else:
            _fallback.add(code)


def _warn_fallback(code: types.CodeType, fates: tuple) -> None:
    """Once per frame: the graphs of it that the backend did not compile, and why."""
    fell_back = [f for f in fates if f.fell_back]
    if not fell_back or code in _warned_frames:
        return
    _warned_frames.add(code)
    reasons = "; ".join(dict.fromkeys(r for f in fell_back for r in f.torch_ops))
    warnings.warn(
        f"framejit: backend {fell_back[0].backend!r} did not compile {len(fell_back)} of the "
        f"{len(fates)} graph(s) of {frame_label(code)}: they run as their torch ops ({reasons}); results "
        f"are as eager's (config.warn_on_fallback = False silences this)",
        BackendFallbackWarning,
        stacklevel=user_stacklevel(),
    )


def frame_label(code: types.CodeType) -> str:
    """How messages name a frame: its function and where it is defined (a continuation: the function it
    continues)."""
    after = ", after a graph break" if is_continuation(code) else ""
    return f"{code.co_qualname}{after} ({code.co_filename}:{code.co_firstlineno})"


def user_stacklevel() -> int:
    """The `stacklevel` that makes a warning point at the innermost frame outside framejit and torch: the user's
    call of the function or module being compiled."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith((_FRAMEJIT_DIR, _TORCH_DIR)):
        frame, level = frame.f_back, level + 1
    return level


def _in_eager_checkpoint() -> bool:
    """Inside a checkpointed region that runs as Python (a break at its `checkpoint` call): its frames run as
    Python too, uncached. Backward recomputes the region outside framejit's context, as plain Python; a compiled
    frame in the forward may take another path (model code branches on `is_compiling()`: Mixtral's experts) and
    save other tensors, which checkpoint refuses ("Recomputed values ... have different metadata")."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    return (
        hooks is not None
        and torch.is_grad_enabled()
        and getattr(hooks[0], "__module__", None) == "torch.utils.checkpoint"
    )


@contextlib.contextmanager
def _no_saved_tensor_hooks() -> Iterator[None]:
    """Compile outside the user's saved-tensor hooks: non-reentrant activation checkpointing counts the tensors
    autograd saves, and the fake-tensor ops of a trace must not be counted as the user's forward."""
    stack = []
    while (top := torch._C._autograd._top_saved_tensors_default_hooks(True)) is not None:
        stack.append(top)
        torch._C._autograd._pop_saved_tensors_default_hooks()
    try:
        yield
    finally:
        for pack, unpack in reversed(stack):
            torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)


def _for_same_objects(code: types.CodeType, frames: list, args: tuple) -> list:
    """The entries made for the same objects guarded by identity as this call's arguments (its `self`)."""
    values = dict(zip(arg_slot_names(code), args))
    return [f for f in frames if all(id(values.get(name)) == ident for name, ident in f.identity)]


def _reached_limit(frames: list, same: list) -> tuple[str, int, int] | None:
    """(setting, value, entries) when compiling once more would pass a cache size limit, else None.

    `cache_size_limit` counts only the entries made for the same objects (`same`: arguments guarded by identity,
    and modules, guarded by type): compiling each of many nn.Linear layers of other shapes on its own is not
    recompiling. `accumulated_cache_size_limit` bounds them all together."""
    if len(frames) >= config.accumulated_cache_size_limit:
        return "accumulated_cache_size_limit", config.accumulated_cache_size_limit, len(frames)
    if len(same) >= config.cache_size_limit:
        return "cache_size_limit", config.cache_size_limit, len(same)
    return None


class _Context:
    """What optimize()/run()/disable() return: a decorator, module wrapper and context manager in one."""

    def __init__(self, callback: Any) -> None:
        self.callback = callback  # a FrameCallback, False (run only) or None (disabled)
        self._local = threading.local()  # one context object may be entered in several threads

    def __enter__(self) -> "_Context":
        prior = getattr(self._local, "prior", None)
        if prior is None:
            prior = self._local.prior = []
        prior.append(_hook.set_callback(None if stance.FORCE_EAGER[0] else self.callback))
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        _hook.set_callback(self._local.prior.pop())
        if isinstance(exc, Exception):
            add_user_line_note(exc)

    def __call__(self, fn: Any) -> Any:
        # the outermost context wins, as in TorchDynamo: optimize(a)(optimize(b)(f)) compiles f with a, and
        # run()(optimize(b)(f)) runs f's cache; a disabled function stays disabled
        if isinstance(fn, OptimizedModule):
            fn = fn._orig_mod
        elif hasattr(fn, "_framejit_orig") and not policy.is_disabled(fn) and self.callback is not None:
            fn = fn._framejit_orig
        if isinstance(fn, nn.Module):
            return OptimizedModule(fn, self)
        if not callable(fn):
            raise TypeError(f"framejit expects a function or nn.Module, got {type(fn).__name__}")
        if isinstance(fn, type):
            raise TypeError(f"framejit expects a function or nn.Module instance, got the class {fn.__name__}")
        return self.wrap(fn, _code_of(fn))

    def wrap(self, fn: Any, entry: types.CodeType | None) -> Any:
        """`fn` run under this context; `entry` is the code of the frame the user handed over (a function's own,
        a module's forward), whose first call says so if nothing gets compiled (`_before_first_call`)."""
        callback, call = self.callback, _hook.call_with_callback
        unchecked = [isinstance(callback, FrameCallback) and entry is not None]

        force_eager = stance.FORCE_EAGER

        @functools.wraps(fn)
        def framejit_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:  # (free in CPython 3.11 unless it raises)
                if force_eager[0]:  # set_stance("force_eager"): fn and what it calls run as Python
                    return call(None, fn, *args, **kwargs)
                if unchecked[0]:  # (the call itself stays here: a frame of ours would deepen the user's stack)
                    unchecked[0] = False
                    graphs = _before_first_call(entry, callback)
                    result = call(callback, fn, *args, **kwargs)
                    _after_first_call(entry, callback, graphs)
                    return result
                return call(callback, fn, *args, **kwargs)
            except Exception as e:
                add_user_line_note(e)
                raise

        framejit_wrapper._framejit_orig = fn  # type: ignore[attr-defined]
        framejit_wrapper._framejit_context = self  # type: ignore[attr-defined]
        return framejit_wrapper


def unwrap(fn: Any) -> tuple[Any, GraphCompiler | None]:
    """What a framejit wrapper (a compiled function or OptimizedModule) runs, and the compiler it runs it with;
    anything else as it is, with None."""
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod, unwrap(fn.forward)[1]
    context = getattr(fn, "_framejit_context", None)
    callback = getattr(context, "callback", None)
    if isinstance(callback, FrameCallback):
        return fn._framejit_orig, callback.compiler
    return fn, None


class OptimizedModule(nn.Module):
    """An nn.Module whose calls run under a framejit context; the original is at `._orig_mod`."""

    def __init__(self, mod: nn.Module, ctx: _Context) -> None:
        super().__init__()
        self._orig_mod = mod
        self.forward = module_call(mod, mod.__call__, ctx, self)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def module_call(mod: nn.Module, call: Callable, ctx: _Context, owner: Any) -> Callable:
    """`call` (a call of `mod`) run under `ctx`: the frame handed over is `mod`'s forward, captured while `owner`
    lives even where its file is refused (optimize(nn.Linear(...)) captures Linear.forward)."""
    policy.mark_compiled_module(mod)
    return ctx.wrap(call, force_forward_capture(mod, owner))


def force_forward_capture(mod: nn.Module, owner: Any) -> types.CodeType | None:
    """Capture frames of `mod`'s forward while `owner` lives, even where its file is refused (nn.Linear's);
    its code, if Python."""
    forward = getattr(type(mod).forward, "__code__", None)
    if forward is not None:
        capture_policy.force_capture(forward, owner)
        cache.unmark_skip(forward)  # (its file's refusal, met where it ran as Python under framejit before)
    return forward


def _code_of(fn: Any) -> types.CodeType | None:
    """The code of the frame a call of `fn` runs first (a bound method's function's), if it is Python code."""
    return getattr(getattr(fn, "__func__", fn), "__code__", None)


def _before_first_call(entry: types.CodeType, callback: FrameCallback) -> tuple[int, int, int] | None:
    """Before the first call of a function or module handed to framejit: a frame framejit will not capture is an
    error under fullgraph=True, and otherwise a warning (never a silent run as plain Python). (The number of graphs
    compiled so far, the hook's count of cached graph code run so far), or None where that was said."""
    reason = capture_policy.capture_refusal(entry)
    if reason is None:
        return callback.graph_count, _hook.get_stats()["graph_hits"], callback.mode_runs
    message = (
        f"framejit captures nothing in {frame_label(entry)}, the frame it was given: it is {reason}, which "
        f"framejit runs as Python (what it calls is still captured where it is user code)"
    )
    if callback.nopython:
        raise Unsupported(f"fullgraph=True: {message}", code=BreakCode.SKIPPED_FILE)
    warnings.warn(message, NothingCompiledWarning, stacklevel=user_stacklevel())
    return None


def _after_first_call(entry: types.CodeType, callback: FrameCallback, before: tuple[int, int, int] | None) -> None:
    """After it: a first call that compiled no graph anywhere, ran none compiled before (a frame the call reached
    may reuse the graph another instance of its module compiled), ran nothing as Python under a dispatch mode
    (said already), and has none for its frame, warns."""
    if (
        before is None
        or (callback.graph_count, _hook.get_stats()["graph_hits"], callback.mode_runs) != before
        or entry in _warned_frames
        or any(frame.graph_names for frame in cache.compiled_frames(entry))
    ):
        return
    warnings.warn(
        f"framejit compiled no graph in the first call of {frame_label(entry)}: no frame it ran had torch "
        f"ops framejit could capture (FRAMEJIT_LOGS=breaks says where it broke)",
        NothingCompiledWarning,
        stacklevel=user_stacklevel(),
    )


_callbacks: "weakref.WeakValueDictionary[tuple, FrameCallback]" = weakref.WeakValueDictionary()


def make_context(
    backend: Callable,
    backend_name: str,
    *,
    nopython: bool = False,
    dynamic: bool | None = None,
    guard_fail_fn: Callable | None = None,
    guard_export_fn: Callable | None = None,
    on_graph: Callable | None = None,
    on_break: Callable | None = None,
) -> _Context:
    """A context for this backend and these options; contexts made with the same ones share one
    callback, and so one set of cache entries (the callback holds them all alive, so ids are stable)."""
    key = (
        id(backend),
        backend_name,
        nopython,
        dynamic,
        id(guard_fail_fn),
        id(guard_export_fn),
        id(on_graph),
        id(on_break),
    )
    callback = _callbacks.get(key)
    if callback is None:
        compiler = GraphCompiler(backend, backend_name, on_graph, on_break, dynamic)
        callback = FrameCallback(
            compiler, nopython=nopython, guard_fail_fn=guard_fail_fn, guard_export_fn=guard_export_fn
        )
        callback.keepalive = (guard_fail_fn, guard_export_fn, on_graph, on_break)
        _callbacks[key] = callback
    return _Context(callback)


RUN_ONLY = _Context(False)


def disable(fn: Any = None, recursive: bool = True) -> Any:
    """Never capture fn (and, if recursive, anything it calls); with no fn, a context manager / decorator."""
    if fn is None:
        return _Context(None) if recursive else _NonRecursiveDisable()
    if not callable(fn):
        raise TypeError(f"framejit.disable expects a callable, got {type(fn).__name__}")
    policy.mark_disabled(fn)
    if not recursive:
        code = getattr(fn, "__code__", None)
        if code is not None:
            cache.mark_skip(code)
        return fn
    wrapped = _Context(None)(fn)
    policy.mark_disabled(wrapped)
    return wrapped


class _NonRecursiveDisable:
    def __call__(self, fn: Any) -> Any:
        return disable(fn, recursive=False)
