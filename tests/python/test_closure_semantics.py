"""Closures as Python means them: functions made in a compiled frame that outlive it, cells written by inlined
functions, closures rebuilt after a graph break."""

import torch

import framejit
from framejit.testing import CompileCounter, same


def compiled(fn, cnt=None):
    return framejit.optimize(cnt or CompileCounter())(fn)


def test_a_returned_nested_function_sees_the_frames_cells():
    def make_adder(x):
        y = x + 1

        def add(z):
            return z + y

        return add

    x = torch.randn(3)
    add = compiled(make_adder)(x)
    assert same(add(x), make_adder(x)(x))


def test_a_returned_closure_and_its_result_together():
    def fn(x):
        a = x.sin()

        def scale(z):
            return z * a

        return scale(x), scale

    x = torch.randn(3)
    out, scale = compiled(fn)(x)
    ref_out, ref_scale = fn(x)
    assert same(out, ref_out) and same(scale(x), ref_scale(x))


def test_nested_closures_returned_two_levels_deep():
    def outer(x):
        base = x * 2

        def middle(k):
            def inner(z):
                return z + base * k

            return inner

        return middle(3)

    x = torch.randn(4)
    assert same(compiled(outer)(x)(x), outer(x)(x))


def test_a_cell_written_by_an_inlined_function_with_nonlocal():
    def fn(x):
        total = x

        def add(v):
            nonlocal total
            total = total + v

        add(x)
        add(1)
        return total

    cnt = CompileCounter()
    x = torch.randn(3)
    assert same(compiled(fn, cnt)(x), fn(x))
    assert cnt.frame_count == 1


def test_a_returned_closure_over_a_cell_an_inlined_function_wrote():
    def fn(x):
        count = 0

        def bump():
            nonlocal count
            count += 1

        bump()
        bump()

        def read(z):
            return z * count

        return read

    x = torch.randn(3)
    assert same(compiled(fn)(x)(x), fn(x)(x))


def test_a_closure_made_before_a_graph_break_still_works_after_it():
    def fn(x):
        y = x.cos()

        def f(z):
            return z - y

        print("", end="")  # a graph break
        return f(x), f

    x = torch.randn(3)
    out, f = compiled(fn)(x)
    ref_out, ref_f = fn(x)
    assert same(out, ref_out) and same(f(x), ref_f(x))
