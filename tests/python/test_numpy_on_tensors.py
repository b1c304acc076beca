"""numpy code on tensors is traced through torch._numpy (framejit/variables/numpy_arrays.py): `t.numpy()` is an
array backed by a tensor of the graph, numpy functions, methods and operators on it are graph ops with numpy's
rules, and an array the program keeps is a real ndarray (or numpy scalar) after the graph. Each program is run
eagerly and compiled, on equal inputs; results, their types and dtypes, and the inputs afterwards must match."""

import warnings

import numpy as np
import pytest
import torch

import framejit

BASE = torch.rand(3, 4, generator=torch.Generator().manual_seed(0))


def assert_same(got, want, path="result"):
    assert type(got) is type(want), f"{path}: {type(got)} != {type(want)}"
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype and np.shape(got) == np.shape(want), f"{path}: {got!r} != {want!r}"
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=path)
    elif isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, path
        torch.testing.assert_close(got, want, msg=path)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def fresh(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check(fn, *args, graphs=1, breaks=0, backend="eager"):
    """fn compiled gives what eager gives, leaves its inputs as eager does, in `graphs` graphs with `breaks`
    breaks; returns the break reasons."""
    eager_args, compiled_args = fresh(args), fresh(args)
    want = fn(*eager_args)
    framejit.reset()
    explained = framejit.explain(fn)(*fresh(args))
    framejit.reset()
    got = framejit.compile(fn, backend=backend)(*compiled_args)
    assert_same(got, want)
    assert_same(compiled_args, eager_args, "inputs after the call")
    reasons = [r.reason for r in explained.break_reasons]
    assert (explained.graph_count, explained.graph_break_count) == (graphs, breaks), reasons
    return reasons


# -- one graph, as torch.compile makes -------------------------------------------------------------------------


def elementwise(x):
    return torch.from_numpy(np.sin(x.numpy()) * 2)


def returns_an_array(x):
    a = x.numpy()
    return np.exp(a) + np.cos(a) * np.pi


def reductions(x):
    a = x.numpy()
    return a.sum(), np.mean(a, axis=0), a.max(axis=1), np.std(a), np.argmax(a), a.argmin(axis=0)


def reshapes(x):
    a = x.numpy()
    return a.reshape(-1), a.T, np.transpose(a), a.ravel()[1:3], a[:, None], a[..., 0], a.shape, a.ndim, a.size


def mixing_torch_and_numpy(x):
    a = x.numpy()
    t = torch.from_numpy(a * 3)
    return t.relu() + x, torch.as_tensor(np.tanh(a)), torch.tensor(a + 1)


def numpy_scalars(x):
    a = x.numpy()
    return np.sum(a), a[0, 1], a.mean(), float(np.pi), np.float32(a.sum())


def linear_algebra_and_joins(x):
    a = x.numpy()
    return (
        np.linalg.norm(a),
        a @ a.T,
        np.dot(a[0], a[1]),
        np.concatenate([a, a * 2]),
        np.stack([a, a]),
        np.where(a > 0.5, a, 0.0),
        np.clip(a, 0.2, 0.6),
        np.maximum(a, 0.5),
    )


def operators(x):
    a = x.numpy()
    return -a, abs(a), a**2, a // 0.3, a % 0.3, a > 0.5, ~(a > 0.5), 1 - a, 2.0 / (a + 1)


def constants(x):
    return x * np.pi + np.sqrt(2.0) + np.prod((2, 3)) + np.e


def iterating_rows(x):
    total = 0
    for row in x.numpy():
        total = total + row
    return total, len(x.numpy()), isinstance(x.numpy(), np.ndarray)


ONE_GRAPH = [
    elementwise,
    returns_an_array,
    reductions,
    reshapes,
    mixing_torch_and_numpy,
    numpy_scalars,
    linear_algebra_and_joins,
    operators,
    constants,
    iterating_rows,
]


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=lambda f: f.__name__)
def test_numpy_programs_on_tensors_are_one_graph(fn):
    check(fn, BASE)


