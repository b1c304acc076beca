"""torch.autograd.Function calls given objects (dataclasses, modules, lists and dicts of tensors) and forwards that
write into what they were given: one graph, outputs and gradients equal eager's, each write made once per call."""

import copy
import itertools
from dataclasses import dataclass

import pytest
import torch

import framejit
from framejit.testing import CompileCounterWithBackend
from tests.helpers import assert_equal

BACKENDS = ["eager", "aot_eager"]


def _tensors(value, depth=0):
    """Every tensor reachable from value through lists, tuples, dicts and instance dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, depth + 1)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v, depth + 1)]
    if isinstance(value, torch.nn.Module):
        return list(value.parameters()) + [v for v in vars(value).values() if isinstance(v, torch.Tensor)]
    if hasattr(value, "__dict__"):
        return _tensors(vars(value), depth + 1)
    return []


def _grads(inputs):
    return [None if t.grad is None else t.grad.clone() for t in _tensors(inputs)]


def check(fn, make_inputs, backend, graphs=1, calls=1):
    """fn under fullgraph and `backend` against eager, each on its own copy of the inputs: outputs, then the gradients
    of every tensor reached from the inputs after a backward of the outputs' sum."""
    cnt = CompileCounterWithBackend(backend)
    compiled = framejit.optimize(cnt, nopython=True)(fn)
    eager_inputs = make_inputs()
    compiled_inputs = copy.deepcopy(eager_inputs)
    for _ in range(calls):
        expected, actual = fn(*eager_inputs), compiled(*compiled_inputs)
        assert_equal(actual, expected)
        for out, inputs in ((expected, eager_inputs), (actual, compiled_inputs)):
            loss = sum(t.sum() for t in _tensors(out) if t.requires_grad)
            if isinstance(loss, torch.Tensor):
                loss.backward()
        for a, e in zip(_grads(compiled_inputs), _grads(eager_inputs)):
            assert (a is None) == (e is None)
            if e is not None:
                assert torch.allclose(a, e)
    assert cnt.frame_count == graphs
    return compiled_inputs, eager_inputs


@dataclass
class Scales:
    offset: float
    weight: torch.Tensor
    bias: torch.Tensor


class ScaleBy(torch.autograd.Function):
    """Reads tensors inside an object it is given, and keeps the object on ctx for backward."""

    @staticmethod
    def forward(ctx, x, scales, y):
        ctx.scales = scales
        return x * scales.weight + scales.bias * y + scales.offset

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scales.weight * 2, None, grad * ctx.scales.bias


