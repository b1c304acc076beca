"""The cost of one guard check of a Hugging Face model's forward entry, framejit's and torch.compile's side by side.

    python benchmarks/guard_time.py [bert|roberta|vit|...] [--listing]

Each JIT compiles the bench's quick-size model (backend eager), runs three training steps, and its cache entry's
guard is then called with the arguments of that call (framejit: the guard program, `guard(fn, *arg_slots)`;
torch.compile: `guard_manager.check(f_locals)`), best of 7 rounds of 20,000 calls. Needs the `hf` extra.
"""

from __future__ import annotations

import argparse
import timeit
import types
from typing import Any, Callable

import torch

import framejit
from framejit import cache
from framejit.bench.hf_models import HF_SUITE

_CALLS, _ROUNDS = 20_000, 7


def _trained(jit: Callable[..., Any], name: str) -> tuple[Any, Any]:
    case = HF_SUITE[name](True)
    model = case.model.train()
    compiled = jit(model)
    for _ in range(3):
        case.loss_fn(compiled(case.x), case.target).backward()
    return model, case.x


def _slots(code: types.CodeType, model: Any, x: Any) -> dict[str, Any]:
    """The forward frame's argument slots as the model's call fills them (the first positional is the input)."""
    names = code.co_varnames[
        : code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    ]
    slots: dict[str, Any] = {names[0]: model}
    if code.co_flags & 4:  # a decorator's (self, *args, **kwargs)
        slots.update({names[1]: (x,), **({names[2]: {}} if code.co_flags & 8 else {})})
    else:
        slots.update({names[1]: x}, **{n: None for n in names[2:]})
    return slots


def _time(check: Callable[[], Any]) -> float:
    assert check() is True
    return min(timeit.repeat(check, number=_CALLS, repeat=_ROUNDS)) / _CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="bert", choices=sorted(HF_SUITE))
    parser.add_argument("--listing", action="store_true", help="print framejit's guard program")
    args = parser.parse_args()

    model, x = _trained(lambda m: framejit.compile(m, backend="eager"), args.model)
    forward = type(model).forward
    (frame,) = cache.compiled_frames(forward.__code__)
    slots = list(_slots(forward.__code__, model, x).values())
    framejit_us = _time(lambda: frame.guard_fn(forward, *slots))
    if args.listing:
        print(frame.check_fn_source)

    from torch._dynamo.eval_frame import _debug_get_cache_entry_list  # (the comparison only)

    model, x = _trained(lambda m: torch.compile(m, backend="eager"), args.model)
    forward = type(model).forward
    entry = _debug_get_cache_entry_list(forward.__code__)[0]
    f_locals = _slots(forward.__code__, model, x)
    f_locals.update((v, c.cell_contents) for v, c in zip(forward.__code__.co_freevars, forward.__closure__ or ()))
    torch_us = _time(lambda: entry.guard_manager.check(f_locals))

    print(
        f"{args.model}: framejit's guard {framejit_us:.2f} us a call ({len(frame.guards)} guards, "
        f"{frame.check_fn_source.count(chr(10))} instructions); torch.compile's {torch_us:.2f} us; "
        f"ratio {torch_us / framejit_us:.2f}x"
    )


if __name__ == "__main__":
    main()
