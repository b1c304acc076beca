"""The backend registry: names -> compilers, filled by register_backend and the `framejit_backends` entry points."""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import Any, Iterable

from framejit.contracts import Backend

BACKENDS: dict[str, Backend] = {}
_TAGS: dict[str, tuple[str, ...]] = {}
_BUILTIN: list[Backend] = []  # framejit's own backends: what they return runs the graph and returns its outputs
ENTRY_POINT_GROUP = "framejit_backends"


def register_backend(compiler_fn: Backend | None = None, name: str | None = None, tags: Iterable[str] = ()) -> Any:
    """Register a backend; usable as `@register_backend`, `@register_backend(name=..., tags=...)` or a call."""
    if compiler_fn is None:
        return functools.partial(register_backend, name=name, tags=tags)
    if not callable(compiler_fn):
        raise TypeError(f"a backend must be callable, got {type(compiler_fn).__name__}")
    key = name or compiler_fn.__name__
    if key in BACKENDS and BACKENDS[key] is not compiler_fn:
        raise ValueError(f"a backend named {key!r} is already registered")
    BACKENDS[key] = compiler_fn
    _TAGS[key] = tuple(tags)
    if getattr(compiler_fn, "__module__", "").startswith("framejit.backends."):
        _BUILTIN.append(compiler_fn)
    return compiler_fn


def is_builtin(backend: Any) -> bool:
    """Whether `backend` is one of framejit's own (also with mode/options bound by framejit.compile)."""
    backend = backend.func if isinstance(backend, functools.partial) else backend
    return any(backend is b for b in _BUILTIN)


@functools.lru_cache(maxsize=None)
def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def lookup_backend(name: str | Backend) -> Backend:
    """A backend by name (registry first, then entry points); a callable is returned as is."""
    if callable(name):
        return name
    if not isinstance(name, str):
        raise TypeError(f"backend must be a callable or a name, got {type(name).__name__}")
    if name not in BACKENDS:
        ep = _entry_points().get(name)
        if ep is not None:
            try:
                loaded = ep.load()
            except Exception as e:  # a broken plugin package: say which entry point, keep the cause chained
                raise ImportError(
                    f"backend {name!r} comes from the entry point {ep.value!r} (group "
                    f"{ENTRY_POINT_GROUP!r}), which failed to load: {type(e).__name__}: {e}"
                ) from e
            register_backend(loaded, name=name)
    if name not in BACKENDS:
        known = ", ".join(list_backends(exclude_tags=()))
        raise ValueError(f"unknown backend {name!r}; registered backends: {known}")
    return BACKENDS[name]


def list_backends(exclude_tags: Iterable[str] | None = ("debug", "experimental")) -> list[str]:
    """Sorted names of registered (and entry-point) backends, without those carrying an excluded tag."""
    excluded = set(exclude_tags or ())
    names = set(BACKENDS) | set(_entry_points())
    return sorted(n for n in names if not excluded & set(_TAGS.get(n, ())))


def backend_name(backend: Any) -> str:
    for key, value in BACKENDS.items():
        if value is backend:
            return key
    return getattr(backend, "__name__", type(backend).__name__)
