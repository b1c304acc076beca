"""Per-code cache entries kept in co_extra by the C hook, their size limit, invalidation and reset."""

from __future__ import annotations

import dataclasses
import itertools
import types
import weakref
from typing import Any

from framejit._C import _hook
from framejit.contracts import CacheEntry, CompiledFrame

SKIP = _hook.SKIP

_frames: "weakref.WeakKeyDictionary[Any, CompiledFrame]" = weakref.WeakKeyDictionary()
_codes: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()  # codes with something in co_extra
# per live entry: weak references to its guard function and to the objects it is guarded on by identity, whose
# callbacks drop the entry (and forget them all, so that nothing outlives the entry)
_watchers: dict[int, list[weakref.ref]] = {}
_tokens = itertools.count()


def entries(code: types.CodeType, owner: Any = None) -> list[CacheEntry]:
    """The cache list of `code` (the live list), or only the entries of `owner`."""
    extra = _hook.get_extra(code)
    cache = extra if isinstance(extra, list) else []
    return cache if owner is None else [e for e in cache if e.owner is owner]


def compiled_frames(code: types.CodeType, owner: Any = None) -> list[CompiledFrame]:
    return [
        dataclasses.replace(_frames[e.guard_fn], guard_fn=e.guard_fn)
        for e in entries(code, owner)
        if e.guard_fn in _frames
    ]


def mark_skip(code: types.CodeType) -> None:
    _hook.set_extra(code, SKIP)
    _codes.add(code)


def unmark_skip(code: types.CodeType) -> None:
    """Let the hook ask about `code` again (a frame refused before that is now to be captured)."""
    if _hook.get_extra(code) is SKIP:
        _hook.set_extra(code, None)


def install(code: types.CodeType, frame: CompiledFrame, owner: Any) -> CacheEntry:
    """Add an entry for `frame` to `code`'s cache (newest first) and return it."""
    _hook.set_extra(frame.code, SKIP)  # the replacement's own frames must pass straight through
    entry = CacheEntry(
        guard_fn=frame.guard_fn,
        code=frame.code,
        memo=[None, None, None],
        owner=owner,
        runs_graphs=bool(frame.graph_names),
    )
    cache = entries(code)
    if not cache:
        cache = []
        _hook.set_extra(code, cache)
        _codes.add(code)
    cache.insert(0, entry)
    _frames[frame.guard_fn] = dataclasses.replace(frame, watched=(), guard_fn=None)
    token, code_ref, get_extra = next(_tokens), weakref.ref(code), _hook.get_extra

    def drop(ref: weakref.ref) -> None:  # holds only weak references: never keeps a dead entry alive
        refs = _watchers.pop(token, None)
        guard = refs[0]() if refs else None  # None once the entry itself died (its code was freed)
        live_code = code_ref()
        cache = get_extra(live_code) if live_code is not None and guard is not None else None
        if isinstance(cache, list):  # (module globals may already be gone at interpreter exit)
            cache[:] = [e for e in cache if e.guard_fn is not guard]

    _watchers[token] = [weakref.ref(frame.guard_fn, drop), *(weakref.ref(obj, drop) for obj in frame.watched)]
    return entry


def replacement_function(entry: CacheEntry, fn: types.FunctionType) -> types.FunctionType:
    """The replacement for a call of `fn`: its globals and closure, the entry's code."""
    return types.FunctionType(entry.code, fn.__globals__, fn.__name__, None, fn.__closure__)


def reset() -> None:
    """Forget every entry and skip mark (the C hook then offers every frame to the callback again)."""
    for code in list(_codes):
        _hook.set_extra(code, None)
    _codes.clear()
    _frames.clear()
    _watchers.clear()


def snapshot() -> dict[types.CodeType, Any]:
    """What every code's co_extra holds now (a copy), for restore()."""
    return {
        code: (list(extra) if isinstance(extra, list) else extra)
        for code in list(_codes)
        for extra in [_hook.get_extra(code)]
    }


def restore(saved: dict[types.CodeType, Any]) -> None:
    """Put co_extra back as snapshot() saw it: entries and skip marks added since are dropped."""
    for code in list(_codes):
        _hook.set_extra(code, saved.get(code))
        if code not in saved:
            _codes.discard(code)
