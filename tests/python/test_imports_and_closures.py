"""Imports inside function bodies of a package (relative and dotted), and closures: returned, rebuilt, written
through nonlocal from inlined functions, made in a loop, capturing a loop variable."""

import torch

from framejit.testing import same
from tests.helpers import assert_equal, run_fullgraph
from tests.python.relpkg import helpers, model  # noqa: F401 (loaded, as a model's package would be)


def test_relative_and_dotted_imports_inside_functions():
    """Resolved against the function's package; the modules are already loaded (an import that would load one
    breaks the graph, so that its code runs when the program reaches it)."""
    x = torch.randn(3)
    for fn in (model.relative_module, model.relative_names, model.dotted_alias):
        assert same(run_fullgraph(fn, x), fn(x)), fn.__name__


def test_imports_inside_an_inlined_function():
    def fn(x):
        return model.relative_names(x) + model.relative_module(x)

    x = torch.randn(3)
    assert same(run_fullgraph(fn, x), fn(x))


def make_scaler(k):
    def scale(x):
        return x * k

    return scale


def test_nested_closure_returned_and_called():
    def fn(x):
        def outer(a):
            def inner(b):
                return a + b

            return inner

        add = outer(x)
        return add(1), outer(x * 2), make_scaler(3)

    x = torch.randn(2)
    got, want = run_fullgraph(fn, x), fn(x)
    assert same(got[0], want[0])
    assert same(got[1](1.0), want[1](1.0)) and same(got[2](x), want[2](x))


def test_nonlocal_writes_from_inlined_functions():
    def fn(x):
        total = 0
        acc = x

        def bump(n):
            nonlocal total, acc
            total += n
            acc = acc * 2

        bump(1)
        bump(2)
        return acc + total, total

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x), fn(x))


def test_nonlocal_counter_of_an_outside_closure():
    def make_counter():
        count = 0

        def step(x):
            nonlocal count
            count += 1
            return x + count

        return step, lambda: count

    step_c, read_c = make_counter()
    step_e, read_e = make_counter()
    x = torch.randn(2)
    for _ in range(3):
        assert same(run_fullgraph(step_c, x) if read_c() == 0 else step_c(x), step_e(x))
    assert read_c() == read_e()


def test_closures_made_in_a_loop_capture_the_loop_variable():
    def fn(x):
        late = [lambda: i for i in range(3)]  # late binding: all see the last i
        bound = [lambda i=i: i for i in range(3)]
        scalers = [make_scaler(i) for i in range(1, 4)]
        out = x
        for f in scalers:
            out = f(out)
        return out + sum(f() for f in late) + sum(f() for f in bound)

    x = torch.randn(2)
    assert same(run_fullgraph(fn, x), fn(x))


def test_closures_returned_from_an_inlined_function_share_their_cell():
    def make_box(v):
        def get():
            return v

        def put(new):
            nonlocal v
            v = new

        return get, put

    def fn(x):
        get, put = make_box(x + 1)
        return get, put

    x = torch.randn(2)
    get, put = run_fullgraph(fn, x)
    assert same(get(), x + 1)
    put(7)
    assert get() == 7
