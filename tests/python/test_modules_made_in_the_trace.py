"""An nn.Module built inside the compiled function (an activation looked up by name and instantiated per call)
is made and called in the trace: its __init__ (usage logging skipped), its __call__ and hook checks on the
OrderedDicts it made itself. Items of a dict subclass with a Python __getitem__ are guarded and reloaded
through dict's own __getitem__, never through the subclass's (which would build a new module each time)."""

import collections

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter
from tests.helpers import run_fullgraph


class Scaled(nn.Module):
    def __init__(self, factor=2.0):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return torch.tanh(x) * self.factor


class Instantiating(collections.OrderedDict):
    """name -> class (or (class, kwargs)); indexing makes a new instance every time."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


class Logging(Instantiating):
    def __getitem__(self, key):
        LOOKUPS.append(key)
        return super().__getitem__(key)


ACTIVATIONS = Instantiating({"scaled": (Scaled, {"factor": 3.0}), "plain": Scaled, "relu": nn.ReLU})
LOOKUPS = []
LOGGED = Logging({"scaled": (Scaled, {"factor": 3.0})})


def test_a_module_made_and_called_in_the_trace():
    def fn(x):
        return Scaled(0.5)(x) + nn.ReLU()(x)

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_truth_of_an_ordered_dict_made_in_the_trace():
    def fn(x):
        hooks = collections.OrderedDict()
        if hooks:
            return x
        hooks["a"] = 1
        return x + 1 if hooks else x - 1

    x = torch.randn(4)
    torch.testing.assert_close(run_fullgraph(fn, x), fn(x))


def test_items_of_a_dict_subclass_are_read_past_its_python_getitem():
    def fn(x, name):
        return ACTIVATIONS[name](x)

    x = torch.randn(4)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    for name in ("scaled", "plain", "relu", "scaled"):
        torch.testing.assert_close(compiled(x, name), fn(x, name))
    assert cnt.frame_count == 3  # one per name; the last call hits the cache


def test_guards_and_reloads_do_not_run_the_subclass_getitem():
    def fn(x):
        return LOGGED["scaled"](x)

    x = torch.randn(4)
    compiled = framejit.optimize(CompileCounter(), nopython=True)(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    LOOKUPS.clear()
    torch.testing.assert_close(compiled(x), fn(x))  # compiled: the lookup is replayed once, as in eager
    assert LOOKUPS == ["scaled", "scaled"]


def test_a_module_made_in_the_trace_after_torch_compile_ran_in_the_process():
    """torch.compile wraps nn.Module.__init__ for the whole process: the trace calls the original it wraps."""
    from tests.helpers import torch_compile_side_by_side

    class Scale(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x * self.k

    def f(x):
        return Scale(3)(x) + 1

    with torch_compile_side_by_side():
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
        assert torch.nn.Module.__init__.__name__ == "patched_init"
        explained = framejit.explain(f)(torch.ones(2))
        assert (explained.graph_count, explained.break_reasons) == (1, [])
        assert torch.equal(framejit.compile(f, backend="eager")(torch.ones(2)), torch.full((2,), 4.0))
