"""Dynamic shapes: compiles, compile time and steady-state time of framejit and torch.compile on workloads whose
sizes change, side by side in one process.

Run from the repository root: python benchmarks/dynamic.py [--backend eager|aot_eager|inductor] [--steps N]

Workloads (models written here with torch.nn only; random weights):
- encoder: a BERT-style encoder (embedding, 2 layers of nn.TransformerEncoderLayer-like attention written out,
  classification head) over 20 different sequence lengths, batch 4;
- mlp-train: an MLP training loop (forward, loss, backward, SGD step) over an epoch of 10 batches of 32 and a
  last, smaller batch of 20, twice;
- decoder: a small decoder generating 64 tokens greedily, its key/value cache growing by one token per step.

Each JIT runs with its default policy (dynamic=None: automatic dynamic shapes). Both JITs first compile a tiny
function (one-time imports are not counted); inductor's graph caches are off, so neither JIT reuses the other's
kernels. "compiles" counts the graphs handed to the backend; "compile s" is the
time spent in calls that compiled (the call's time minus the median steady call's); "steady ms" is the median time
of the calls of the last pass over the workload, once nothing compiles any more. Each JIT runs each workload twice
(framejit, torch.compile, torch.compile, framejit, from an empty cache each time): the table has the fewer compile
seconds of the two. Printed as a table.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

import framejit  # noqa: E402


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.qkv, self.out, self.heads, self.causal = nn.Linear(d, 3 * d), nn.Linear(d, d), heads, causal

    def forward(self, x: torch.Tensor, cache: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        if self.causal and cache is None:
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d)), (k, v)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.att, self.ln1, self.ln2 = Attention(d, heads, causal), nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, cache: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        a, cache = self.att(self.ln1(x), cache)
        x = x + a
        return x + self.mlp(self.ln2(x)), cache


class Encoder(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 64, layers: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(512, d)
        self.blocks = nn.ModuleList(Block(d, 4, causal=False) for _ in range(layers))
        self.head = nn.Linear(d, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x, _ = block(x)
        return self.head(x.mean(1))


class Decoder(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(512, d)
        self.blocks = nn.ModuleList(Block(d, 4, causal=True) for _ in range(layers))
        self.lm_head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor, start: torch.Tensor, caches: list | None = None) -> tuple:
        x = self.emb(ids) + self.pos(start + torch.arange(ids.shape[1]))
        new = []
        for i, block in enumerate(self.blocks):
            x, c = block(x, None if caches is None else caches[i])
            new.append(c)
        return self.lm_head(x[:, -1]), new


def encoder_calls(model: nn.Module) -> list:
    torch.manual_seed(0)
    lengths = [16 + 7 * i for i in range(20)]
    return [(lambda ids=torch.randint(0, 1000, (4, n)): model(ids)) for n in lengths]


def mlp_train_calls(model: nn.Module) -> list:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(32, 64) for _ in range(10)] + [torch.randn(20, 64)]

    def step(x: torch.Tensor) -> torch.Tensor:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return [(lambda x=x: step(x)) for x in batches]


def decoder_calls(model: nn.Module, steps: int) -> list:
    """One call generates `steps` tokens: a prompt, then one token at a time with the cache."""

    def generate() -> torch.Tensor:
        torch.manual_seed(0)
        ids = torch.randint(0, 1000, (1, 8))
        logits, caches = model(ids, torch.tensor(0))
        out = [logits.argmax(-1)]
        for i in range(steps - 1):
            logits, caches = model(out[-1][:, None], torch.tensor(8 + i), caches)
            out.append(logits.argmax(-1))
        return torch.stack(out)

    return [generate]


WORKLOADS = {
    "encoder": (Encoder, encoder_calls, 2),
    "mlp-train": (lambda: nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), mlp_train_calls, 2),
    "decoder": (Decoder, None, 2),
}


class Counter:
    def __init__(self, backend: str) -> None:
        self.backend, self.compiles = backend, 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.compiles += 1
        if self.backend == "eager":
            return gm
        if self.jit == "framejit":
            return framejit.lookup_backend(self.backend)(gm, example_inputs)
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend(self.backend)(gm, example_inputs)


def run(jit: str, name: str, backend: str, steps: int) -> tuple[int, float, float]:
    make, calls_of, passes = WORKLOADS[name]
    torch.manual_seed(0)
    model = make()
    counter = Counter(backend)
    counter.jit = jit
    if jit == "framejit":
        framejit.reset()
        compiled = framejit.compile(model, backend=counter)
    else:
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=counter)
    calls = decoder_calls(compiled, steps) if name == "decoder" else calls_of(compiled)
    times: list[list[float]] = []
    for _ in range(passes):
        this_pass = []
        for call in calls:
            start = time.perf_counter()
            if name == "mlp-train":
                call()
            else:
                with torch.no_grad():
                    call()
            this_pass.append(time.perf_counter() - start)
        times.append(this_pass)
    steady = statistics.median(times[-1])
    compile_s = sum(max(t - steady, 0.0) for t in times[0])
    if name == "decoder":  # one call is the whole generation: report per generated token
        steady /= steps
    return counter.compiles, compile_s, steady * 1e3


def prime(backend: str) -> None:
    # Inductor caches compiled graphs in memory and on disk by the graph's hash: the JIT that ran second would
    # find the first one's kernels. Both compile from scratch here.
    import torch._functorch.config
    import torch._inductor.config

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    tiny = lambda x: (x * 2).sum()  # noqa: E731
    framejit.compile(tiny, backend=backend)(torch.randn(3))
    torch.compile(tiny, backend=backend)(torch.randn(3))
    framejit.reset()
    torch._dynamo.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    prime(args.backend)
    print(f"backend {args.backend}; torch {torch.__version__}\n")
    print("| workload | JIT | compiles | compile s | steady ms |")
    print("|---|---|---|---|---|")
    for name in args.workloads.split(","):
        # each JIT twice, alternating (the first to meet a workload also pays torch's lazy setup of its ops):
        # the fewer compile seconds of the two runs, the steady time of the second
        best: dict[str, tuple[int, float, float]] = {}
        for jit in ("framejit", "torch.compile", "torch.compile", "framejit"):
            compiles, compile_s, steady = run(jit, name, args.backend, args.steps)
            if jit in best:
                compile_s = min(compile_s, best[jit][1])
            best[jit] = (compiles, compile_s, steady)
        for jit, (compiles, compile_s, steady) in best.items():
            unit = " per token" if name == "decoder" else ""
            print(f"| {name} | {jit} | {compiles} | {compile_s:.2f} | {steady:.3f}{unit} |", flush=True)


if __name__ == "__main__":
    main()
