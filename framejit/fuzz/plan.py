"""The calls the runner makes of a program (`CALLS`: per call N, dtype, seed, number bump, layouts) and how it
compiles it (`COMPILE`: backend, `dynamic=`, `mark_dynamic` arguments), drawn from the program's seed in a stream
of their own; a program without them gets DEFAULT_CALLS and the default policy.
"""

from __future__ import annotations

import dataclasses
import random
import types
from typing import Any, Iterator, Sequence

import torch

from framejit.fuzz import layouts as L

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class CallSpec:
    """One call of the program: batch size, dtype of the float tensor arguments, the seed of their values,
    whether it passes the previous call's argument objects again, what is added to Python number arguments, and
    the layout of each tensor argument by label (`x`, `xs[0]`, `d['a']`, `obj.t`; contiguous where absent)."""

    n: int
    dtype: torch.dtype
    seed: int
    reuse: bool = False
    bump: int = 0
    layouts: tuple = ()  # ((label, layout), ...)

    def layout(self, label: str) -> Any:
        return dict(self.layouts).get(label, L.CONTIGUOUS)

    def describe(self, i: int) -> str:
        if self.reuse:
            return f"call {i} (same argument objects again)"
        shown = "".join(f", {label} {L.describe(lay)}" for label, lay in self.layouts)
        return f"call {i} (N={self.n}, {str(self.dtype)[6:]}{shown})"


DEFAULT_CALLS = (
    CallSpec(3, torch.float32, 1),
    CallSpec(3, torch.float32, 1, reuse=True),
    CallSpec(5, torch.float32, 2, bump=1),
    CallSpec(3, torch.float64, 3),
)
TRAIN_DEFAULT_CALLS = DEFAULT_CALLS[:3]  # aot_eager compiles are slow: training programs skip the float64 call


@dataclasses.dataclass(frozen=True)
class Policy:
    """How the compiled side compiles: the backend (None: eager, or aot_eager for training programs), the
    `dynamic=` argument, and the argument labels whose dim 0 gets `framejit.mark_dynamic` before each call."""

    backend: str | None = None
    dynamic: bool | None = None
    mark_dynamic: tuple = ()


def calls_of(module: types.ModuleType, train: bool) -> list[CallSpec]:
    """The program's CALLS, or the defaults."""
    entries = getattr(module, "CALLS", None)
    if entries is None:
        return list(TRAIN_DEFAULT_CALLS if train else DEFAULT_CALLS)
    calls: list[CallSpec] = []
    for e in entries:
        if e.get("reuse"):
            if not calls:
                raise ValueError("the first call cannot pass the previous call's arguments again")
            calls.append(dataclasses.replace(calls[-1], reuse=True))
            continue
        lays = tuple(
            (label, tuple(lay) if isinstance(lay, list) else lay) for label, lay in e.get("layouts", {}).items()
        )
        calls.append(CallSpec(e["n"], DTYPES[e["dtype"]], e["seed"], bump=e.get("bump", 0), layouts=lays))
    return calls


def policy_of(module: types.ModuleType) -> Policy:
    c = getattr(module, "COMPILE", None) or {}
    return Policy(c.get("backend"), c.get("dynamic"), tuple(c.get("mark_dynamic", ())))


def tensor_labels(name: str, spec: tuple) -> list[tuple[str, tuple]]:
    """The tensors an INPUTS entry builds, in build order: (label, shape spec with 'N' for the batch size)."""
    kind = spec[0]
    if kind == "tensor":
        return [(name, spec[1])]
    if kind == "list":
        return [(f"{name}[{i}]", spec[2]) for i in range(spec[1])]
    if kind == "dict":
        return [(f"{name}[{k!r}]", spec[2]) for k in spec[1]]
    if kind == "box":
        return [(f"{name}.t", spec[1])]
    return []


def root(label: str) -> str:
    """The argument a label belongs to: `xs` for `xs[0]`, `obj` for `obj.t`."""
    return label.split("[")[0].split(".")[0]


# -- drawing a plan (the generator) -------------------------------------------------------------------------------
_DTYPE_WEIGHTS = (("float32", 6.0), ("float64", 1.0), ("bfloat16", 1.5), ("float16", 1.5))
_VARY_P = 0.75  # a tensor argument whose layout varies (the generator then never `.view`s it)
_PLAIN_FIRST_P = 0.5  # the first call passes contiguous tensors (a later layout change must recompile)
_ALIAS_P = 0.12  # a tensor argument passed as an alias of an earlier one
_SAME_DTYPE_LAST_P = 0.6  # the last call keeps the first call's dtype (only guards on layout/size can tell)
_TRAIN_LAST_P = 0.5  # training programs make the last call (their compiles are the slow ones)
_DYNAMIC_P, _MARK_P = 0.15, 0.15