def test_torch_compile_also_makes_one_graph_of_them():
    import torch._dynamo  # the reference, side by side

    for fn in (elementwise, reductions, mixing_torch_and_numpy, linear_algebra_and_joins):
        graphs = []
        torch._dynamo.reset()
        torch.compile(fn, backend=lambda gm, _: graphs.append(gm) or gm.forward)(BASE.clone())
        assert len(graphs) == 1, fn.__name__


@pytest.mark.parametrize("fn", [returns_an_array, reductions, operators], ids=lambda f: f.__name__)
def test_with_aot_autograd(fn):
    check(fn, BASE, backend="aot_eager")


def test_numpy_dtype_promotion_defaults_to_float64():
    def fn(x):
        a = x.numpy()  # float32
        return (
            a + np.ones(4),  # float64: numpy's default
            a * 2.0,  # a Python float is weak: float32
            a * np.float64(2),  # a numpy scalar is not: float64
            a * np.float32(2),
            np.arange(3) * 1.5,
            a.astype(np.int32) + 1,
            np.zeros(3, dtype=np.float32) + a[0, :3],
            np.ones_like(a, dtype=np.int64),
            (a * 2).dtype,
            a.dtype == np.float32,
            np.ones(3).dtype,
        )

    check(fn, BASE)


def test_questions_about_dtypes_are_constants():
    def fn(x):
        a = x.numpy()
        found = [a.dtype.name, a.dtype.itemsize, np.issubdtype(a.dtype, np.floating), a.dtype in (np.float32,)]
        if a.dtype == np.float32:  # decided at trace time
            found.append(a * 2)
        return found

    check(fn, BASE)


def test_numpy_of_constants_is_computed_now_or_made_in_the_graph():
    def fn(x):
        return (
            np.result_type(np.float32, np.int64),  # a dtype: a constant
            np.promote_types("f4", "i8"),
            np.finfo(np.float32).eps * x,
            np.sum([1, 2, 3]),  # a number, computed by numpy now
            np.array(5.0),  # a 0-d array: made in the graph
            np.sqrt(np.array(4.0)),
            np.zeros(2),
        )

    check(fn, BASE)


def test_a_zero_d_result_is_a_numpy_scalar_and_a_zero_d_array_stays_one():
    def fn(x):
        a = x.numpy()
        return a.sum(), a[0, 0], np.asarray(a.sum()), a.sum().reshape(()), x[0, 0].numpy(), a.sum() + 1

    check(fn, BASE)


def test_an_array_shares_memory_with_its_tensor():
    def fn(x):
        a = x.numpy()
        x.add_(1)  # seen through the array, as in eager
        return a, a.T

    x = BASE.clone()
    a, t = framejit.compile(fn, backend="eager")(x)
    assert np.shares_memory(a, x.numpy()) and np.shares_memory(t, x.numpy())
    check(fn, BASE)


# -- writes into arrays: the tensor behind the array is written, as in eager ----------------------------------


def setitem(x):
    a = x.numpy()
    a[0] = 5
    a[1:, 1] = np.array([7.0, 8.0])
    return x


def in_place_operators(x):
    a = x.numpy()
    a += 1
    a *= np.float32(2)
    return x, a


def a_view_sees_the_write(x):
    a = x.numpy()
    row = a[1]
    a[1, 0] = 9
    return row * 1, row


def a_scalar_is_immutable(x):
    s = x.numpy().sum()
    s += 1  # s = s + 1: x is not written
    return s, x


def in_place_methods(x):
    a = x.numpy()
    a.sort(axis=1)
    a[0].fill(3)
    return x


def a_new_array(x):
    z = np.zeros((3, 4))
    z[0] = x.numpy()[0]
    return z


