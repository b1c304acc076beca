"""torchvision classifiers: resnet18 and mobilenet_v3_small (random weights, 10 classes, 32x32 images), inference
and a training step (the loss and every gradient equal to eager's).

Skipped where torchvision cannot be imported. torchvision 0.28.0 (the release built against torch 2.13.0) is on
PyPI only as the CUDA build: its _C.so links libtorch_cuda.so and libc10_cuda.so, which torch 2.13.0+cpu does not
ship, so `import torchvision` fails ("RuntimeError: operator torchvision::nms does not exist"); the +cpu wheel is on
the PyTorch wheel index only, which this project's machines cannot reach. The counts below were measured with that
wheel's Python model code, its operator registrations stubbed out (docs/real-libraries.md)."""

from __future__ import annotations

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.reallibs.compare import assert_not_more_graphs, import_or_skip, run_framejit, run_torch_compile
from tests.reliability.many_calls import CALLS, inputs_for, one_thread  # noqa: F401 (a fixture)

torchvision = import_or_skip(
    "torchvision",
    "torchvision 0.28.0 on PyPI is the CUDA build (links libtorch_cuda.so); the +cpu wheel is not on PyPI",
)

MODELS = ("resnet18", "mobilenet_v3_small")
TOL = {"rtol": 1e-4, "atol": 1e-5}


def classifier(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None, num_classes=10)


def images() -> torch.Tensor:
    return torch.randn(2, 3, 32, 32)


@pytest.mark.parametrize("name", MODELS)
def test_inference_is_one_graph_equal_to_eager(name):
    model = classifier(name).eval()
    x, counter = images(), CompileCounter()
    with torch.no_grad():
        want = model(x)
        got = framejit.optimize(counter, nopython=True)(model)(x)
    torch.testing.assert_close(got, want, **TOL)
    assert counter.frame_count == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_training_step_is_one_graph_with_eager_gradients(name):
    model, x = classifier(name).train(), images()
    eager = classifier(name).train()

    def step(net, call):
        net.zero_grad(set_to_none=True)
        torch.manual_seed(1)  # mobilenet's dropout draws the same mask in both runs
        loss = torch.nn.functional.cross_entropy(call(x), torch.tensor([1, 7]))
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in net.named_parameters()}

    want = step(eager, eager)
    counter = CompileCounter()
    got = step(model, framejit.optimize(counter, nopython=True)(model))
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(dict(model.named_buffers()), dict(eager.named_buffers()), **TOL)  # BatchNorm stats
    assert counter.frame_count == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_graphs_against_torch_compile(name):
    model = classifier(name).eval()
    batches = [images(), images()]

    def steps():
        def make_step(x):
            def step(fn):
                with torch.no_grad():
                    return fn(x)

            return step

        return [make_step(x) for x in batches]

    theirs = run_torch_compile(model, steps())
    ours = run_framejit(model, steps())
    torch.testing.assert_close(ours.results, theirs.results, **TOL)
    assert theirs.counts == [1, 1]
    assert_not_more_graphs(ours.counts, theirs.counts)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name", MODELS)
def test_called_100_times(name):
    model = classifier(name).eval()
    counter = CompileCounter()
    compiled = framejit.optimize(counter, nopython=True)(model)
    x = None
    with torch.no_grad():
        for call in range(CALLS):
            x = inputs_for(call, x, images)
            torch.testing.assert_close(compiled(x), model(x), **TOL, msg=lambda m: f"call {call}: {m}")
    assert counter.frame_count == 1
