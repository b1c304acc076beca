"""Automatic dynamic shapes for inputs that are views (slices, transposes, narrows, strided slices, views with a
storage offset, channels_last slices, rows of unbind, expands), alone and aliased with other inputs.

Differential over many calls of changing sizes: results (and inputs written in place) equal eager's, and the
compiles counted are torch.compile's (static first, then symbolic sizes, strides and storage offsets: one
recompile, not one per size)."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend

# ten sizes; no size equals a stride or an offset of the views below (duck sizing would tie them, guarded equal)
SIZES = (16, 13, 9, 10, 5, 7, 11, 14, 3, 6)


def _gen(n: int, call: int) -> torch.Generator:
    return torch.Generator().manual_seed(100 * n + call)


VIEWS = {
    "rows": lambda n, c: torch.randn(40, 6, generator=_gen(n, c))[:n],
    "columns": lambda n, c: torch.randn(4, 40, generator=_gen(n, c))[:, :n],
    "transposed": lambda n, c: torch.randn(n, 6, generator=_gen(n, c)).t(),
    "strided columns": lambda n, c: torch.randn(5, 40, generator=_gen(n, c))[:, 1 : 2 * n + 1 : 2],
    "offset": lambda n, c: torch.randn(50, 6, generator=_gen(n, c))[c % 5 + 2 : c % 5 + 2 + n],
    "narrow": lambda n, c: torch.randn(6, 40, generator=_gen(n, c)).narrow(1, c % 3 + 2, n),
    "channels_last slice": lambda n, c: torch.randn(2, 3, n, n + 1, generator=_gen(n, c)).to(
        memory_format=torch.channels_last
    )[:, :, 1:],
    "row of unbind": lambda n, c: torch.randn(3, n, 5, generator=_gen(n, c)).unbind(0)[1],
    "expanded": lambda n, c: torch.randn(n, 1, generator=_gen(n, c)).expand(n, 4),
}


def _reduce(x):
    return (x * 2).sum(0) + x.mean(), x.shape[-1] * 2


def _write(x):
    x.mul_(2)  # a write into the caller's view (and so its base)
    return x.sum()


def _views_out(x):
    return x[1:], x.transpose(0, -1)


def _clone(x: torch.Tensor) -> torch.Tensor:
    """x in a copy of its base, with the same layout."""
    base = x._base if x._base is not None else x
    return base.clone().as_strided(x.size(), x.stride(), x.storage_offset())


def _run(fn, calls, backend=None):
    """Each call's arguments to fn compiled and to fn itself, on copies that keep their aliasing; returns the
    compiles counted."""
    cnt = CompileCounter() if backend is None else CompileCounterWithBackend(backend)
    compiled = framejit.compile(fn, backend=cnt)
    for call, args in enumerate(calls):
        theirs = _clone_aliased(args)
        got, want = compiled(*args), fn(*theirs)
        torch.testing.assert_close(got, want, msg=lambda m: f"call {call}: {m}")
        for mine, eager in zip(args, theirs):
            torch.testing.assert_close(mine, eager, msg=lambda m: f"call {call}, an argument: {m}")
    return cnt.frame_count


def _clone_aliased(args):
    copies: dict[int, torch.Tensor] = {}
    out = []
    for a in args:
        base = a._base if a._base is not None else a
        copy = copies.setdefault(id(base), base.clone())
        out.append(copy if a is base else copy.as_strided(a.size(), a.stride(), a.storage_offset()))
    return out


@pytest.mark.parametrize(
    "kind, fn",
    [
        pytest.param(kind, fn, id=f"{kind}-{fn.__name__.strip('_')}")
        for kind in VIEWS
        for fn in (_reduce, _write, _views_out)
        if (kind, fn) != ("expanded", _write)  # eager refuses a write into overlapping elements
    ],
)
def test_a_view_input_of_changing_size_compiles_twice(kind, fn):
    calls = [(VIEWS[kind](n, call),) for call, n in enumerate(SIZES)]
    assert _run(fn, calls) == 2


def test_a_view_of_a_new_layout_after_the_dynamic_compile_is_checked_again():
    # transposed views, then contiguous copies of them, then transposed again: strides are guarded and the
    # results stay eager's
    def layout(n, call):
        x = torch.randn(n, 6, generator=_gen(n, call)).t()
        return x.contiguous() if call >= 5 else x

    calls = [(layout(n, call),) for call, n in enumerate(SIZES)]
    calls += [(torch.randn(9, 6).t(),), (torch.randn(17, 6).t(),)]
    # transposed: static, then dynamic; contiguous: dynamic at once (its size had changed), as torch.compile
    assert _run(_reduce, calls) == 3


def test_reading_strides_and_the_storage_offset_of_a_dynamic_view():
    def fn(x):
        y = x * 2
        if x.is_contiguous():
            y = y + 1
        return y * x.stride(0) + x.storage_offset()

    calls = [(VIEWS["offset"](n, call),) for call, n in enumerate(SIZES)]
    calls += [(VIEWS["transposed"](n, call),) for call, n in enumerate(SIZES[:4])]
    calls += [(torch.randn(40, 6)[k : k + 8],) for k in (0, 1, 3, 4)]  # offsets 0 and 1 are constants
    assert _run(fn, calls) <= 7


def _two(a, b):
    return (a.sum(0) + b.sum(0)) * a.shape[0], a[:2].sum() + b[:2].sum()


def _write_one_read_other(a, b):
    a.mul_(2)  # seen through b where they overlap
    return a.sum(0) + b.sum(0), b * 1


def _aliased(n, call):
    base = torch.randn(40, 6, generator=_gen(n, call))
    return base[:n], base[1 : n + 1]


def _base_and_view(n, call):
    base = torch.randn(n + 3, 6, generator=_gen(n, call))
    return base, base[2:]


def _view_and_base(n, call):
    base, view = _base_and_view(n, call)
    return view, base


def _view_and_unsqueezed(n, call):
    base = torch.randn(n, 4, generator=_gen(n, call))
    return base[1:], base.unsqueeze(0)[:, 1:]


@pytest.mark.parametrize("backend", [None, "aot_eager"], ids=["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_two, _write_one_read_other], ids=["read", "write"])
@pytest.mark.parametrize("make", [_aliased, _base_and_view, _view_and_base, _view_and_unsqueezed])
def test_aliased_views_passed_together(make, fn, backend):
    calls = [make(n, call) for call, n in enumerate(SIZES)]
    assert _run(fn, calls, backend) == 2


def test_aliased_views_then_separate_tensors_recompile_on_the_storage_sharing():
    calls = [_aliased(n, call) for call, n in enumerate(SIZES[:4])]
    calls += [(torch.randn(n, 6), torch.randn(n, 6)) for n in SIZES[4:8]]
    calls += [_aliased(n, call) for call, n in enumerate(SIZES[8:])]
    assert _run(_write_one_read_other, calls) == 3  # aliased: static, dynamic; apart: dynamic (sizes seen change)


@pytest.mark.parametrize("backend", [None, "aot_eager"], ids=["eager", "aot_eager"])
def test_aliasing_that_changes_between_calls_after_the_dynamic_compile(backend):
    # AOTAutograd merges aliased inputs, one written, into their base and guards how they lie in it: the base
    # is guarded too (`a._base`), so each new way the arguments share memory is checked again, never misread
    def base(rows, width=6):
        return torch.randn(rows, width)

    def overlapping(n, rows=40, width=6):
        b = base(rows, width)
        return b[:n], b[1 : n + 1]

    def apart(n):  # one base, no element shared
        b = base(40)
        return b[:n], b[n : 2 * n]

    def a_is_the_base(n):
        a = base(n)
        return a, a[1:]

    calls = [overlapping(n) for n in SIZES[:4]]
    calls += [apart(n) for n in (5, 9, 12)]
    calls += [a_is_the_base(n) for n in (7, 11)]
    calls += [overlapping(n, rows=50) for n in (8, 13)]
    calls += [overlapping(n) for n in SIZES[4:]]
    # (torch.compile: 3. framejit also guards `a._base`, a tensor of its own layout, and its symbols meet the
    # views' by duck sizing: a few more, all below the cache size limit, so every call ran compiled code)
    assert _run(_write_one_read_other, calls, backend) <= 6


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_aliased_views_of_a_base_of_another_size_are_checked_again(backend):
    # the views are the same each call, their base is not: inductor compiled for the base AOTAutograd merged them
    # into, so that base is guarded (before, inductor's own check of its input's size failed at run time)
    def calls():
        for rows in (40, 60, 30, 60):
            base = torch.randn(rows, 6)
            yield base[:8], base[1:9]

    assert _run(_write_one_read_other, list(calls()), backend) == 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_training_through_dynamic_views_gives_eagers_gradients(backend):
    def fn(x, y):
        return (torch.softmax(x * x.shape[0], -1) * y).sum(), x * 2

    cnt = CompileCounterWithBackend(backend)
    compiled = framejit.compile(fn, backend=cnt)
    for call, n in enumerate(SIZES):
        base = torch.randn(40, 6, generator=_gen(n, call), requires_grad=True)
        twin = base.detach().clone().requires_grad_()
        mine = base * 1
        theirs = twin * 1
        got = compiled(mine[:n], mine[call % 4 + 2 : call % 4 + 2 + n])
        want = fn(theirs[:n], theirs[call % 4 + 2 : call % 4 + 2 + n])
        torch.testing.assert_close(got, want)
        (got[0] + got[1].sum()).backward()
        (want[0] + want[1].sum()).backward()
        torch.testing.assert_close(base.grad, twin.grad)
    assert cnt.frame_count == 2


def test_a_view_under_dynamic_false_stays_static():
    calls = [(VIEWS["rows"](n, call),) for call, n in enumerate(SIZES[:4])]
    cnt = CompileCounter()
    compiled = framejit.compile(_reduce, backend=cnt, dynamic=False)
    for (x,) in calls:
        torch.testing.assert_close(compiled(x), _reduce(x))
    assert cnt.frame_count == 4