class PlanDraw:
    """The draws of one program's plan, from a stream of its own seeded by the program's seed."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(f"framejit.fuzz.plan:{seed}")

    def _weighted(self, pairs: Sequence[tuple[Any, float]]) -> Any:
        items, weights = zip(*pairs)
        return self.r.choices(items, weights=weights)[0]

    def varies(self) -> bool:
        """Whether a top-level tensor argument's layout varies (drawn before the body is generated)."""
        return self.r.random() < _VARY_P

    def draw(
        self,
        inputs: Sequence[tuple[str, tuple]],
        varies: set[str],
        written: set[str],
        train: bool,
        inductor_share: float,
        dynamic: bool = False,
    ) -> tuple[list[dict], dict]:
        """CALLS and COMPILE for a program with these INPUTS entries (name, spec). `varies`: arguments the
        generator knows may be non-contiguous; `written`: arguments it may write in place (never expanded);
        `dynamic`: the policy is dynamic=True whatever is drawn."""
        labels = [
            (label, shape, root(label) in varies or name != label, root(label) not in written)
            for name, spec in inputs
            for label, shape in tensor_labels(name, spec)
        ]
        d0 = self._weighted(_DTYPE_WEIGHTS)
        d3 = d0 if self.r.random() < _SAME_DTYPE_LAST_P else self._weighted([p for p in _DTYPE_WEIGHTS if p[0] != d0])
        calls = [{"n": 3, "dtype": d0, "seed": 1}, {"reuse": True}, {"n": 5, "dtype": d0, "seed": 2, "bump": 1}]
        last = {"n": self.r.choice([3, 4]), "dtype": d3, "seed": 3}
        if not train or self.r.random() < _TRAIN_LAST_P:
            calls.append(last)
        plain_first = self.r.random() < _PLAIN_FIRST_P
        for i, call in enumerate(calls):
            if call.get("reuse") or (i == 0 and plain_first):
                continue
            lays = self._layouts(labels)
            if lays:
                call["layouts"] = lays
        policy: dict[str, Any] = {
            "backend": "inductor" if self.r.random() < inductor_share else ("aot_eager" if train else "eager")
        }
        u = self.r.random()
        if u < _DYNAMIC_P:
            policy["dynamic"] = True
        elif u < _DYNAMIC_P + _MARK_P:
            batch = [label for label, shape, _, _ in labels if shape and shape[0] == "N"] or [
                label for label, *_ in labels
            ]
            if batch:
                policy["mark_dynamic"] = sorted(self.r.sample(batch, self.r.randint(1, min(2, len(batch)))))
        if dynamic:
            policy.pop("mark_dynamic", None)
            policy["dynamic"] = True
        return calls, policy

    def _layouts(self, labels: list[tuple[str, tuple, bool, bool]]) -> dict[str, Any]:
        chosen: dict[str, Any] = {}
        for i, (label, shape, vary, expandable) in enumerate(labels):
            ndim = len(shape)
            options = [(L.CONTIGUOUS, 4.0 if not vary else 3.0), ("offset", 1.0)]
            if vary:
                options += [("transposed", 2.0), ("sliced", 1.5), ("sliced_rows", 1.0), ("channels_last", 4.0)]
                if expandable:
                    options.append(("expanded", 1.5))
            layout = self._weighted([(k, w) for k, w in options if L.applies(k, ndim)])
            sources = self._alias_sources(labels[:i], chosen, shape, vary)
            if sources and self.r.random() < _ALIAS_P:
                layout = self.r.choice(sources)
            if layout != L.CONTIGUOUS:
                chosen[label] = layout
        return chosen

    @staticmethod
    def _alias_sources(earlier: list, chosen: dict, shape: tuple, vary: bool) -> list[tuple[str, str]]:
        """Aliases a tensor of `shape` may be: of an earlier argument that is not itself an alias or expanded
        (an expanded tensor must not be written through an alias either), and, for an argument the generator
        may `.view`, only of one laid out so that the alias is contiguous."""
        out = []
        for label, src_shape, _, _ in earlier:
            lay = chosen.get(label, L.CONTIGUOUS)
            if L.is_alias(lay) or lay == "expanded" or (not vary and lay not in L.VIEWABLE):
                continue
            if tuple(src_shape) == tuple(shape):
                out += [("same", label), ("view", label)]
            elif tuple(src_shape[1:]) == tuple(shape) and len(src_shape) >= 2:
                out.append(("row", label))
        return out


def render(calls: Sequence[dict], policy: dict) -> list[str]:
    """The CALLS and COMPILE assignments of a program module."""
    lines = ["CALLS = ["]
    lines += [f"    {call!r}," for call in calls]
    return lines + ["]", f"COMPILE = {policy!r}"]


# -- editing a plan (the minimiser) -------------------------------------------------------------------------------
def drop_argument(calls: list[dict], policy: dict, name: str) -> tuple[list[dict], dict]:
    """The plan of the program without argument `name`: its layouts, aliases of it, its marks gone."""
    out = []
    for call in calls:
        call = dict(call)
        if "layouts" in call:
            lays = {
                label: lay
                for label, lay in call["layouts"].items()
                if root(label) != name and not (L.is_alias(lay) and root(lay[1]) == name)
            }
            call.pop("layouts")
            if lays:
                call["layouts"] = lays
        out.append(call)
    policy = dict(policy)
    if "mark_dynamic" in policy:
        policy["mark_dynamic"] = [label for label in policy["mark_dynamic"] if root(label) != name]
        if not policy["mark_dynamic"]:
            policy.pop("mark_dynamic")
    return out, policy


def simpler_plans(calls: list[dict], policy: dict) -> Iterator[tuple[list[dict], dict]]:
    """Plans one step plainer: a call dropped from the end, one layout made contiguous (or an alias a tensor of
    its own), a dtype made float32, no mark_dynamic, no dynamic=True."""
    if len(calls) > 1:
        yield calls[:-1], policy
    for i, call in enumerate(calls):
        for label in call.get("layouts", {}):
            lays = {k: v for k, v in call["layouts"].items() if k != label}
            new = {k: v for k, v in call.items() if k != "layouts"}
            if lays:
                new["layouts"] = lays
            yield calls[:i] + [new] + calls[i + 1 :], policy
        if call.get("dtype") not in (None, "float32"):
            yield calls[:i] + [{**call, "dtype": "float32"}] + calls[i + 1 :], policy
    for key in ("mark_dynamic", "dynamic"):
        if key in policy:
            yield calls, {k: v for k, v in policy.items() if k != key}
