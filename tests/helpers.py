"""Helpers of the test suite: copying and comparing values, source lines and graph ops, small
functions and models to compile, backends, and recorders; each used by more than one test file,
or once defined two or three times under one name (clone, Box, Recorder, MLP, SmallCNN,
_buffers_equal, _call_targets...). Where those definitions behaved differently, each is kept under
a name that says how it differs (CompilerRecorder, CallbackRecorder, LoggingContext; DropoutMLP);
the corpus' own programs and models stay in tests/corpus/."""

from __future__ import annotations

import contextlib
import inspect
import logging
import types
from typing import Any, Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import framejit
from framejit.backends import make_boxed_func
from framejit.testing import CompileCounter, CompileCounterWithBackend, same

# ---------------------------------------------------------------------------------------------
# values: copying arguments and comparing results


def clone(value):
    """Fresh copies of tensors and containers; other objects shallow-copied when they have a __dict__."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, Box):
        return Box(**clone(vars(value)))
    return value


class ByValue:
    """An object that compares by value (its own __eq__ and __hash__), so a dict cannot key it by identity."""

    def __eq__(self, other):
        return isinstance(other, ByValue)

    def __hash__(self):
        return 1


class Box:
    """A plain user object (attributes compared by value)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __eq__(self, other):
        return type(other) is Box and _equal(vars(self), vars(other))

    def __repr__(self):
        return f"Box({vars(self)!r})"


def _equal(a, b) -> bool:
    try:
        assert_equal(a, b)
        return True
    except AssertionError:
        return False


def assert_equal(actual, expected, path="result"):
    """Recursive equality: tensors by dtype/shape/requires_grad/values; containers by type and items."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual).__name__} instead of a tensor"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert actual.requires_grad == expected.requires_grad, (
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}"
        )
        assert same(actual.detach(), expected.detach(), equal_nan=True), f"{path}: {actual} != {expected}"
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (x, y) in enumerate(zip(actual, expected)):
            assert_equal(x, y, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for k in expected:
            assert_equal(actual[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, float) and isinstance(actual, float):
        assert same(actual, expected, equal_nan=True), f"{path}: {actual} != {expected}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r} != {expected!r}"


# ---------------------------------------------------------------------------------------------
# source lines and graphs


def run_fullgraph(fn, *args):
    """fn(*args) compiled under fullgraph: it must be one graph. Returns the result."""
    cnt = CompileCounter()
    out = framejit.optimize(cnt, nopython=True)(fn)(*args)
    assert cnt.frame_count == 1
    return out


def line_of(fn, text, nth=0):
    """Absolute line number of the `nth` line of fn's source containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(lines) if text in line]
    assert len(hits) > nth, f"{text!r} not in {fn.__name__}"
    return hits[nth]


def graph_ops(gm):
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def targets(gm):
    return [n.target for n in graph_ops(gm)]


def graph_targets(cnt):
    """The targets of every op node of every graph a CompileCounter (or recorder) kept."""
    return [t for gm in cnt.graphs for t in targets(gm)]


# ---------------------------------------------------------------------------------------------
# small functions to compile


def poly(x):
    """Python operators only: x*x - 3x + 1."""
    return x * x - 3 * x + 1


def sin_plus_cos(x):
    """Two torch functions and an add."""
    return torch.sin(x) + torch.cos(x)


# ---------------------------------------------------------------------------------------------
# small models


class DropoutMLP(nn.Module):
    """Three Linear layers with ReLU and Dropout(0.5) between them (16 -> 32 -> 32 -> 8)."""

    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)
        self.drop = nn.Dropout(0.5)
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.drop(self.act(self.fc1(x)))
        x = self.drop(self.act(self.fc2(x)))
        return self.fc3(x)