def _scale_inputs():
    return (
        torch.randn(3, requires_grad=True),
        Scales(0.5, torch.randn(3, requires_grad=True), torch.randn(3)),
        torch.randn(3, requires_grad=True),
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dataclass_argument_is_one_graph_and_its_tensors_get_no_gradient(backend):
    compiled_inputs, _ = check(lambda x, s, y: ScaleBy.apply(x, s, y), _scale_inputs, backend, calls=2)
    assert compiled_inputs[1].weight.grad is None  # apply does not see tensors inside objects, as in eager


def test_a_new_tensor_in_the_same_object_is_read_at_the_next_call():
    cnt = CompileCounterWithBackend("eager")
    compiled = framejit.optimize(cnt, nopython=True)(lambda x, s, y: ScaleBy.apply(x, s, y))
    x, scales, y = _scale_inputs()
    compiled(x, scales, y)
    scales.weight = torch.randn(3)
    scales.bias.mul_(3)
    assert_equal(compiled(x, scales, y), ScaleBy.apply(x, scales, y))
    other = Scales(0.5, torch.randn(3), torch.randn(3))  # another object: the node stands in for one by identity
    assert_equal(compiled(x, other, y), ScaleBy.apply(x, other, y))
    assert cnt.frame_count == 3  # the new weight does not require grad; the other object is another


class Blend(torch.autograd.Function):
    """Takes a list and a dict of tensors."""

    @staticmethod
    def forward(ctx, x, pair, table):
        ctx.save_for_backward(pair[0])
        return x * pair[0] + pair[1] * table["w"] - table["b"]

    @staticmethod
    def backward(ctx, grad):
        (first,) = ctx.saved_tensors
        return grad * first, None, None


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_and_dicts_of_tensors_as_arguments(backend):
    def make():
        return (
            torch.randn(4, requires_grad=True),
            [torch.randn(4, requires_grad=True), torch.randn(4)],
            {"w": torch.randn(4), "b": torch.randn(4, requires_grad=True)},
        )

    check(lambda x, pair, table: Blend.apply(x, pair, table), make, backend)


class Shift(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = 3
        self.table = torch.randn(4, 4)
        self.weight = torch.nn.Parameter(torch.randn(4, 4))


@dataclass
class Batch:
    count: int
    values: torch.Tensor


class ModuleAndData(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, batch, x):
        out = module.gain + module.table * batch.count * batch.values + module.weight
        return out + x, batch.values + x

    @staticmethod
    def backward(ctx, g_out, g_values):
        return None, None, g_out * 4 + g_values


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_and_a_dataclass_as_arguments(backend):
    module = Shift()

    def fn(batch, x):
        y, values = ModuleAndData.apply(module, batch, x)
        return x + y + values

    check(fn, lambda: (Batch(5, torch.randn(4, 4)), torch.randn(4, 4, requires_grad=True)), backend, calls=2)
    assert module.weight.grad is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dataclass_made_in_the_frame(backend):
    def fn(x, w, b):
        return ScaleBy.apply(x, Scales(1.5, w, b), x.cos())

    check(fn, lambda: (torch.randn(3, requires_grad=True), torch.randn(3), torch.randn(3)), backend)


class AppendsToWhatItIsGiven(torch.autograd.Function):
    """Appends a tensor it made to a list it is given, and keeps another on an object it is given."""

    @staticmethod
    def forward(ctx, x, seen, box):
        made = x.sin()
        seen.append(made)
        box.last = made * 2
        box.history.append(x.sum())
        return x.cos(), x * 2

    @staticmethod
    def backward(ctx, g_cos, g_double):
        return g_cos + g_double, None, None


class Box:
    def __init__(self):
        self.last = None
        self.history = []


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_a_local_list_and_an_object_happen_once_per_call(backend):
    def fn(x, box):
        seen = []
        cos, double = AppendsToWhatItIsGiven.apply(x, seen, box)
        return cos + double, seen[0], len(seen), box.last + 1

    # (the lists from outside grow, and their lengths are guarded, as in code without a Function: one graph a call)
    compiled, eager = check(fn, lambda: (torch.randn(3, requires_grad=True), Box()), backend, graphs=3, calls=3)
    assert_equal(compiled[1].last, eager[1].last)
    assert_equal(compiled[1].history, eager[1].history)  # three calls, three items


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_from_outside_grows_by_one_per_call(backend):
    def fn(x, seen, box):
        cos, _ = AppendsToWhatItIsGiven.apply(x, seen, box)
        return cos * seen[-1]

    compiled, eager = check(fn, lambda: (torch.randn(3, requires_grad=True), [], Box()), backend, graphs=3, calls=3)
    assert len(compiled[1]) == len(eager[1]) == 3
    assert_equal(compiled[1], eager[1])


class Counts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, counter):
        counter.calls += 1
        return x * counter.calls

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Counter:
    def __init__(self):
        self.calls = 0


def test_an_attribute_written_in_forward_is_written_once():
    compiled, eager = check(lambda x, c: Counts.apply(x, c), lambda: (torch.randn(3), Counter()), "eager")
    assert compiled[1].calls == eager[1].calls == 1


class AliasedLists(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, first, second):
        first.append(x + 1)
        return x * len(second)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def test_one_list_given_twice_is_one_list_in_the_forward():
    def fn(x):
        items = [x]
        return AliasedLists.apply(x, items, items), items[1]

    check(fn, lambda: (torch.randn(3, requires_grad=True),), "eager")


records = []


class AppendsToAGlobal(torch.autograd.Function):
    """Records what it made in a global list, and scales by how many records there are."""

    @staticmethod
    def forward(ctx, x):
        records.append(x.detach().sin())
        ctx.scale = len(records)
        return x * len(records)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale


def _twice(x):
    y = AppendsToAGlobal.apply(x) + AppendsToAGlobal.apply(x.cos())
    return y, records[-1] * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_forward_writing_a_global_list_is_one_graph_writing_once_per_call(backend):
    records.clear()
    cnt = CompileCounterWithBackend(backend)
    compiled = framejit.optimize(cnt, nopython=True)(_twice)
    x = torch.randn(3, requires_grad=True)
    expected = _twice(x)
    eager_records = list(records)
    records.clear()
    actual = compiled(x)
    assert_equal(actual, expected)
    assert_equal(records, eager_records)  # two calls, two items: the forward's own tensors
    assert records[-1] is not None and cnt.frame_count == 1
    actual[0].sum().backward()
    grad = x.grad.clone()
    x.grad = None
    expected[0].sum().backward()
    assert_equal(grad, x.grad)


class Ledger:
    def __init__(self):
        self.count, self.last, self.table, self.log = 0, None, {}, []


LEDGER = Ledger()


class KeepsALedger(torch.autograd.Function):
    """Writes an int and a tensor attribute of a global object, a dict and a list it holds; reads them back."""

    @staticmethod
    def forward(ctx, x):
        LEDGER.count += 1
        LEDGER.last = x * 3
        LEDGER.table["k"] = x + 1
        LEDGER.log.append(len(LEDGER.log))
        return x * LEDGER.count

    @staticmethod
    def backward(ctx, grad):
        return grad


def _keeps_ledger(x):
    LEDGER.log.clear()  # the frame changes the list before the calls: each forward sees what the trace holds
    LEDGER.log.append(-1)
    return KeepsALedger.apply(x) + KeepsALedger.apply(x + 1), LEDGER.last, LEDGER.table["k"], list(LEDGER.log)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_a_global_object_its_dict_and_list_are_eagers(backend):
    def state():
        return [LEDGER.count, LEDGER.last, dict(LEDGER.table), list(LEDGER.log)]

    x = torch.randn(3, requires_grad=True)
    LEDGER.__init__()
    expected, expected_state = _keeps_ledger(x), state()
    LEDGER.__init__()
    cnt = CompileCounterWithBackend(backend)
    assert_equal(framejit.optimize(cnt, nopython=True)(_keeps_ledger)(x), expected)
    assert_equal(state(), expected_state)
    assert cnt.frame_count == 1


def test_a_forward_rebinding_a_global_breaks_naming_it():
    global BOUND
    BOUND = 0

    class Rebinds(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            global BOUND
            BOUND = BOUND + 1
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    out = framejit.explain(lambda x: Rebinds.apply(x))(torch.randn(2))
    assert "Rebinds rebinds the global 'BOUND': the call runs as Python" in out.break_reasons[0].reason
    assert BOUND == 1  # the call ran once, as Python


class Slotted:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


class ReadsSlot(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, holder):
        return x + holder.t

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_an_object_the_node_cannot_stand_in_for_breaks_naming_it():
    x, holder = torch.randn(2, requires_grad=True), Slotted(torch.randn(2))
    out = framejit.explain(lambda x, h: ReadsSlot.apply(x, h))(x, holder)
    assert out.graph_break_count == 1
    assert "ReadsSlot.apply gets UserObjectVariable(Slotted)" in out.break_reasons[0].reason
    assert_equal(framejit.compile(lambda x, h: ReadsSlot.apply(x, h))(x, holder), ReadsSlot.apply(x, holder))


class Triple(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, y):
        return x * 3 + y

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad * 5, grad  # deliberately not the forward's gradient: eager's backward must run


class TripleWithItsOwnRule(Triple):
    generate_vmap_rule = False

    @staticmethod
    def vmap(info, in_dims, x, y):
        return x * 2 + y, in_dims[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_of_a_functions_apply_is_one_graph_with_eagers_gradients(backend):
    def fn(x, y):
        return torch.vmap(Triple.apply, in_dims=(0, None))(x, y).sin()

    check(fn, lambda: (torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)), backend, calls=2)


def test_vmap_of_anything_else_breaks_naming_it():
    x, y = torch.randn(4, 3), torch.randn(3)
    for fn, expected in (
        (lambda x, y: torch.vmap(TripleWithItsOwnRule.apply, in_dims=(0, None))(x, y), "has a vmap rule of its own"),
        (lambda x, y: torch.vmap(lambda a: Triple.apply(a, y))(x), "vmap only of an autograd.Function's apply"),
    ):
        framejit.reset()
        out = framejit.explain(fn)(x, y)
        assert expected in out.break_reasons[0].reason
        assert_equal(framejit.compile(fn)(x, y), fn(x, y))


def test_torch_func_grad_of_a_compiled_function_calling_a_function():
    """A compiled frame inside an eager torch.func.grad runs as Python: the transform sees the real Function."""
    compiled = framejit.compile(lambda x: Triple.apply(x, x))
    x = torch.randn(3)
    assert_equal(
        torch.func.grad(lambda x: compiled(x).sum())(x), torch.func.grad(lambda x: Triple.apply(x, x).sum())(x)
    )


class WithACounter:
    def __init__(self):
        self.weight = torch.randn(3)
        self.ticket = itertools.count()  # the node cannot rebuild it, and need not: the stand-in holds the live one


class ReadsWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, holder):
        return x * holder.weight

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_an_object_holding_something_the_node_cannot_rebuild_besides_tensors():
    check(lambda x, h: ReadsWeight.apply(x, h), lambda: (torch.randn(3, requires_grad=True), WithACounter()), "eager")


def test_a_vmap_rule_changed_later_recompiles():
    class Thrice(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad):
            return grad * 3

    def fn(x):
        return torch.vmap(Thrice.apply)(x)

    compiled, x = framejit.compile(fn), torch.randn(2, 3)
    assert_equal(compiled(x), fn(x))
    Thrice.generate_vmap_rule = False
    with pytest.raises(RuntimeError, match="does not have vmap support"):  # eager's error, the call run as Python
        compiled(x)
    Thrice.vmap = staticmethod(lambda info, in_dims, x: (x * 2, in_dims[0]))
    assert_equal(compiled(x), x * 2)
