"""Everyday Python of model code, each under fullgraph and differential against eager: `super().__init__()` in a
plain class, type hints on nested defs (kept on the function made), a frozenset of functions, `nonlocal` writes
in a function the frame calls, `id()` of a module, `len()` of a tensor (TorchDynamo's 2022 tests have each)."""

import typing

import torch

import framejit
from framejit.testing import CompileCounter
from tests.helpers import assert_equal, run_fullgraph


class Record:
    def __init__(self, x):
        super().__init__()  # object.__init__: does nothing
        self.a = x + 1
        self.b = x + 2


def test_super_init_reaching_object_in_a_class_made_in_the_trace():
    def fn(x):
        obj = Record(x / 3.0)
        obj.c = obj.a * obj.b + 1
        return obj.a, obj.c

    x = torch.randn(4)
    assert_equal(run_fullgraph(fn, x), fn(x))


class Hint:
    pass


def test_type_hints_of_a_nested_def_are_made_and_kept():
    def fn(x):
        def inner(
            y: typing.List[Hint], z: typing.Optional[typing.Callable[[int], int]] = None
        ) -> typing.Dict[str, typing.Tuple[int, ...]]:
            return x + len(y)

        return inner([Hint()]), inner

    x = torch.randn(3)
    (out, inner), (expected, eager_inner) = run_fullgraph(fn, x), fn(x)
    assert_equal(out, expected)
    assert inner.__annotations__ == eager_inner.__annotations__


OPS = frozenset([torch.add, torch.mul])


def test_a_frozenset_of_functions_is_read_by_identity():
    def fn(x, op):
        for f in sorted(OPS, key=lambda f: f.__name__):
            x = f(x, 2)
        return x + len(OPS) if op in OPS else x

    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    x = torch.randn(3)
    for op in (torch.add, torch.sub, torch.add):
        assert_equal(compiled(x, op), fn(x, op))
    assert cnt.frame_count == 2  # `op in OPS` is decided by op's identity, which the entry guards: add, sub


def _make_counter():
    total = torch.zeros(3)

    def counter():
        nonlocal total
        total = total + 1
        return total

    return counter


def test_nonlocal_writes_of_a_called_function_are_replayed_into_its_cell():
    def fn(counter, x):
        return counter() * x + counter()  # the second call sees the first call's write

    eager_counter, compiled_counter = _make_counter(), _make_counter()
    x = torch.randn(3)
    compiled = framejit.optimize("eager", nopython=True)(fn)
    for _ in range(2):
        assert_equal(compiled(compiled_counter, x), fn(eager_counter, x))
    assert_equal(compiled_counter(), eager_counter())  # the cell holds what eager's holds


class Stateless(torch.nn.Module):
    def forward(self, x, ref_id):
        if id(self) == ref_id:
            x = x * 2
        return x + 1


def test_id_of_a_module_guards_its_identity():
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(lambda m, x, ref: m(x, ref))
    first, second, x = Stateless(), Stateless(), torch.randn(3)
    for m in (first, second, first):
        assert_equal(compiled(m, x, id(first)), m(x, id(first)))
    assert cnt.frame_count == 2  # a stateless module is guarded by type, but id() needs its identity


class OptionalActivation(torch.nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.activation = activation

    def forward(self, x):
        x = self.linear(x)
        if self.activation:  # a function is true; None is not
            x = self.activation(x)
        return x


def test_truth_of_a_function_attribute():
    x = torch.randn(2, 4)
    for activation in (torch.nn.functional.relu, torch.tanh, None):
        m = OptionalActivation(activation)
        assert_equal(run_fullgraph(m, x), m(x))


def test_isinstance_of_a_legacy_tensor_type_asks_dtype_and_device():
    def fn(x, tensor_type):
        return x + 1, isinstance(x, tensor_type), isinstance(x, (torch.DoubleTensor, torch.BoolTensor))

    compiled = framejit.optimize("eager")(fn)
    for dtype, tensor_type in [
        (torch.float32, torch.FloatTensor),
        (torch.float64, torch.DoubleTensor),
        (torch.int64, torch.LongTensor),
        (torch.float32, torch.LongTensor),
    ]:
        x = torch.zeros(4, dtype=dtype)
        assert_equal(compiled(x, tensor_type), fn(x, tensor_type))


def test_a_legacy_tensor_type_called_on_data_is_a_tensor_of_its_dtype():
    def fn(x, n):
        channels = torch.IntTensor([n])  # as VITS's WaveNet does
        return x * channels, torch.LongTensor((2, 3)), torch.FloatTensor([1.5, n]), torch.BoolTensor([True])

    x = torch.randn(3)
    assert_equal(run_fullgraph(fn, x, 4), fn(x, 4))
    sized = framejit.optimize(CompileCounter())(lambda x: (torch.FloatTensor(2, 3).shape, x + 1))  # sizes: Python
    assert sized(x)[0] == (2, 3)


def test_isinstance_with_a_metaclass_that_asks_the_object():
    # torch.BoolStorage's metaclass asks a TypedStorage's dtype: not the type alone (a graph break, then Python's)
    storage = torch.BoolStorage.from_buffer(bytearray([0, 1]), "big")
    other = torch.FloatStorage.from_buffer(bytearray(4), "little")

    def fn(x, s):
        return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, (torch.FloatStorage, int | None))

    compiled = framejit.optimize(CompileCounter())(fn)
    x = torch.randn(2)
    for s in (storage, other):
        assert_equal(compiled(x, s), fn(x, s))
