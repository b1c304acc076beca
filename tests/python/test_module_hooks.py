"""Forward pre-hooks and forward hooks of a module called in compiled code are traced around its forward, as
nn.Module._call_impl runs them (hook(module, args), a non-None result replacing the arguments; hook(module, args,
output), a non-None result replacing the output; with kwargs too). Hooks added later recompile; backward hooks
and `always_call` hooks still run the module as Python."""

import torch
from torch import nn

import framejit
from framejit.testing import CompileCounter
from tests.helpers import run_fullgraph


class Collector:
    """A global the hooks write to while active (output-capturing decorators keep one)."""

    def __init__(self):
        self.active = None


COLLECTOR = Collector()


def capture(module, args, output):
    if COLLECTOR.active is not None:
        COLLECTOR.active.append(output)


def scale_output(module, args, output):
    return output * 2 + args[0]


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        collected = []
        COLLECTOR.active = collected
        for layer in self.layers:
            x = torch.relu(layer(x))
        COLLECTOR.active = None
        return x, tuple(collected)


def make_model():
    torch.manual_seed(0)
    model = Stack()
    for layer in model.layers:
        layer.register_forward_hook(capture)
    return model


def test_forward_hooks_are_traced():
    model, x = make_model(), torch.randn(2, 4)
    got, want = run_fullgraph(model, x), model(x)
    torch.testing.assert_close(got, want)
    assert len(got[1]) == 2 and COLLECTOR.active is None


def test_a_hook_added_later_recompiles_and_can_replace_the_output():
    model, x = make_model(), torch.randn(2, 4)
    cnt = CompileCounter()
    compiled = framejit.optimize(cnt, nopython=True)(model)
    torch.testing.assert_close(compiled(x), model(x))
    handle = model.layers[1].register_forward_hook(scale_output)
    torch.testing.assert_close(compiled(x), model(x))
    handle.remove()
    torch.testing.assert_close(compiled(x), model(x))
    assert cnt.frame_count == 2


def test_pre_hooks_are_traced_and_replace_the_arguments():
    model, x = make_model(), torch.randn(2, 4)
    model.layers[0].register_forward_pre_hook(lambda module, args: (args[0] + 1,))
    model.layers[1].register_forward_pre_hook(lambda module, args: args[0] * 3)  # one value, not a tuple
    model.layers[1].register_forward_pre_hook(lambda module, args: None)  # keeps them
    torch.testing.assert_close(run_fullgraph(model, x), model(x))


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return self.linear(x) * scale


class CallsScaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Scaled()

    def forward(self, x):
        return self.inner(x, scale=2.0).relu()


def test_hooks_taking_kwargs_are_traced():
    def make():
        torch.manual_seed(0)
        model = CallsScaled()
        model.inner.register_forward_pre_hook(
            lambda module, args, kwargs: ((args[0] + 1,), {**kwargs, "scale": kwargs["scale"] * 3}), with_kwargs=True
        )
        model.inner.register_forward_hook(lambda module, args, kwargs, out: out + kwargs["scale"], with_kwargs=True)
        return model

    model, x = make(), torch.randn(2, 4)
    torch.testing.assert_close(run_fullgraph(make(), x), model(x))


def test_an_always_called_hook_runs_as_python():
    model, x = make_model(), torch.randn(2, 4)
    model.layers[0].register_forward_hook(lambda module, args, out: out * 2, always_call=True)
    torch.testing.assert_close(framejit.optimize(CompileCounter())(model)(x), model(x))
    reasons = [b.reason for b in framejit.explain(model)(x).break_reasons]
    assert reasons == ["module Linear has hooks"]


def test_the_hook_based_weight_norm_is_traced_with_eager_gradients():
    # torch.nn.utils.weight_norm (the older form) recomputes `weight` from g and v in a forward pre-hook
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.utils.weight_norm(nn.Linear(4, 4)), nn.ReLU(), nn.Linear(4, 2))

    model, compiled_model = make(), make()
    x = torch.randn(3, 4)
    cnt = framejit.testing.CompileCounterWithBackend("aot_eager")
    want, got = model(x), framejit.optimize(cnt)(compiled_model)(x)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(got, want)
    for p, q in zip(model.parameters(), compiled_model.parameters()):
        torch.testing.assert_close(q.grad, p.grad)
    assert cnt.frame_count == 1
