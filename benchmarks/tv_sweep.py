"""torchvision's models under framejit and torch.compile side by side: graphs, breaks, results equal to eager.

Run from the repository root: python benchmarks/tv_sweep.py [--family classification|segmentation|video]
[--models a,b] [--train]

Every model torchvision lists for the family is built with random weights (nothing is downloaded) in eval mode
and called on one random batch (2x3x64x64; 224 for the vision transformers, 299 for Inception; video 1x3x8x64x64,
16 frames and 224 for MViT/S3D/Swin3D): eagerly, under framejit.optimize(<counting backend>) and under
torch.compile(backend=<counting backend>) after torch._dynamo.reset(). In inference (no_grad) the counting
backends run the graphs as they are; with --train each call is a training step (the mean of the output, backward)
and the counters wrap aot_eager (framejit's and torch's), gradients compared too. "ok" is allclose (atol 1e-4,
rtol 1e-3) to eager on every output (and gradient). framejit's breaks come from framejit.explain, torch.compile's
from torch._dynamo's graph_break counter. Times are the first call (compile included), one thread.

torchvision's PyPI wheel carries C++ ops built for CUDA torch; with a CPU torch their library does not load and
`import torchvision` fails registering fake kernels for them (`operator torchvision::nms does not exist`). Then
the fake-kernel module is skipped (the models measured here never call those ops: detection models, which do,
are not measured).
"""

from __future__ import annotations

import argparse
import sys
import time
import types
import warnings

import torch

FAMILIES = ("classification", "segmentation", "video")


def import_torchvision() -> types.ModuleType:
    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision
    return torchvision


class Counter:
    """A backend that counts graphs and runs them as they are, or compiles them with `inner`."""

    def __init__(self, inner=None) -> None:
        self.graphs, self.inner = 0, inner

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward if self.inner is None else self.inner(gm, example_inputs)


def step(model, call, x, train: bool):
    torch.manual_seed(0)
    if not train:
        with torch.no_grad():
            return call(x)
    model.zero_grad(set_to_none=True)
    out = call(x)
    main = out["out"] if isinstance(out, dict) else out
    main.float().mean().backward()
    return out, [p.grad for p in model.parameters()]


def tensors(value) -> list:
    if isinstance(value, torch.Tensor) or value is None:
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [t for v in value for t in tensors(v)] if isinstance(value, (list, tuple)) else []


def same(a, b) -> bool:
    ta, tb = tensors(a), tensors(b)
    return len(ta) == len(tb) and all(
        x is y is None or x is not None and y is not None and torch.allclose(x, y, atol=1e-4, rtol=1e-3)
        for x, y in zip(ta, tb)
    )


def batch(tv: types.ModuleType, family: str, name: str) -> torch.Tensor:
    if family == "video":
        big = name.startswith(("mvit", "s3d", "swin3d"))
        return torch.randn(1, 3, 16 if big else 8, 224 if big else 64, 224 if big else 64)
    size = 299 if name == "inception_v3" else 224 if name.startswith(("vit", "swin", "maxvit")) else 64
    return torch.randn(2, 3, size, size)


def run(tv: types.ModuleType, family: str, name: str, train: bool) -> str:
    import framejit
    import torch._dynamo
    from torch._dynamo.backends.registry import lookup_backend
    from torch._dynamo.utils import counters

    kwargs = (
        {"aux_logits": False, "init_weights": False}
        if name in ("googlenet", "inception_v3")
        else {"weights_backbone": None}
        if family == "segmentation"
        else {}
    )
    torch.manual_seed(0)
    try:
        model = tv.models.get_model(name, **kwargs).eval()
        x = batch(tv, family, name)
        expected = step(model, model, x, train)
    except Exception as e:  # noqa: BLE001 - a model that cannot run eagerly is reported and skipped
        return f"{name}: not built ({type(e).__name__}: {str(e)[:80]})"
    results = []
    for jit in ("framejit", "torch.compile"):
        framejit.reset()
        torch._dynamo.reset()
        counters.clear()
        inner = (
            (framejit.backends.lookup_backend if jit == "framejit" else lookup_backend)("aot_eager") if train else None
        )
        counter = Counter(inner)
        compiled = framejit.optimize(counter)(model) if jit == "framejit" else torch.compile(model, backend=counter)
        start = time.perf_counter()
        try:
            status = "ok" if same(expected, step(model, compiled, x, train)) else "MISMATCH"
        except Exception as e:  # noqa: BLE001
            status = f"ERROR {type(e).__name__}: {str(e)[:100]}"
        seconds = time.perf_counter() - start
        if jit == "framejit":
            framejit.reset()
            with torch.set_grad_enabled(train):
                reasons = [b.reason for b in framejit.explain(model)(x).break_reasons]
            breaks = len(reasons)
        else:
            breaks, reasons = sum(counters["graph_break"].values()), []
        results.append(
            f"{jit} {counter.graphs} graphs {breaks} breaks {status} {seconds:.1f}s"
            + (f" ({reasons[0][:90]})" if reasons else "")
        )
    torch._dynamo.reset()
    return f"{name}: " + " | ".join(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default="classification")
    parser.add_argument("--models", default="")
    parser.add_argument("--train", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    tv = import_torchvision()
    module = {"classification": tv.models, "segmentation": tv.models.segmentation, "video": tv.models.video}[
        args.family
    ]
    names = [n for n in args.models.split(",") if n] or tv.models.list_models(module=module)
    for name in names:
        print(run(tv, args.family, name, args.train), flush=True)


if __name__ == "__main__":
    main()
