"""Classes as the language means them: type(x).__name__, __class__, __subclasses__(), isinstance/issubclass with
tuples, dunder methods called by name, operator overloads on objects passed in and made in the trace, super()
in __init__ and classmethods, classmethods/staticmethods called through cls and through instances."""

import operator

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter, same
from tests.helpers import assert_equal, run_fullgraph


class Shape:
    def area(self):
        return 0


class Square(Shape):
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side * self.side


class Circle(Shape):
    pass


def test_type_names_class_and_subclasses():
    def fn(x, obj):
        names = [c.__name__ for c in Shape.__subclasses__()]
        return (
            x * len(names),
            type(obj).__name__,
            type(obj).__qualname__,
            obj.__class__ is Square,
            type(x).__name__,
            names,
        )

    x, sq = torch.randn(2), Square(2)
    assert_equal(run_fullgraph(fn, x, sq), fn(x, sq))


def test_isinstance_with_tuples_and_issubclass():
    def fn(x, obj):
        a = isinstance(obj, (Circle, Square))
        b = isinstance(obj, (int, (str, Shape)))
        c = issubclass(type(obj), Shape) and issubclass(Square, (Circle, Shape)) and not issubclass(Shape, Square)
        d = isinstance(x, (torch.Tensor, int))
        return x + int(a) + int(b) + int(c) + int(d)

    x = torch.randn(2)
    assert same(run_fullgraph(fn, x, Square(1)), fn(x, Square(1)))


class Num:
    """Operator overloads on a plain class."""

    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Num(self.t + (other.t if isinstance(other, Num) else other))

    def __mul__(self, other):
        return Num(self.t * other)

    def __iadd__(self, other):
        self.t = self.t + other
        return self

    def __neg__(self):
        return Num(-self.t)

    def __eq__(self, other):
        return isinstance(other, Num) and self.t.shape == other.t.shape

    def __lt__(self, other):
        return self.t.shape[0] < other.t.shape[0]

    def __call__(self, y):
        return self.t * y

    def __contains__(self, k):
        return k == "t"

    def __bool__(self):
        return self.t.dim() > 0

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]


def _use_num(a, b, x):
    c = -(a + b) * 2
    c += x
    flags = (a == b, a < b, b < a, "t" in a, "u" in a, bool(a), len(a))
    return c.t + a(x) + a[0] + a.__getitem__(1) + a.__len__(), flags


def test_operator_overloads_on_objects_passed_in():
    x = torch.randn(3)
    a, b = Num(torch.randn(3)), Num(torch.randn(3))
    a2, b2 = Num(a.t), Num(b.t)
    assert_equal(run_fullgraph(_use_num, a, b, x), _use_num(a2, b2, x))


def test_operator_overloads_on_objects_made_in_the_trace():
    def fn(x, y):
        return _use_num(Num(x), Num(y), x)

    x, y = torch.randn(3), torch.randn(3)
    assert_equal(run_fullgraph(fn, x, y), fn(x, y))


def test_if_on_a_user_bool_and_iadd_keeps_identity():
    def fn(x, a):
        b = a
        b += x
        return (x + 1 if a else x - 1), b is a, a.t

    a1, a2, x = Num(torch.ones(3)), Num(torch.ones(3)), torch.randn(3)
    got, want = run_fullgraph(fn, x, a1), fn(x, a2)
    assert_equal(got[:2], want[:2])
    assert same(a1.t, a2.t)


def test_dunder_methods_called_by_name_on_tensors():
    def fn(x, y):
        return (
            x.__add__(y),
            x.__mul__(2),
            x.__neg__(),
            y.__radd__(1),
            x.__getitem__(0),
            x.__len__(),
            operator.__add__(x, y),
        )

    x, y = torch.randn(3), torch.randn(3)
    assert_equal(run_fullgraph(fn, x, y), fn(x, y))


