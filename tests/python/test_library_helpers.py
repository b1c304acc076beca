"""Helpers that model code calls: tracer queries that answer as under torch.compile, TorchScript hints,
module listings with their arguments, id() of objects guarded by identity, itertools and functools over
containers, classmethods of objects made in the trace."""

import functools
import itertools
import os

import pytest
import torch
import torch.fx
import torch.onnx
import torch.overrides

import framejit
from framejit.testing import CompileCounter, CompileCounterWithBackend, same
from tests.helpers import run_fullgraph


def test_tracer_queries_answer_as_they_do_in_a_compiled_region():
    def fn(x):
        if torch.fx._symbolic_trace.is_fx_tracing() or torch.onnx.is_in_onnx_export():
            return x - 1
        return x + 1 if torch.overrides.is_tensor_like(x) else x

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), x + 1)


def test_a_function_fx_traces_from_a_graph_break_is_left_to_fx():
    # symbolic_trace runs as Python (a break) and calls fn1 with Proxies: framejit must not capture that call
    def fn1(x):
        return torch.sin(x)

    def fn(x):
        gm = torch.fx.symbolic_trace(fn1)
        return x * 2, [n.op for n in gm.graph.nodes]

    counter = CompileCounter()
    x = torch.randn(3)
    out, ops = framejit.optimize(counter)(fn)(x)
    assert same(out, x * 2) and ops == ["placeholder", "call_function", "output"]
    assert counter.frame_count == 1


@torch.jit.script_if_tracing
def _scripted_when_jit_traced(x):
    return x + 1.2


@torch.jit.ignore
def _ignored_by_torchscript(x):
    return x + 3.4


def test_torchscript_decorated_functions_are_traced_into():
    def fn(x):
        return _ignored_by_torchscript(_scripted_when_jit_traced(x)) * 2

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


def test_shape_as_tensor_is_the_sizes_made_a_tensor_in_the_graph():
    def fn(x):
        return 1 + torch.onnx.operators.shape_as_tensor(x)[0], torch._shape_as_tensor(x)

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True, dynamic=True)(fn)
    for x in (torch.ones(6, 2), torch.ones(7, 4)):
        got = compiled(x)
        assert same(got, fn(x)) and got[1].dtype == torch.int64
    assert cnt.frame_count == 1  # the sizes are symbolic: no recompile
    assert same(
        run_fullgraph(lambda x: torch._shape_as_tensor(x), torch.tensor(3.0)), torch.zeros(0, dtype=torch.int64)
    )


def _pair_mask(q, k):
    return (k * 1.0 + q).mul_(2) >= 0  # an in-place op on functorch's batched tensors


def test_frames_called_inside_an_eager_vmap_run_as_python():
    def fn(x):
        q = torch.arange(4) - 2
        m = torch.vmap(torch.vmap(_pair_mask, in_dims=(None, 0)), in_dims=(0, None))(q, q)
        return x + m.sum()

    cnt = CompileCounter()
    x = torch.ones(2)
    assert same(framejit.optimize(cnt)(fn)(x), fn(x))
    assert cnt.frame_count == 2  # fn before and after vmap (a break); _pair_mask is not captured


def test_a_torchscript_annotation_is_its_value():
    def fn(x):
        ys = torch.jit.annotate(list[torch.Tensor], [])
        ys.append(x * 2)
        return torch.jit.annotate(torch.Tensor, ys[0])

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)
        self.scale = torch.nn.Parameter(torch.ones(3))
        self.register_buffer("shift", torch.zeros(3))

    def forward(self, x):
        own = [name for name, _ in self.named_parameters(recurse=False)]
        every = [name for name, _ in self.named_parameters(prefix="block")]
        total = sum(p.sum() for p in self.parameters(recurse=False))
        return x * total + len(every), own, every, [n for n, _ in self.named_buffers(prefix="b")]


def test_module_listings_take_recurse_and_prefix():
    block = Block()
    x = torch.randn(3)
    got, want = run_fullgraph(block, x), block(x)
    assert same(got[0], want[0]) and got[1:] == want[1:]
    assert want[1] == ["scale"] and want[2] == ["block.scale", "block.proj.weight", "block.proj.bias"]


def test_id_of_a_module_with_state_is_a_constant():
    block = Block()

    def fn(x):
        return x + (1.0 if id(block) == id(block.proj) else 2.0), id(block)

    x = torch.randn(3)
    got = run_fullgraph(fn, x)
    assert same(got[0], x + 2.0) and got[1] == id(block)


def test_id_of_a_value_made_in_the_trace_runs_as_python():
    def fn(x):
        return x + 1, id([])

    cnt = CompileCounter()
    out, _ = framejit.optimize(cnt)(fn)(torch.ones(2))
    assert same(out, torch.full((2,), 2.0))


def test_itertools_and_functools_over_containers():
    def fn(x):
        parts = [x, x + 1, x + 2]
        total = functools.reduce(lambda a, b: a + b, itertools.chain(parts, (x * 10,)))
        first_two = sum(itertools.islice(parts, 2))
        flat = list(itertools.chain.from_iterable([[x], [x * 2]]))
        pads = tuple(itertools.repeat(1, 2))  # torch.nn's _pair(1)
        return (total + first_two + flat[1] + functools.reduce(torch.mul, parts[:1], torch.ones(3))) * len(pads), pads

    x = torch.randn(3)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0]) and got[1] == want[1] == (1, 1)


def _islice_sharing_its_iterator(x, brk):
    it = iter([x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6])
    every_other = itertools.islice(it, 1, 6, 2)
    first = next(every_other)
    if brk:
        print("", end="")  # a graph break while both are half-way
    moved = next(it)  # the islice takes from the same iterator: it skips this one
    rest = list(every_other)
    pair = list(itertools.islice(itertools.chain([x], [x * 2, x * 3]), 1, 3))
    return first, moved, rest, list(it), pair, list(itertools.islice(iter([x, x]), 5, 3))


