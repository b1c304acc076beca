"""Capture corpus: nn.Modules.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from framejit.testing import CompileCounter, same

from tests.corpus.harness import RNG, case_registry, check, program_params, t
from tests.corpus.shared import MODULE_LIST


CASES, case = case_registry()


# ---- nn.Modules -------------------------------------------------------------------------------------


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class HelperMethods(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 0.5

    def _act(self, x):
        return F.gelu(x) * self.scale

    def _bias_like(self, x):
        return torch.ones_like(x)

    def forward(self, x):
        return self._act(self.fc(x)) + self._bias_like(x)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * 2


class Child(Base):
    def forward(self, x):
        return super().forward(x) + 1


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @property
    def out_dim(self):
        return self.fc.out_features

    def forward(self, x):
        return self.fc(x).view(-1, self.out_dim)


class WithStaticAndClass(nn.Module):
    FACTOR = 3.0

    @staticmethod
    def _norm(x):
        return x / x.norm(dim=-1, keepdim=True)

    @classmethod
    def _factor(cls):
        return cls.FACTOR

    def forward(self, x):
        return self._norm(x) * self._factor()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class SeqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))

    def forward(self, x):
        return self.seq(x)


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4, generator=RNG))
        self.register_buffer("shift", torch.randn(4, generator=RNG))
        self.use_shift = True

    def forward(self, x):
        y = x @ self.weight
        if self.use_shift:
            y = y + self.shift
        return y


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(self.flatten(x))


_NORM_LIST = nn.ModuleList([nn.LayerNorm(4) for _ in range(3)])
_SEQUENTIAL = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
_NAMED_SEQUENTIAL = nn.Sequential(
    collections.OrderedDict(
        [("first", nn.Linear(4, 4)), ("act", nn.Sigmoid()), ("drop", nn.Dropout(0.5)), ("id", nn.Identity())]
    )
).eval()
_MODULE_DICT = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})


@case(TinyMLP(), t(2, 4), ops=3)
def module_mlp(m, x):
    return m(x)


@case(HelperMethods(), t(2, 4), ops=5)
def module_helper_methods(m, x):
    return m(x)


@case(Child(), t(2, 4), ops=3)
def module_super_forward(m, x):
    return m(x)


@case(WithProperty(), t(2, 4), ops=2)
def module_property(m, x):
    return m(x)


@case(WithStaticAndClass(), t(2, 4), ops=3)
def module_static_and_class_methods(m, x):
    return m(x)


@case(Stack(), t(2, 4), ops=6)
def module_list_loop(m, x):
    return m(x)


@case(SeqModel(), t(2, 4), ops=3)
def module_sequential_call(m, x):
    return m(x)


@case(Affine(), t(2, 4), ops=2)
def module_parameter_buffer(m, x):
    return m(x)


@case(TinyCNN().eval(), t(1, 2, 4, 4), ops=6)
def module_cnn_eval(m, x):
    return m(x)


@case(TinyMLP(), t(2, 4), ops=3)
def module_forward_called_directly(m, x):
    return m.forward(x)


@case(_SEQUENTIAL, t(2, 4), ops=3)
def sequential_iterate(seq, x):
    for layer in seq:
        x = layer(x)
    return x


@case(_SEQUENTIAL, t(2, 4), ops=3)
def sequential_index(seq, x):
    return seq[-1](seq[0](x).relu())


@case(_NAMED_SEQUENTIAL, t(2, 4), ops=3)
def sequential_named_children(seq, x):
    return seq(x)


@case(MODULE_LIST, t(2, 4), ops=6)
def modulelist_enumerate(ml, x):
    for i, layer in enumerate(ml):
        x = layer(x) * (i + 1)
    return x


@case(MODULE_LIST, t(2, 4), ops=1)
def modulelist_len_index(ml, x):
    return ml[len(ml) - 1](x)


@case(MODULE_LIST, _NORM_LIST, t(2, 4), ops=6)
def modulelist_zip(ml, norms, x):
    for layer, norm in zip(ml, norms):
        x = norm(layer(x))
    return x


@case(MODULE_LIST, t(2, 4), ops=2)
def modulelist_slice(ml, x):
    for layer in ml[:2]:
        x = layer(x)
    return x


@case(MODULE_LIST, t(2, 4), ops=3)
def modulelist_reversed(ml, x):
    for layer in reversed(ml):
        x = layer(x)
    return x


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_items(md, x):
    return {k: h(x) for k, h in md.items()}


@case(_MODULE_DICT, t(2, 4), ops=4)
def moduledict_keys_index(md, x):
    return [md[k](x).sum() for k in md.keys()]


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_values(md, x):
    outs = []
    for h in md.values():
        outs.append(h(x))
    return outs


@case(_MODULE_DICT, t(2, 4), ops=2)
def moduledict_iterate_contains(md, x):
    return [md[k](x) for k in md if k in md and "z" not in md]


@case(nn.Linear(4, 4), t(2, 4), ops=5)
def module_parameters_genexpr(m, x):
    return x * sum(p.sum() for p in m.parameters())


@case(nn.Linear(4, 4), t(2, 4), ops=1)
def module_named_parameters_metadata(m, x):
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    return m(x), shapes


@case(nn.Linear(4, 3), t(2, 4), ops=1)
def module_introspection(m, x):
    if isinstance(m, nn.Linear) and m.in_features == x.shape[-1] and m.bias is not None:
        return m(x)
    return x


@case(nn.Linear(4, 4), t(2, 4), ops=4)
def module_under_no_grad(m, x):
    with torch.no_grad():
        y = m(x)
    return y * 2


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)


# ---------------------------------------------------------------------------------------------
# dedicated tests: the optimized module wrapper
# ---------------------------------------------------------------------------------------------


def test_optimized_module_wrapper():
    m = TinyMLP()
    x = t(2, 4)
    cnt = CompileCounter()
    opt = framejit.optimize(cnt, nopython=True)(m)
    assert same(opt(x), m(x))
    assert same(opt(x), m(x))
    assert cnt.frame_count == 1 and cnt.op_count == 3
