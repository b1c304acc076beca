"""framejit.run() (cached entries only, no new compiles) and framejit.reset()."""

import torch

import framejit
from framejit import cache
from framejit.testing import CompileCounter, same


class _RuntimeCounter:
    """A backend that counts compiles and also how often the compiled graphs run."""

    def __init__(self):
        self.frame_count = 0
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1

        def run(*args):
            self.calls += 1
            return gm.forward(*args)

        return run


# ---------------------------------------------------------------------------------------------
# run() and reset()


def test_run_never_compiles_a_fresh_function():
    cnt = CompileCounter()

    def fresh(x):
        return torch.cos(x) + 3

    x = torch.randn(5)
    with framejit.optimize(cnt):
        with framejit.run():
            assert same(fresh(x), torch.cos(x) + 3)
            assert same(fresh(x * 2), torch.cos(x * 2) + 3)
    assert cnt.frame_count == 0
    assert same(framejit.run(fresh)(x), torch.cos(x) + 3)
    assert cnt.frame_count == 0
    assert not cache.entries(fresh.__code__)


def test_run_uses_existing_cache_entries_and_compiles_nothing_new():
    backend = _RuntimeCounter()

    def fn(x):
        return torch.sigmoid(x) * 4

    f = framejit.optimize(backend)(fn)
    x = torch.randn(6)
    assert same(f(x), fn(x))
    assert backend.frame_count == 1 and backend.calls == 1

    with framejit.run():
        assert same(fn(x), torch.sigmoid(x) * 4)  # the plain function: its code has a cache entry
    assert backend.calls == 2, "run() should use the existing cache entry"

    run_fn = framejit.run(fn)
    assert same(run_fn(x), fn(x))
    assert backend.calls >= 3

    x2 = torch.randn(2, 3)  # misses every guard: runs as Python, compiles nothing
    calls = backend.calls
    with framejit.run():
        assert same(fn(x2), torch.sigmoid(x2) * 4)
    assert same(run_fn(x2), torch.sigmoid(x2) * 4)
    assert backend.frame_count == 1
    assert backend.calls == calls


def test_reset_empties_everything():
    cnt = CompileCounter()

    def fn(x):
        return torch.exp(x) / 2

    f = framejit.optimize(cnt)(fn)
    x = torch.randn(4)
    f(x)
    f(x)
    assert cnt.frame_count == 1
    assert cache.entries(fn.__code__)
    framejit.reset()
    assert not cache.entries(fn.__code__)
    assert same(f(x), fn(x))
    assert cnt.frame_count == 2
    # also forgets skip marks / fallbacks: an unsupported function is retried after reset
    framejit.reset()
    assert same(f(x), fn(x))
    assert cnt.frame_count == 3