class SmallCNN(nn.Module):
    """Two conv + BatchNorm2d blocks, global average pooling and a Linear head (3-channel input)."""

    def __init__(self, n_classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = self.gap(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def randomize_bn_stats_and_affine(m):
    """Random running stats and affine parameters for every BatchNorm2d of `m`, so that eval-mode
    BatchNorm is not the identity."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)


def assert_buffers_equal(a: nn.Module, b: nn.Module, tol=1e-4):
    """The two modules' buffers (running stats...) are the same, by name, within `tol`."""
    ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
    assert ba.keys() == bb.keys()
    for name in ba:
        assert same(ba[name], bb[name], tol=tol), f"buffer {name} differs after the call"


def square_mean_loss(out):
    """A scalar over every tensor leaf of `out`: the sum of their mean squares."""
    flat = torch.utils._pytree.tree_leaves(out)
    return sum((t.float() ** 2).mean() for t in flat if isinstance(t, torch.Tensor))


# ---------------------------------------------------------------------------------------------
# backends


BACKEND_KINDS = ["counter", "counter_eager", "eager"]


def make_backend(kind):
    """A backend of one of BACKEND_KINDS: a CompileCounter, a CompileCounter in front of "eager",
    or the name "eager"."""
    if kind == "counter":
        return CompileCounter()
    if kind == "counter_eager":
        return CompileCounterWithBackend("eager")
    return "eager"


# ---------------------------------------------------------------------------------------------
# recorders


class CompilerRecorder:
    """AOTAutograd fw/bw compilers that keep the ATen graphs they get; `boxed` says whether they box
    their result themselves."""

    def __init__(self, boxed=True):
        self.forward, self.backward, self.boxed = [], [], boxed

    def fw(self, gm, example_inputs):
        self.forward.append(gm)
        return make_boxed_func(gm.forward) if self.boxed else gm.forward

    def bw(self, gm, example_inputs):
        self.backward.append(gm)
        return make_boxed_func(gm.forward) if self.boxed else gm.forward


class CallbackRecorder:
    """A frame-hook callback that records (name, args) for functions named in `watch` and returns
    `result` (or `result(func, args)` when it is callable)."""

    def __init__(self, watch: set[str], result: Any = None) -> None:
        self.watch = watch
        self.result = result
        self.calls: list[tuple[str, tuple]] = []

    def __call__(self, func: types.FunctionType, args: tuple) -> Any:
        if func.__code__.co_name not in self.watch:
            return None
        self.calls.append((func.__code__.co_name, args))
        return self.result(func, args) if callable(self.result) else self.result


class LoggingContext:
    """A context manager that logs enter/exit into `log` and swallows KeyError."""

    def __init__(self, log: list) -> None:
        self.log = log

    def __enter__(self) -> LoggingContext:
        self.log.append("enter")
        return self

    def __exit__(self, typ: Any, val: Any, tb: Any) -> bool:
        self.log.append(("exit", typ.__name__ if typ else None))
        return typ is KeyError


@contextlib.contextmanager
def torch_compile_side_by_side() -> Iterator[None]:
    """A block that runs torch.compile next to framejit: afterwards torch._dynamo's cache is reset and the wrapper
    torch.compile puts on nn.Module.__init__ for the whole process (TorchDynamo tags modules made in forward) is
    taken off again, since later tests build modules inside framejit's traces."""
    module_cls = torch.nn.Module
    patched = {name: module_cls.__dict__[name] for name in ("__init__", "__setstate__")}
    try:
        yield
    finally:
        torch._dynamo.reset()  # (imported by torch.compile)
        for name, method in patched.items():
            setattr(module_cls, name, method)
        if "___needs_generation_tag_patch" in module_cls.__dict__:
            delattr(module_cls, "___needs_generation_tag_patch")


@contextlib.contextmanager
def logged(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records the logger `name` handles while the block runs (its own handler: torch's loggers do not
    propagate to the root logger that pytest's caplog watches)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def fast_share(values, fast) -> list:
    """`values` as test parameters, those not in `fast` marked slow: the fast loop runs a representative share of
    a long matrix, CI runs all of it."""
    return [v if v in fast else pytest.param(v, marks=pytest.mark.slow) for v in values]


def compiled_and_eager_grads(fn, backend, inputs, loss=lambda out: out.sum(), fullgraph=False):
    """fn run eagerly and compiled with `backend` (a name or a compiler) on copies of `inputs`, then `loss` of
    each result backpropagated. Asserts the results and every input's .grad (None included) are eager's; returns
    the CompileCounterWithBackend (or CompileCounter for a compiler)."""
    eager_in, compiled_in = clone(inputs), clone(inputs)
    expected = fn(*eager_in)
    cnt = CompileCounterWithBackend(backend) if isinstance(backend, str) else backend
    actual = framejit.optimize(cnt, nopython=fullgraph)(fn)(*compiled_in)
    assert_equal(actual, expected)
    loss(expected).backward()
    loss(actual).backward()
    for i, (a, e) in enumerate(zip(compiled_in, eager_in)):
        if isinstance(e, torch.Tensor) and e.requires_grad:
            assert (a.grad is None) == (e.grad is None), f"input {i}: grad {a.grad} where eager has {e.grad}"
            if e.grad is not None:
                assert_equal(a.grad, e.grad, f"input {i} grad")
    return cnt
