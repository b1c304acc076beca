"""Writes replayed after the graph reach the objects the trace wrote, even when another replayed write changes
the path their source reads: every target, and every object made in the trace, is loaded before any write."""

import torch

import framejit
from framejit.testing import CompileCounter, same


def run_fullgraph(fn, *args, **kwargs):
    cnt = CompileCounter()
    out = framejit.optimize(cnt, nopython=True)(fn)(*args, **kwargs)
    assert cnt.frame_count == 1
    return out


class Box:
    pass


def rename_and_mark(x, **kwargs):
    kwargs["new"] = kwargs.pop("old")  # the object is no longer at kwargs['old'] after this replays
    return mark(x, **kwargs)


def mark(x, new):
    new.count = 1
    return x + 1, new


def test_an_attribute_write_reaches_an_object_whose_source_a_container_write_removes():
    box = Box()
    got, same_box = run_fullgraph(rename_and_mark, torch.zeros(2), old=box)
    assert same(got, torch.ones(2)) and same_box is box and box.count == 1


class Record(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


def record_of_renamed(x, **kwargs):
    kwargs["state"] = kwargs.pop("past")
    kwargs["state"].steps = 2
    record = Record()
    record["state"] = kwargs["state"]  # made in the trace, holding an object reached through kwargs['past']
    return x * 2, record


def test_an_object_made_in_the_trace_holds_what_it_held_before_the_writes():
    box = Box()
    got, record = run_fullgraph(record_of_renamed, torch.ones(2), past=box)
    assert same(got, torch.full((2,), 2.0)) and record["state"] is box and record.state is box and box.steps == 2
