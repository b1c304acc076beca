"""One compiled function called from several threads at once."""

import threading

import torch

import framejit
from framejit.testing import CompileCounter, same


# ---------------------------------------------------------------------------------------------
# threads


def test_compiled_function_from_four_threads():
    cnt = CompileCounter()

    def fn(x, y):
        a = torch.matmul(x, y)
        return torch.relu(a) + x.sum()

    f = framejit.optimize(cnt)(fn)
    n_threads, n_calls = 4, 50
    barrier = threading.Barrier(n_threads)
    errors = []
    results = [0] * n_threads

    def worker(i):
        try:
            gen = torch.Generator().manual_seed(i)
            size = 3 + i % 2  # two threads share a shape, two another
            barrier.wait()
            for _ in range(n_calls):
                x = torch.randn(size, size, generator=gen)
                y = torch.randn(size, size, generator=gen)
                if not same(f(x, y), fn(x, y)):
                    errors.append(f"thread {i}: wrong result")
                    return
                results[i] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert results == [n_calls] * n_threads
    assert 1 <= cnt.frame_count <= 2 * n_threads
