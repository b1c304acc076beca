"""Regional compilation: each layer of a Hugging Face BERT encoder compiled on its own, framejit and torch.compile
side by side in one process.

Run from the repository root: python benchmarks/regional.py [--backend eager|inductor] [--layers 12]

The model is `transformers.BertModel` (random weights; hidden 256, 4 heads, `--layers` layers), batch 4,
sequence 64, inference under no_grad. Each `model.encoder.layer[i]` is replaced by the JIT's compiled version of
it (`framejit.compile(layer)` / `torch.compile(layer)`), the way regional compilation is done to cut compile
time: the layers are instances of one class, so one compile can serve them all. "compiles" counts the graphs
handed to the backend; "first call s" is the first forward of the whole model (all compiles); "steady ms" the
median of 20 later calls. Both JITs first compile a tiny function (one-time imports not counted); inductor's
graph caches are off. Inductor's C++ kernels are still cached on disk by their source, so each JIT runs twice,
alternating (framejit, torch.compile, torch.compile, framejit), and the table has its fewer first-call seconds.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402
from benchmarks.dynamic import Counter, prime  # noqa: E402


def bert(layers: int) -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=256,
        num_attention_heads=4,
        intermediate_size=1024,
        num_hidden_layers=layers,
        vocab_size=1000,
        attn_implementation="eager",
    )
    return BertModel(config).eval()


def run(jit: str, model: torch.nn.Module, backend: str, ids: torch.Tensor) -> tuple[int, float, float, torch.Tensor]:
    counter = Counter(backend)
    counter.jit = jit
    model = copy.deepcopy(model)
    if jit == "framejit":
        framejit.reset()
        compile_layer = lambda layer: framejit.compile(layer, backend=counter)  # noqa: E731
    else:
        torch._dynamo.reset()
        compile_layer = lambda layer: torch.compile(layer, backend=counter)  # noqa: E731
    layers = model.encoder.layer
    for i in range(len(layers)):
        layers[i] = compile_layer(layers[i])
    with torch.no_grad():
        start = time.perf_counter()
        out = model(ids).last_hidden_state
        first = time.perf_counter() - start
        times = []
        for _ in range(20):
            start = time.perf_counter()
            model(ids)
            times.append(time.perf_counter() - start)
    return counter.compiles, first, statistics.median(times) * 1e3, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--layers", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    prime(args.backend)
    model = bert(args.layers)
    ids = torch.randint(0, 1000, (4, 64))
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    print(f"backend {args.backend}; {args.layers} BERT layers; torch {torch.__version__}\n")
    print("| JIT | compiles | first call s | steady ms | max error |")
    print("|---|---|---|---|---|")
    # each JIT twice, alternating: inductor's C++ kernels are cached on disk by their source, so the second JIT
    # to compile a kernel finds it built; the table has each JIT's fewer first-call seconds
    best: dict[str, tuple] = {}
    for jit in ("framejit", "torch.compile", "torch.compile", "framejit"):
        result = run(jit, model, args.backend, ids)
        if jit not in best or result[1] < best[jit][1]:
            best[jit] = result
    for jit, (compiles, first, steady, out) in best.items():
        error = (out - expected).abs().max().item()
        print(f"| {jit} | {compiles} | {first:.2f} | {steady:.2f} | {error:.1e} |")


if __name__ == "__main__":
    main()