@pytest.mark.parametrize(
    "fn",
    [setitem, in_place_operators, a_view_sees_the_write, a_scalar_is_immutable, in_place_methods, a_new_array],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_writes_into_arrays(fn, backend):
    check(fn, BASE, backend=backend)


def test_a_write_numpy_refuses_raises_as_in_eager():
    def fn(x):
        a = x.numpy()
        a += 1.5  # int64 += float64: numpy refuses the cast
        return x

    x = torch.arange(4)
    with pytest.raises(Exception, match="Cannot cast|same_kind") as eager:
        fn(x.clone())
    framejit.reset()
    with pytest.raises(type(eager.value)):
        framejit.compile(fn, backend="eager")(x.clone())


# -- ndarray arguments: the graph takes torch.from_numpy(array) ----------------------------------------------------


def test_array_arguments_are_graph_inputs():
    def fn(a, x):
        return a * 2 + np.float32(1), x + 1, a.sum()

    check(fn, np.arange(6, dtype=np.float32).reshape(2, 3), torch.ones(3))
    framejit.reset()
    compiled = framejit.compile(fn, backend="eager")
    for a in (np.ones((2, 3)), np.ones((4,), dtype=np.int64)):  # another dtype or shape: compiled again
        assert_same(compiled(a, torch.ones(3)), fn(a, torch.ones(3)))


def test_an_array_argument_is_written_and_returned_as_itself():
    def fn(a):
        a[0] += 1
        torch.from_numpy(a).mul_(2)
        return a

    check(fn, np.arange(4.0))
    framejit.reset()
    a = np.arange(4.0)
    assert framejit.compile(fn, backend="eager")(a) is a


def test_an_array_torch_cannot_share_breaks():
    def fn(a):
        return a.sum()

    a = np.arange(12.0).reshape(3, 4)[:, ::-1]  # negative strides
    framejit.reset()
    explained = framejit.explain(fn)(a)
    assert "negative" in explained.break_reasons[0].reason
    framejit.reset()
    assert_same(framejit.compile(fn, backend="eager")(a), fn(a))


# -- breaks, each with its reason ----------------------------------------------------------------------------------


def test_numpy_random_is_not_traced():
    def fn(x):
        np.random.seed(0)
        return x + torch.from_numpy(np.random.rand(3, 4))

    reasons = check(fn, BASE, graphs=1, breaks=2)
    assert "numpy.random.seed" in reasons[0] and "random state" in reasons[0]


def test_a_numpy_function_without_a_torch_numpy_counterpart_breaks():
    def fn(x):
        a = x.numpy()
        return np.interp(a, [0.0, 1.0], [1.0, 3.0]) + 1

    (reason,) = check(fn, BASE, graphs=2, breaks=1)
    assert "numpy.interp" in reason and "torch._numpy" in reason


def test_a_numpy_function_on_a_torch_tensor_breaks():
    def fn(x):  # eager numpy gives a tensor back here (through __array_wrap__)
        return np.sin(x) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        (reason,) = check(fn, BASE, graphs=1, breaks=1)
    assert "numpy.sin given a torch tensor" in reason


def test_reading_values_is_data_dependent():
    def fn(x):
        a = x.numpy() * 2
        return float(a.sum()), a.tolist()

    reasons = check(fn, BASE, graphs=1, breaks=2)
    assert all("data-dependent" in r for r in reasons)


def test_a_data_dependent_shape_breaks():
    def fn(x):
        return np.nonzero(x.numpy() > 0.5)

    (reason,) = check(fn, BASE, graphs=1, breaks=1)
    assert "numpy.nonzero has a data-dependent output" in reason


def test_numpy_of_a_tensor_that_requires_grad_raises_as_in_eager():
    def fn(x):
        return x.numpy() * 2

    x = torch.ones(3, requires_grad=True)
    framejit.reset()
    with pytest.raises(RuntimeError, match="requires grad"):
        framejit.compile(fn, backend="eager")(x)
    framejit.reset()
    with pytest.raises(framejit.exc.Unsupported, match="requires grad"):
        framejit.compile(fn, backend="eager", fullgraph=True)(x)


def test_an_operator_between_an_array_and_a_tensor_breaks():
    def fn(x):
        return x + x.numpy()  # eager torch converts the array: a tensor

    (reason,) = check(fn, BASE, graphs=1, breaks=1)
    assert "numpy array and a torch tensor" in reason


def test_arrays_live_at_a_graph_break_reach_the_continuation():
    def fn(x):
        a = x.numpy() * 2
        s = a.sum()
        print("a graph break")
        return a + s, s, a

    reasons = check(fn, BASE, graphs=2, breaks=1)
    assert "I/O" in reasons[0]


def test_an_array_stored_on_an_object_is_made_after_the_graph():
    class Holder:
        pass

    holder = Holder()

    def fn(x):
        holder.cache = np.tanh(x.numpy())
        holder.total = holder.cache.sum()
        return x + 1

    framejit.reset()
    framejit.compile(fn, backend="eager")(BASE.clone())
    got_cache, got_total = holder.cache, holder.total
    fn(BASE.clone())
    assert_same((got_cache, got_total), (holder.cache, holder.total))


# -- numpy's dtypes and shapes where torch._numpy's differ (asked of numpy on stand-ins: numpy_dtypes.py) -------

INTS, BOOLS, FLOATS = torch.tensor([3, 1, 2]), torch.tensor([True, False, True]), torch.tensor([0.5, 0.25, 2.0])


@pytest.mark.parametrize(
    "name, data, arity",
    [
        ("true_divide", INTS, 2),  # float64 (torch._numpy: float32, torch's default dtype)
        ("true_divide", BOOLS, 2),
        ("sinc", INTS, 1),
        ("square", INTS, 1),  # int64 (torch._numpy: float64)
        ("trunc", INTS, 1),
        ("rint", INTS, 1),
        ("sin", BOOLS, 1),  # float16
        ("median", FLOATS, 1),  # 0-d (torch._numpy: one item)
        ("atleast_1d", FLOATS, 2),  # a tuple (torch._numpy: a list)
        ("meshgrid", FLOATS, 2),
        ("common_type", FLOATS, 1),  # a scalar type, a constant
        ("result_type", INTS, 2),
        ("heaviside", INTS, 2),
        ("mean", INTS, 1),
    ],
)
def test_numpy_dtypes_and_shapes_where_torch_numpy_differs(name, data, arity):
    fn_np = getattr(np, name)

    def fn(x):
        a = x.numpy()
        return fn_np(*[a] * arity)

    check(fn, data)


def test_a_function_torch_has_no_kernel_for_breaks():
    def fn(x):
        return np.cumsum(x.numpy())  # of bools: torch has no such kernel

    (reason,) = check(fn, BOOLS, graphs=1, breaks=1)
    assert "numpy.cumsum raised NotImplementedError in torch._numpy" in reason


@pytest.mark.parametrize("other", [2, 1.5, True, np.float32(2), np.int64(3), np.float64(0.5)], ids=repr)
@pytest.mark.parametrize("data", [INTS.int(), BOOLS, FLOATS, INTS.to(torch.uint8)], ids=lambda t: str(t.dtype))
def test_operators_with_numbers_follow_numpys_promotion(data, other):
    def fn(x, other):  # a numpy integer argument is a graph input (a number known at run time)
        a = x.numpy()
        return a + other, other * a, a / other, a**other, a > other

    check(fn, data, other)


def writes_through_a_view(x):
    a = x.numpy()
    row = a[1]
    row[0] = 9  # a[1, 0], so x[1, 0]
    row += 1
    a.T[0, 2] = -1  # x[2, 0]
    return x, a


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_writes_through_a_view_of_an_array(backend):
    check(writes_through_a_view, BASE, backend=backend)


def an_array_of_a_tensor_written_after_a_break(x):
    a = x.numpy()
    print("a graph break: the continuation takes the array and the tensor")
    a[0] = 100  # the tensor the array came from: the continuation's graph sees the two alias
    return x + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_array_and_its_tensor_alias_in_a_continuation(backend, capsys):
    check(an_array_of_a_tensor_written_after_a_break, BASE, graphs=2, breaks=1, backend=backend)


def test_two_views_of_one_numpy_buffer_break():
    def fn(a, b):
        a[0] = 100
        return b + 1  # sees the write in eager

    base = np.arange(6.0)
    framejit.reset()
    got = framejit.compile(fn, backend="aot_eager")(base[0:3], base[0:3].view())
    assert_same(got, np.array([101.0, 2.0, 3.0]))
    framejit.reset()
    explained = framejit.explain(fn)(np.arange(6.0)[0:3], np.arange(6.0)[0:3])
    assert explained.graph_count == 1  # distinct buffers: one graph
    framejit.reset()
    overlapping = np.arange(6.0)
    (reason,) = [r.reason for r in framejit.explain(fn)(overlapping[0:3], overlapping[1:4]).break_reasons]
    assert "shares memory with L['a']" in reason
