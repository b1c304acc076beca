"""Capture time against model depth: a tiny Llama of 2 to 128 layers, framejit's first call against
torch.compile's, backend "eager", side by side, with the time per layer.

Run from the repository root: python benchmarks/capture_scaling.py [--depths 2,4,8,16,32,64,128] [--repeat R]

A capture that grows linearly with depth has a flat time per layer: each added layer should cost what the
first ones did. Both JITs first compile a tiny function (their one-time setup is not counted); each depth's model
runs once eagerly; then each JIT compiles a fresh copy R times from an empty cache (framejit.reset(),
torch._dynamo.reset()), alternating, and the median is printed, in inference (eval, no_grad), with the graph
counts (one each, for a fair comparison).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402
from benchmarks.hf_capture_time import first_call_s  # noqa: E402


def tiny_llama(layers: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
    )
    return LlamaModel(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="2,4,8,16,32,64,128")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.simplefilter("ignore")
    x = torch.randn(4)
    framejit.optimize("eager")(lambda t: torch.relu(t) + 1)(x)
    torch.compile(lambda t: torch.relu(t) + 1, backend="eager")(x)
    ids = torch.randint(0, 128, (1, 16))
    print(
        f"first call of a tiny Llama, backend eager, inference; torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    print(
        f"{'layers':>6s} {'fj s':>8s} {'tc s':>8s} {'ratio':>6s} {'fj ms/layer':>12s} {'tc ms/layer':>12s} "
        f"{'graphs fj/tc':>12s}"
    )
    for depth in (int(d) for d in args.depths.split(",")):
        model = tiny_llama(depth)
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
        times: dict[str, list[float]] = {"framejit": [], "torch.compile": []}
        graphs: dict[str, int] = {}
        for i in range(args.repeat):
            for jit in ("framejit", "torch.compile") if i % 2 == 0 else ("torch.compile", "framejit"):
                seconds, graphs[jit] = first_call_s(jit, model, {"input_ids": ids, "use_cache": False})
                times[jit].append(seconds)
        fj, tc = statistics.median(times["framejit"]), statistics.median(times["torch.compile"])
        print(
            f"{depth:6d} {fj:8.2f} {tc:8.2f} {fj / tc:6.2f} {fj / depth * 1e3:12.1f} {tc / depth * 1e3:12.1f} "
            f"{graphs['framejit']:>6d}/{graphs['torch.compile']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
