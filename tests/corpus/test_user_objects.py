"""Capture corpus: user-defined objects, and side effects on arguments (compared with eager's
argument state).

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.corpus.harness import case_registry, check, program_params, t


CASES, case = case_registry()


# ---- user-defined objects -----------------------------------------------------------------------


class Config:
    DEPTH = 3

    def __init__(self, scale=2.0, act="relu", depth=2, bias=None):
        self.scale = scale
        self.act = act
        self.depth = depth
        self.bias = bias

    @property
    def double_scale(self):
        return self.scale * 2

    def activate(self, x):
        return torch.relu(x) if self.act == "relu" else torch.tanh(x)

    def factor(self):
        return self.scale + self.depth

    @staticmethod
    def shift(x):
        return x + 1

    @classmethod
    def default_depth(cls):
        return cls.DEPTH


@dataclasses.dataclass
class DataConfig:
    alpha: float = 0.5
    n: int = 2
    name: str = "dc"
    dims: tuple = (2, 3)


class Outer:
    def __init__(self):
        self.inner = Config(scale=4.0)
        self.tag = "outer"


class Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, x):
        return x * self.s


class Holder:
    def __init__(self, weight):
        self.weight = weight


class Counter:
    def __init__(self):
        self.count = 0


@case(t(3), Config(), ops=2)
def object_attributes(x, cfg):
    return x * cfg.scale + cfg.depth


@case(t(3), Config(), ops=1)
def object_property(x, cfg):
    return x * cfg.double_scale


@case(t(3), Config(act="tanh"), ops=1)
def object_method_branching_on_attr(x, cfg):
    return cfg.activate(x)


@case(t(3), Config(), ops=1)
def object_method_constant(x, cfg):
    return x * cfg.factor()


@case(t(3), Config(), ops=1)
def object_staticmethod(x, cfg):
    return cfg.shift(x)


@case(t(3), ops=1)
def class_staticmethod(x):
    return Config.shift(x)


@case(t(3), Config(), ops=1)
def object_classmethod(x, cfg):
    return x * cfg.default_depth()


@case(t(3), ops=1)
def class_classmethod(x):
    return x * Config.default_depth()


@case(t(3), Config(), ops=2)
def object_getattr_builtin(x, cfg):
    return x * getattr(cfg, "scale") + getattr(cfg, "missing", 0.0)


@case(t(3), Config(), ops=1)
def object_hasattr_isinstance(x, cfg):
    if hasattr(cfg, "act") and not hasattr(cfg, "nope") and isinstance(cfg, Config):
        return x * 2
    return x


@case(t(3), Config(bias=None), ops=1)
def object_none_attribute(x, cfg):
    return x + cfg.bias if cfg.bias is not None else x * 2


@case(t(3), DataConfig(), ops=2)
def dataclass_fields(x, dc):
    return x * dc.alpha + dc.n, dc.name


@case(t(6), DataConfig(), ops=1)
def dataclass_tuple_field(x, dc):
    return x.view(*dc.dims)


@case(t(3), Outer(), ops=1)
def object_nested_attributes(x, o):
    return x * o.inner.scale, o.tag


@case(t(3), Scaler(3.0), ops=1)
def object_callable(x, s):
    return s(x)


@case(t(3), Holder(t(3)), ops=1)
def object_tensor_attribute(x, h):
    return x + h.weight


# ---- side effects on arguments (checked by comparing argument state with eager's) -----------------


@case(t(3), [], ops=2)
def side_effect_list_append(x, out):
    out.append(x + 1)
    return x * 2


@case(t(3), [1], ops=1)
def side_effect_list_extend_insert_pop(x, out):
    out.extend([x * 2, 3])
    out.insert(0, "s")
    out.pop()
    return len(out)


@case(t(3), [], ops=2)
def side_effect_list_then_read(x, out):
    out.append(x * 2)
    return out[-1] + 1


@case(t(3), {}, ops=1)
def side_effect_dict_setitem(x, d):
    d["y"] = x * 2
    return x


@case(t(3), {"a": 1, "b": t(3)}, ops=1)
def side_effect_dict_update_pop(x, d):
    d.update(c=x + 1)
    d.pop("a")
    return d["b"]


@case(t(3), {"lst": []}, ops=1)
def side_effect_nested_list_in_dict(x, d):
    d["lst"].append(x.exp())
    return None


@case(t(3), Config(), ops=1)
def side_effect_setattr_object(x, cfg):
    cfg.last = x + 1
    return x


@case(t(3), Counter(), ops=1)
def side_effect_object_counter(x, c):
    c.count += 1
    return x * c.count


@case(t(3), Config(), ops=1)
def side_effect_setattr_builtin(x, cfg):
    setattr(cfg, "extra", x * 2)
    return cfg.extra


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)
