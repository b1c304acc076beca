"""The built-in `framejit bench` suite: small but real models, written as ordinary user code."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn


def mse_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, target)


def cross_entropy_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # language-model logits are (batch, time, vocab): flatten the positions
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


class WithLoss(nn.Module):
    """model + loss in one forward, the unit compiled for a training step (backward and the
    optimizer step run after it, in both eager and compiled form)."""

    def __init__(self, model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(self.model(x), target)


class MLP(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int, depth: int) -> None:
        super().__init__()
        dims = [d_in] + [d_hidden] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.head(x)


class CNN(nn.Module):
    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
        )
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch norm, and a projected shortcut when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = None
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, width: int, blocks_per_stage: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks: list[nn.Module] = []
        c = width
        for stage in range(3):
            c_out = width * 2**stage
            for i in range(blocks_per_stage):
                blocks.append(BasicBlock(c, c_out, stride=2 if i == 0 and stage > 0 else 1))
                c = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(x.mean(dim=(2, 3)))


class TransformerEncoderModel(nn.Module):
    """torch.nn's TransformerEncoder (its own code, with the inference fast-path checks) and a mean-pooled head."""

    def __init__(self, d_model: int, heads: int, layers: int, classes: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


class CausalSelfAttention(nn.Module):
    """Multi-head attention with a causal mask, written out (no scaled_dot_product_attention)."""

    def __init__(self, d_model: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class GPTBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, max_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(GPTBlock(d_model, heads, max_len) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class LoopRNN(nn.Module):
    """An Elman RNN as a Python loop over time steps (a JIT unrolls it into one graph)."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
        super().__init__()
        self.d_hidden = d_hidden
        self.inp = nn.Linear(d_in, d_hidden)
        self.rec = nn.Linear(d_hidden, d_hidden, bias=False)
        self.out = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], self.d_hidden)
        for t in range(x.shape[1]):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return self.out(h)


@dataclasses.dataclass
class Case:
    """One model ready to run: the module, its input, a training target and the loss; `compared` picks what of
    an output is compared with eager's (all of it by default)."""

    model: nn.Module
    x: torch.Tensor
    target: torch.Tensor
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    compared: Callable[[Any], Any] = lambda out: out


def _mlp(quick: bool) -> Case:
    d_in, hidden, depth, batch = (32, 64, 2, 8) if quick else (512, 1024, 4, 64)
    return Case(MLP(d_in, hidden, 10, depth), torch.randn(batch, d_in), torch.randn(batch, 10), mse_loss)


def _cnn(quick: bool) -> Case:
    width, batch, size = (8, 2, 16) if quick else (32, 16, 32)
    return Case(CNN(width, 10), torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,)), cross_entropy_loss)


def _resnet(quick: bool) -> Case:
    width, blocks, batch, size = (8, 1, 2, 16) if quick else (16, 2, 8, 32)
    return Case(
        ResNet(width, blocks, 10), torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,)), cross_entropy_loss
    )


def _transformer(quick: bool) -> Case:
    d, heads, layers, batch, seq = (32, 2, 1, 2, 8) if quick else (128, 4, 2, 16, 64)
    return Case(
        TransformerEncoderModel(d, heads, layers, 10),
        torch.randn(batch, seq, d),
        torch.randint(0, 10, (batch,)),
        cross_entropy_loss,
    )


def _gpt(quick: bool) -> Case:
    vocab, d, heads, layers, batch, seq = (64, 32, 2, 1, 2, 8) if quick else (512, 128, 4, 2, 8, 64)
    return Case(
        GPT(vocab, d, heads, layers, max_len=seq),
        torch.randint(0, vocab, (batch, seq)),
        torch.randint(0, vocab, (batch, seq)),
        cross_entropy_loss,
    )


def _rnn(quick: bool) -> Case:
    d_in, hidden, batch, seq = (8, 16, 2, 4) if quick else (32, 128, 32, 24)
    return Case(LoopRNN(d_in, hidden, 10), torch.randn(batch, seq, d_in), torch.randn(batch, 10), mse_loss)


# name -> builder(quick); the runner seeds the RNG before each call, so every build is identical
SUITE: dict[str, Callable[[bool], Case]] = {
    "mlp": _mlp,
    "cnn": _cnn,
    "resnet": _resnet,
    "transformer": _transformer,
    "gpt": _gpt,
    "rnn": _rnn,
}
