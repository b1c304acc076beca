"""The compiler's stance, as torch.compiler.set_stance: whether compiled functions compile, run eagerly, or refuse to
recompile. eval_frame reads it: `force_eager` where a compiled function is called, the recompile stances where a
frame misses every cache entry it has."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, TypeVar

from framejit._C import _hook

F = TypeVar("F", bound=Callable[..., Any])

# default: compile as usual; force_eager: compiled functions run as Python, nothing compiles and caches are not
# used; eager_on_recompile: a frame whose entries all miss runs as Python (its first compile still happens);
# fail_on_recompile: such a frame raises RecompileError
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


@dataclasses.dataclass(frozen=True)
class Stance:
    stance: str = "default"
    # accepted as torch's: framejit evaluates every guard anyway (always safe; never faster)
    skip_guard_eval_unsafe: bool = False


_current = [Stance()]
FORCE_EAGER = [False]  # read on every call of a compiled function: one list read, no attribute lookups


def current() -> Stance:
    return _current[0]


def _swap(new: Stance) -> Stance:
    """Make `new` the stance; the prior one is returned. Refused inside code a compiled function runs, as torch
    refuses it in a torch.compile region (the stance would change halfway through a frame)."""
    if _hook.get_callback() not in (None, False):
        raise RuntimeError(
            "framejit.set_stance was called inside a compiled function; set the stance outside it (or decorate the "
            "function that calls the compiled one)"
        )
    prior = _current[0]
    _current[0] = new
    FORCE_EAGER[0] = new.stance == "force_eager"
    return prior


class set_stance:
    """Set the compiler's stance: as a call (until set again), a context manager or a decorator (for the block or
    the decorated function's calls), like torch.compiler.set_stance."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False) -> None:
        if stance not in STANCES:
            raise ValueError(f"framejit.set_stance: unknown stance {stance!r}; valid stances: {', '.join(STANCES)}")
        self.stance = Stance(stance, skip_guard_eval_unsafe)
        self.prev = _swap(self.stance)  # a plain call sets it; `with` and decorating restore it afterwards

    def __enter__(self) -> None:
        _swap(self.stance)

    def __exit__(self, *exc: object) -> None:
        _swap(self.prev)

    def __call__(self, fn: F) -> F:
        _swap(self.prev)  # decorating sets nothing now: each call of fn does
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            prior = _swap(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _swap(prior)

        return with_stance  # type: ignore[return-value]
