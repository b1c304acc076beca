"""A class statement inside compiled code: its body is traced and the class made at trace time when that is safe
(constants and functions only, no metaclass or __init_subclass__ hook, no variable of the enclosing function), its
instances are objects made in the trace whose methods are traced. Each call makes a new class, as in eager; what
cannot be made now is a graph break at the class statement naming why, with the code before it captured."""

import pytest
import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same


def plain_class(x):
    class Point:
        scale = 3

        def __init__(self, v):
            self.v = v

        def scaled(self):
            return self.v * self.scale

    return Point(x).scaled()


def inherits_with_super(x):
    class Base:
        def __init__(self, v):
            self.v = v

        def value(self):
            return self.v + 1

    class Child(Base):
        def __init__(self, v):
            super().__init__(v * 2)

        def value(self):
            return super().value() * 10

    c = Child(x)
    return c.value(), isinstance(c, Base), type(c) is Child


def module_subclass(x):
    class Scale(nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, t):
            return t.sin() * self.k

    return Scale(2)(x)


def decorated_methods(x):
    class Ops:
        @staticmethod
        def double(v):
            return v * 2

        @classmethod
        def name(cls):
            return cls.__name__

        @property
        def three(self):
            return 3

    return Ops.double(x) + Ops().three, Ops.name()


def annotated_body(x):
    class Config:
        width: int = 4
        depth = 2

    return x * Config.width + Config.depth, Config.__annotations__


@pytest.mark.parametrize(
    "fn",
    [plain_class, inherits_with_super, module_subclass, decorated_methods, annotated_body],
    ids=lambda f: f.__name__,
)
def test_a_class_statement_is_traced_in_one_graph(fn):
    framejit.reset()
    x = torch.randn(3)
    explained = framejit.explain(fn)(x)
    assert explained.graph_count == 1 and explained.break_reasons == [], explained.break_reasons
    got, want = framejit.compile(fn, backend="eager")(x), fn(x)
    assert type(got) is type(want)
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        assert same(g, w) if isinstance(w, torch.Tensor) else g == w


def returns_its_class_and_instance(x):
    class Holder:
        def __init__(self, v):
            self.v = v

        def twice(self):
            return self.v * 2

    h = Holder(x + 1)
    return h, Holder, type(h) is Holder


def test_each_call_makes_a_new_class_and_instances_are_of_it():
    framejit.reset()
    counter = CompileCounter()
    compiled = framejit.optimize(counter)(returns_its_class_and_instance)
    x = torch.randn(3)
    first, second = compiled(x), compiled(x)
    assert counter.frame_count == 1  # the second call runs the compiled code
    (h1, cls1, same_type), (h2, cls2, _) = first, second
    assert same_type is True and type(h1) is cls1 and type(h2) is cls2
    assert cls1 is not cls2  # a new class per call, as in eager
    assert cls1.__qualname__ == returns_its_class_and_instance(x)[1].__qualname__
    assert same(h1.v, x + 1) and same(h1.twice(), (x + 1) * 2)


def returns_a_module_made_from_a_local_class(x):
    class Gate(nn.Module):
        def forward(self, t):
            return t.relu()

    gate = Gate()
    return gate, gate(x)


def test_a_module_of_a_local_class_outlives_the_frame():
    framejit.reset()
    x = torch.randn(3)
    module, out = framejit.compile(returns_a_module_made_from_a_local_class, backend="eager")(x)
    assert isinstance(module, nn.Module) and type(module).__name__ == "Gate" and module.training
    assert same(out, x.relu()) and same(module(x), x.relu())


def tensor_class_attribute(x):
    y = x.cos()

    class Holder:
        base = torch.ones(3)

    return y + Holder.base


def reads_an_enclosing_variable(x):
    y = x.cos()
    k = 4

    class Reader:
        def get(self):
            return k

    return y * Reader().get()


def metaclass_keyword(x):
    y = x.cos()

    class Meta(type):
        pass

    class Made(metaclass=Meta):
        pass

    return y + 1


def subclass_hook(x):
    y = x.cos()

    class Registry:
        def __init_subclass__(cls):
            cls.registered = True

    class Entry(Registry):
        pass

    return y * Entry.registered


RECORD: list = []


def body_with_a_side_effect(x):
    y = x.cos()

    class Noisy:
        RECORD.append("body ran")

    return y + 1


@pytest.mark.parametrize(
    "fn, reason",
    [
        (tensor_class_attribute, "class attribute 'base'"),
        (reads_an_enclosing_variable, "read variables of the enclosing function"),
        (metaclass_keyword, "metaclass"),
        (subclass_hook, "__init_subclass__"),
    ],
    ids=lambda v: getattr(v, "__name__", "reason"),
)
def test_a_class_that_cannot_be_made_now_breaks_at_the_class_statement(fn, reason):
    framejit.reset()
    x = torch.randn(3)
    explained = framejit.explain(fn)(x)
    assert any(reason in r.reason and "class statement" in r.reason for r in explained.break_reasons)
    assert explained.graph_count >= 1  # the code before the class statement is captured
    assert same(framejit.compile(fn, backend="eager")(x), fn(x))


def test_a_class_body_with_side_effects_runs_them_once_per_call():
    framejit.reset()
    x = torch.randn(3)
    del RECORD[:]
    explained = framejit.explain(body_with_a_side_effect)(x)
    assert any("its body writes state" in r.reason for r in explained.break_reasons)
    assert explained.graph_count == 2  # before and after the class statement, which runs as Python
    del RECORD[:]
    want = body_with_a_side_effect(x)
    compiled = framejit.compile(body_with_a_side_effect, backend="eager")
    got = compiled(x)
    assert same(got, want) and RECORD == ["body ran", "body ran"]
    compiled(x)
    assert RECORD == ["body ran"] * 3