class Scaled(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.k


def test_nn_module_made_in_the_trace_breaks_the_graph():
    """An nn.Module constructed inside compiled code (super().__init__() and fresh random parameters) is a graph
    break with a recorded reason; the result equals eager's."""

    def fn(x):
        y = x * 2
        m = Scaled(2)
        return y + m.k, type(m).__name__

    x = torch.randn(3)
    out = framejit.explain(fn)(x)
    assert out.graph_break_count >= 1 and out.break_reasons
    assert_equal(framejit.optimize(CompileCounter())(fn)(x), fn(x))


class Base:
    scale = 2

    def __init__(self, t):
        self.t = t

    @classmethod
    def make(cls, t):
        return cls(t * cls.scale)

    @staticmethod
    def helper(t):
        return t + 1

    @classmethod
    def describe(cls):
        return "base"


class Derived(Base):
    scale = 3

    @classmethod
    def make(cls, t):
        obj = super().make(t)
        obj.t = cls.helper(obj.t)
        return obj

    @classmethod
    def describe(cls):
        return "derived+" + super().describe()


def test_super_in_classmethods_and_staticmethods_through_cls():
    def fn(x):
        obj = Derived.make(x)
        return obj.t, Derived.describe(), type(obj).__name__

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x), fn(x))


def test_classmethods_and_staticmethods_on_instances():
    def fn(x, outside):
        made = Derived(x)
        again = made.make(x)  # a classmethod through an instance made in the trace
        return made.helper(x) + again.t + outside.helper(x) + outside.make(x).t, made.describe(), outside.describe()

    x = torch.randn(2)
    assert_equal(run_fullgraph(fn, x, Derived(x)), fn(x, Derived(x)))


def test_subclasses_answer_is_guarded():
    """A subclass defined after compiling changes cls.__subclasses__(): the entry no longer holds."""

    class Root:
        pass

    class First(Root):
        pass

    def fn(x):
        return x * len(Root.__subclasses__())

    compiled = framejit.optimize(CompileCounter())(fn)
    x = torch.randn(2)
    assert same(compiled(x), x * 1)

    class Second(Root):
        pass

    assert same(compiled(x), x * 2)


def test_tensor_class_attribute_is_its_type():
    def fn(x, a):
        return x + 1, x.__class__ is torch.Tensor, x.__class__.__name__, a.__class__.__name__, type(a) is Num

    x = torch.ones(3)
    assert_equal(run_fullgraph(fn, x, Num(x)), fn(x, Num(x)))


def test_not_equal_inverts_a_python_eq_and_plain_objects_compare_by_identity():
    def fn(x, a, b, p, q):
        r = Square(2)
        return x + 1, a != b, a != 3, Num(x) != a, p == q, p == p, p != q, r == p, r != r, r == r

    x = torch.ones(3)
    args = (Num(x), Num(x[:2]), Square(1), Square(1))
    assert_equal(run_fullgraph(fn, x, *args), fn(x, *args))


class _Backend:
    """A registry filled lazily, on first use, with instances of the subclasses found by __subclasses__() (as
    einops finds its tensor backends)."""

    name = "?"

    def scale(self, x):
        return x


class _TorchBackend(_Backend):
    name = "torch"

    def __init__(self):
        self.factor = _FACTOR  # (a global of the class's module)

    def scale(self, x):
        return x * self.factor


_loaded: dict = {}
_FACTOR = 3.0


def _backend_for(x):
    if "torch" not in _loaded:
        for cls in _Backend.__subclasses__():
            backend = cls()
            _loaded[backend.name] = backend
    return _loaded["torch"]


def test_a_subclass_found_by_subclasses_is_made_in_the_trace_and_registered():
    _loaded.clear()

    def fn(x):
        return _backend_for(x).scale(x).sin()

    x = torch.randn(4)
    counter = CompileCounter()
    got = framejit.compile(fn, backend=counter)(x)
    assert counter.frame_count == 1 and counter.op_count == 2  # one graph, no break at the lazy first use
    assert_equal(got, (x * 3.0).sin())
    backend = _loaded["torch"]
    assert type(backend) is _TorchBackend and backend.factor == 3.0  # the registry write happened, with the object
    assert_equal(framejit.compile(fn, backend=counter)(x), (x * 3.0).sin())
    assert _loaded["torch"] is backend