def test_islice_over_an_iterator_advances_it_item_by_item():
    x = torch.randn(3)
    assert same(run_fullgraph(_islice_sharing_its_iterator, x, False), _islice_sharing_its_iterator(x, False))
    cnt = CompileCounter()
    got = framejit.optimize(cnt)(_islice_sharing_its_iterator)(x, True)
    assert same(got, _islice_sharing_its_iterator(x, True)) and cnt.frame_count == 2


def test_os_getenv_is_a_guarded_read_of_the_environment(monkeypatch):
    def fn(x):
        return x + 1 if os.getenv("FRAMEJIT_TEST_FLAG", "0") == "1" else x - 1

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(3)
    monkeypatch.delenv("FRAMEJIT_TEST_FLAG", raising=False)
    assert same(compiled(x), x - 1)
    monkeypatch.setenv("FRAMEJIT_TEST_FLAG", "1")
    assert same(compiled(x), x + 1)  # the guard on the variable fails: recompiled
    assert cnt.frame_count == 2


def test_dict_fromkeys_shares_one_value():
    def fn(x):
        states = dict.fromkeys(range(3))
        states[1] = x * 2
        buckets = dict.fromkeys(("a", "b"), [])
        buckets["a"].append(x)  # one list behind every key, as in Python
        return states[1] + len(buckets["b"]) + (0 if states[2] is None else 1)

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


class Point:
    def __init__(self, v):
        self.v = v

    @classmethod
    def scale(cls, t):
        return t * (3 if cls is Point else 1)


def test_a_classmethod_called_on_an_object_made_in_the_trace():
    def fn(x):
        return Point(x).scale(x)

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


class Act(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def forward(self, x):
        return self.act(x)


def test_a_functools_partial_is_called_with_its_bound_arguments():
    act = Act()
    x = torch.randn(4)
    assert same(run_fullgraph(act, x), act(x))


@functools.lru_cache
def backend_available(name):
    return name == "cpu"


def test_a_memoised_function_of_constants_answers_from_its_cache():
    def fn(x):
        return x + 1 if backend_available("cpu") else x - 1

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), x + 1)


@functools.lru_cache(maxsize=None)
def _doubled_dims(shape, factor):
    return tuple(n * factor for n in shape)


def _flat_prefix(x):
    rows, cols = _doubled_dims(x.shape, 2)  # the shape is symbolic once the sizes vary
    return x.reshape(-1)[: rows * cols // 8] * 3, _doubled_dims((3, 4), 1)


def test_a_memoised_function_called_with_symbolic_sizes_is_traced_through():
    # as in TorchDynamo: its cache would be keyed by values the trace does not have, so the function it wraps is
    # traced; a call of constants still answers from the cache
    cnt = CompileCounter()
    compiled = framejit.compile(_flat_prefix, backend=cnt)
    for n in (4, 6, 8, 10, 12, 14, 6, 5):
        x = torch.randn(n, 3)
        assert same(compiled(x), _flat_prefix(x))
    assert cnt.frame_count == 2  # static, then symbolic: no break, no recompile per size
    explained = framejit.explain(_flat_prefix)(torch.randn(7, 3))
    assert explained.graph_break_count == 0


class _Scaler:
    @functools.lru_cache
    def scaled(self, t):
        return t * 3


def test_a_memoised_method_called_with_a_tensor_is_traced_through():
    scaler = _Scaler()

    def fn(x):
        return scaler.scaled(x) + 1

    x = torch.randn(4)
    assert same(run_fullgraph(fn, x), x * 3 + 1)
    assert _Scaler.scaled.cache_info().currsize == 0  # the trace did not fill the cache with a fake tensor


_c_memoised = functools.lru_cache(maxsize=None)(len)


def test_a_memoised_builtin_called_with_a_tensor_is_a_break_with_the_reason():
    def fn(x):
        return x * _c_memoised(x)

    x = torch.randn(4)
    explained = framejit.explain(fn)(x)
    [reason] = [b.reason for b in explained.break_reasons]
    assert reason.startswith("an lru_cache'd function that wraps no Python function called with TensorVariable(x")
    assert same(framejit.compile(fn, backend="eager")(x), x * 4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_the_graph_computes_made_a_leaf_that_requires_grad(backend):
    # the graph hands the tensor out, Python makes it a leaf, and the rest of the frame takes it as an input: a
    # graph cannot make the leaf itself (AOTAutograd drops the flag on its outputs)
    w = torch.randn(3, requires_grad=True)

    def fn(x):
        h = x[:, None] * 1
        h.requires_grad = True  # as feature encoders do for gradient checkpointing
        z = torch.zeros_like(x).requires_grad_()
        off = (x * 2).requires_grad_(False)  # a leaf that needs no grad: nothing to do
        return (h * w).sum() + (z * x).sum(), h, z, off.requires_grad

    x = torch.randn(2, 3)
    cnt = CompileCounterWithBackend(backend)
    got = framejit.optimize(cnt)(fn)(x)
    want = fn(x)
    for loss, h, z, _ in (got, want):
        loss.backward()
    assert same(got, want) and got[1].requires_grad and got[2].is_leaf and got[3] is False
    assert same(got[1].grad, want[1].grad) and same(got[2].grad, want[2].grad)
    assert cnt.frame_count == 3


def test_requires_grad_set_on_an_input_runs_as_python():
    def fn(x):
        x.requires_grad = True
        return x * 2

    x = torch.randn(3)
    out = framejit.optimize(CompileCounter())(fn)(x)
    assert x.requires_grad and out.requires_grad
