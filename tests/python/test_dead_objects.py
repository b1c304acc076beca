"""Objects made in compiled code that nothing outliving the frame reaches (a cache or output record built and
dropped inside a forward) are not made again after the graph, and the tensors only they held are no graph
outputs; objects that do outlive the frame keep every attribute written on them."""

import dataclasses

import pytest
import torch

import framejit
from framejit.testing import same


class Cache:
    def __init__(self):
        self.keys = []
        self.values = []

    def update(self, k, v):
        self.keys.append(k)
        self.values.append(v)
        return torch.cat(self.keys, 0), torch.cat(self.values, 0)


@dataclasses.dataclass
class Out:
    hidden: torch.Tensor
    cache: Cache


def layer(x, cache):
    k, v = cache.update(x.sin(), x.cos())
    return Out(hidden=k * v + x, cache=cache)


def _graph_outputs(fn, *args):
    """The result of the compiled fn and the number of outputs of each graph it compiled."""
    outputs = []

    def backend(gm, example_inputs):
        outputs.append(len(gm.graph.output_node().args[0]))
        return gm.forward

    result = framejit.compile(fn, backend=backend)(*args)
    return result, outputs


def test_a_record_dropped_in_the_frame_is_not_rebuilt_and_its_tensors_are_no_outputs():
    def f(x):
        out = layer(x, Cache())
        return out.hidden.sum()

    x = torch.randn(3, 4)
    result, outputs = _graph_outputs(f, x)
    assert same(result, f(x))
    assert outputs == [1]  # the sum only: not the cache's sin/cos, nor the record's hidden


def test_a_returned_record_keeps_every_attribute():
    def f(x):
        out = layer(x, Cache())
        out.extra = x * 2
        return out

    x = torch.randn(3, 4)
    got, expected = framejit.compile(f, backend="eager")(x), f(x)
    assert same(got.hidden, expected.hidden) and same(got.extra, expected.extra)
    assert same(got.cache.keys, expected.cache.keys) and same(got.cache.values, expected.cache.values)


@pytest.mark.parametrize("holder", ["global_list", "attribute", "closure", "dict_value", "bound_method"])
def test_a_record_reached_only_through_older_state_or_a_closure_is_rebuilt_whole(holder):
    sink = []

    class Holder:
        pass

    box = Holder()

    def f(x):
        out = layer(x, Cache())
        if holder == "global_list":
            sink.append(out)
            return x + 1
        if holder == "attribute":
            box.out = out
            return x + 1
        if holder == "closure":
            return lambda: out.cache.keys[0]
        if holder == "dict_value":
            return {"cache": out.cache}
        return out.cache.update

    x = torch.randn(3, 4)
    got = framejit.compile(f, backend="eager")(x)
    if holder == "global_list":
        assert same(sink[0].cache.values[0], x.cos())
    elif holder == "attribute":
        assert same(box.out.hidden, x.sin() * x.cos() + x)
    elif holder == "closure":
        assert same(got(), x.sin())
    elif holder == "dict_value":
        assert same(got["cache"].keys[0], x.sin())
    else:
        assert same(got.__self__.values[0], x.cos())


def test_an_object_with_a_finaliser_is_still_made_as_in_eager():
    finalised = []

    class Finalised:
        def __init__(self, t):
            self.t = t

        def __del__(self):
            finalised.append(self.t.shape)

    def f(x):
        Finalised(x + 1)
        return x * 2

    x = torch.randn(2, 3)
    f(x)
    assert finalised == [torch.Size([2, 3])]
    got = framejit.compile(f, backend="eager")(x)
    assert same(got, x * 2)
    assert finalised == [torch.Size([2, 3])] * 2


def test_a_record_live_across_a_graph_break_keeps_its_attributes():
    def f(x):
        out = layer(x, Cache())
        print("break")
        return out.hidden + out.cache.keys[0]

    x = torch.randn(3, 4)
    assert same(framejit.compile(f, backend="eager")(x), f(x))


def test_a_record_reached_through_a_defaultdicts_factory_keeps_its_attributes():
    import collections

    def f(x):
        out = layer(x, Cache())
        d = collections.defaultdict(lambda: out.cache.keys[0])
        return d, x + 1

    x = torch.randn(3, 4)
    d, _ = framejit.compile(f, backend="eager")(x)
    assert same(d["missing"], x.sin())


def test_a_record_dead_at_a_graph_break_is_not_carried_across_it():
    def f(x):
        out = layer(x, Cache())
        h = out.hidden
        print("break")
        return h.sum()

    x = torch.randn(3, 4)
    result, outputs = _graph_outputs(f, x)
    assert same(result, f(x))
    assert outputs[0] == 1  # h only: `out` is not used after the break
