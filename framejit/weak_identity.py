"""A weak-keyed mapping that tells keys apart by identity: for per-code caches."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class WeakIdentityKeyDict(Generic[K, V]):
    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, V]] = {}

    def _forget(self, key_id: int) -> Callable[[weakref.ref], None]:
        def forget(ref: weakref.ref) -> None:
            entry = self._entries.get(key_id)
            if entry is not None and entry[0] is ref:
                del self._entries[key_id]

        return forget

    # each method one frame, as WeakKeyDictionary's: some run at a frame's entry near the recursion limit
    def get(self, key: K, default: Any = None) -> V | Any:
        entry = self._entries.get(id(key))
        return entry[1] if entry is not None and entry[0]() is key else default

    def __getitem__(self, key: K) -> V:
        entry = self._entries.get(id(key))
        if entry is None or entry[0]() is not key:
            raise KeyError(key)
        return entry[1]

    def __setitem__(self, key: K, value: V) -> None:
        self._entries[id(key)] = (weakref.ref(key, self._forget(id(key))), value)

    def __contains__(self, key: K) -> bool:
        entry = self._entries.get(id(key))
        return entry is not None and entry[0]() is key

    def setdefault(self, key: K, default: V) -> V:
        entry = self._entries.get(id(key))
        if entry is not None and entry[0]() is key:
            return entry[1]
        self._entries[id(key)] = (weakref.ref(key, self._forget(id(key))), default)
        return default

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
