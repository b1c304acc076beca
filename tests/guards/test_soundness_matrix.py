"""Guards are sound for everything traced code can observe about its inputs, under every shape
policy.

Each property is a function whose result depends on that property alone, and two ways to make its input: the
base one and one where the property differs. Each policy compiles the function anew and calls it with a sequence
that changes sizes (so that automatic dynamic shapes make dims symbolic) and then the property, back and forth:
each call's result must equal eager's. A guard that forgot the property would run the code compiled for the other
value and give the other branch's result. The policies: static, automatic dynamic, dynamic=True, mark_dynamic,
and "unbacked" (fullgraph, with a data-dependent size in the graph); each under eager and aot_eager, which
compiles for the inputs' aliasing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import pytest
import torch
from torch import nn

import framejit


@dataclasses.dataclass
class Prop:
    name: str
    fn: Callable[..., Any]
    make: Callable[[bool, int], tuple]  # (changed, n) -> the arguments; n is the size of dim 0
    state: Callable[[bool], Any] = lambda changed: contextlib.nullcontext()  # global state around a call


def _t(n, *rest):
    return torch.randn(n, *rest)


def _branch_on(read):
    def fn(x):
        return x + 1 if read(x) else x - 1

    fn.__name__ = f"branch_on_{read.__name__}"
    return fn


def contiguous(x):
    return x.is_contiguous()


def channels_last(x):
    return x.is_contiguous(memory_format=torch.channels_last)


def is_float64(x):
    return x.dtype == torch.float64


def on_cpu(x):
    return x.device.type == "cpu"


def densified_if_sparse(x):
    return x.to_dense() * 2 if x.is_sparse else x * 2


def requires_grad(x):
    return x.requires_grad


def is_leaf(x):
    return x.is_leaf


def times_size(x):
    return x * x.shape[-1]


def times_stride(x):
    return x * x.stride(0)


def plus_offset(x):
    return x + x.storage_offset()


def writes_first(x, y):
    x.add_(1)
    return y * 2


def writes_wrapper_subclass(t):
    t.add_(1)  # once into each inner tensor: twice into one shared by both
    return t.a + t.b * 10


def _two_tensor(changed, n):
    from torch.testing._internal.two_tensor import TwoTensor

    a = _t(n, 4)
    return (TwoTensor(a, a if changed else a.clone()),)


def reads_grad_mode(x):
    return x + 1 if torch.is_grad_enabled() else x - 1


def reads_autocast(x):
    return x + 1 if torch.is_autocast_enabled("cpu") else x - 1


def reads_default_dtype(x):
    return x + torch.ones(x.shape[-1])


def reads_deterministic(x):
    return x + 1 if torch.are_deterministic_algorithms_enabled() else x - 1


def _leaf_or_not(changed, n):
    x = _t(n, 4).requires_grad_()
    return ((x * 1) if changed else x,)


@contextlib.contextmanager
def _setting(get, set_, value):
    """A global setting changed for the block (`set_(value)`), then put back."""
    before = get()
    set_(value)
    try:
        yield
    finally:
        set_(before)


PROPS = [
    Prop("size", times_size, lambda changed, n: (_t(n, 5 if changed else 4),)),
    Prop("stride", times_stride, lambda changed, n: (_t(4, n).t() if changed else _t(n, 4),)),
    Prop("contiguous/transposed", _branch_on(contiguous), lambda changed, n: (_t(4, n).t() if changed else _t(n, 4),)),
    Prop(
        "contiguous/step-sliced",
        _branch_on(contiguous),
        lambda changed, n: (_t(n, 8)[:, ::2] if changed else _t(n, 4),),
    ),
    Prop(
        "contiguous/expanded",
        _branch_on(contiguous),
        lambda changed, n: (_t(1, 4).expand(n, 4) if changed else _t(n, 4),),
    ),
    Prop(
        "channels_last",
        _branch_on(channels_last),
        lambda changed, n: (_t(n, 3, 4, 4).to(memory_format=torch.channels_last) if changed else _t(n, 3, 4, 4),),
    ),
    Prop("storage offset", plus_offset, lambda changed, n: (_t(n + 1, 4)[1:] if changed else _t(n, 4),)),
    Prop("dtype", _branch_on(is_float64), lambda changed, n: (_t(n, 4).double() if changed else _t(n, 4),)),
    Prop("device", _branch_on(on_cpu), lambda changed, n: (_t(n, 4).to("meta") if changed else _t(n, 4),)),
    Prop("layout", densified_if_sparse, lambda changed, n: (_t(n, 4).to_sparse() if changed else _t(n, 4),)),
    Prop("requires_grad", _branch_on(requires_grad), lambda changed, n: (_t(n, 4).requires_grad_(changed),)),
    Prop("is_leaf", _branch_on(is_leaf), _leaf_or_not),
    Prop("aliasing", writes_first, lambda changed, n: (lambda a: (a, a) if changed else (a, a.clone()))(_t(n, 4))),
    Prop(
        "aliasing of views",
        writes_first,  # the first argument a row of the second, or not
        lambda changed, n: (lambda a: (a[0], a) if changed else (a[0].clone(), a))(_t(n, 4)),
    ),
    Prop(
        "which row an aliased view is",
        writes_first,  # the same aliasing, another storage offset
        lambda changed, n: (lambda a: (a[2] if changed else a[1], a))(_t(n, 4)),
    ),
    Prop("a wrapper subclass's inner aliasing", writes_wrapper_subclass, _two_tensor),
    Prop(
        "grad mode",
        reads_grad_mode,
        lambda changed, n: (_t(n, 4),),
        state=lambda changed: torch.no_grad() if changed else contextlib.nullcontext(),
    ),
    Prop(
        "autocast",
        reads_autocast,
        lambda changed, n: (_t(n, 4),),
        state=lambda changed: torch.autocast("cpu") if changed else contextlib.nullcontext(),
    ),
    Prop(
        "default dtype",
        reads_default_dtype,
        lambda changed, n: (_t(n, 4),),
        state=lambda changed: _setting(
            torch.get_default_dtype, torch.set_default_dtype, torch.float64 if changed else torch.float32
        ),
    ),
    Prop(
        "deterministic algorithms",
        reads_deterministic,
        lambda changed, n: (_t(n, 4),),
        state=lambda changed: _setting(
            torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms, changed
        ),
    ),
]

POLICIES = ["static", "automatic", "dynamic=True", "mark_dynamic", "unbacked"]
# (changed, size of dim 0): sizes change first, so automatic dynamic makes dim 0 symbolic before the property does
CALLS = [(False, 3), (False, 5), (True, 5), (False, 6), (True, 7), (True, 3), (False, 3)]


def _with_an_unbacked_size(fn):
    """`fn` in a graph that also holds a data-dependent size (the "unbacked" policy compiles it fullgraph)."""

    def with_unbacked(*args):
        n = torch.arange(3).nonzero().shape[0]
        return fn(*args) + torch.ones(n).sum() * 0

    return with_unbacked


def _compiled(fn, policy, backend):
    if policy == "unbacked":
        return framejit.compile(_with_an_unbacked_size(fn), backend=backend, fullgraph=True)
    return framejit.compile(fn, backend=backend, dynamic={"static": False, "dynamic=True": True}.get(policy))


def _arguments(prop, changed, n, policy):
    """The arguments of one call; under mark_dynamic, dim 0 of each tensor is marked."""
    args = prop.make(changed, n)
    if policy == "mark_dynamic":
        for a in args:
            if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] > 1:
                framejit.mark_dynamic(a, 0)
    return args


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])  # AOTAutograd compiles for the inputs' aliasing
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("prop", PROPS, ids=[p.name for p in PROPS])
def test_a_changed_property_recompiles_or_cannot_matter(prop, policy, backend):
    compiled = _compiled(prop.fn, policy, backend)
    for i, (changed, n) in enumerate(CALLS):
        torch.manual_seed(i)
        args = _arguments(prop, changed, n, policy)
        torch.manual_seed(i)  # the same values, layouts and aliasing, made again
        eager_args = prop.make(changed, n)
        with prop.state(changed):
            want = prop.fn(*eager_args)
        with prop.state(changed):
            got = compiled(*args)
        assert got.dtype == want.dtype and got.shape == want.shape, (prop.name, policy, i)
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"{prop.name}, {policy}, call {i}")
        for a, b in zip(args, eager_args):  # writes into the arguments too (aliasing)
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"{prop.name}, {policy}, call {i}: an argument")


class _Flagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        return y + 1 if self.training else y - 1


@pytest.mark.parametrize("policy", POLICIES)
def test_a_module_training_flag_and_hooks(policy):
    model = _Flagged()
    compiled = _compiled(model, policy, "eager")
    handle = None
    for i, (changed, n) in enumerate(CALLS):
        x = _arguments(Prop("", None, lambda c, n: (_t(n, 4),)), changed, n, policy)[0]
        model.train(not changed)
        if i == 4:  # a forward hook added between calls must run from then on
            handle = model.linear.register_forward_hook(lambda mod, inp, out: out * 3)
        if i == 6:
            handle.remove()
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0, msg=f"{policy}, call {i}")
