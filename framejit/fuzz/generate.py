"""Random programs as Python source, deterministic given a seed: a module with globals, helpers, small
nn.Modules and an entry function `program(...)`, plus `INPUTS` (how the runner builds the arguments), `TRAIN`
(whether the runner also checks gradients), `CALLS` (batch size, dtype, values and argument layouts per call)
and `COMPILE` (backend and shape policy); plan.py draws the last two."""

from __future__ import annotations

import itertools
from typing import Any

from framejit.fuzz.components import Components
from framejit.fuzz.exprs import Exprs
from framejit.fuzz.plan import PlanDraw, render
from framejit.fuzz.stmts import Stmts
from framejit.fuzz.symbols import N, BoxV, FnCtx, PyNum, Rng, Scope, T, TDict, TList, Writer
from framejit.fuzz.writes import written_arguments

BOX_CLASS = ["class Box:", "    def __init__(self, t, n):", "        self.t = t", "        self.n = n", ""]


class ProgramGen:
    """One program: its random draws, feature size, names, globals, module-level components and statements."""

    def __init__(self, seed: int, inductor_share: float = 0.0, dynamic: bool = False) -> None:
        self.seed = seed
        self.rng = Rng(seed)
        self.plan = PlanDraw(seed)
        self.inductor_share = inductor_share
        self.dynamic = dynamic
        self.varies: set[str] = set()  # tensor arguments whose layout may change between calls
        self.feat = self.rng.pick([4, 6, 8])
        self.train = self.rng.chance(0.25)
        self.ex = Exprs(self.rng, self.feat)
        self.global_infos: dict[str, Any] = {}
        self._counter = itertools.count()
        self.comps = Components(self)
        self.stmts = Stmts(self)
        self.params: list[tuple[str, Any, tuple]] = []  # name, what the generator knows, INPUTS entry

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}"

    def arg_tensor_types(self) -> list[T]:
        return [info for _, info, _ in self.params if isinstance(info, T)] or [T((N, self.feat))]

    def module_scope(self, fn: FnCtx) -> Scope:
        sc = Scope(fn)
        sc.vars.update(self.global_infos)
        return sc

    def _choose_params(self) -> None:
        f = self.feat
        row, vec = ("N", f), (f,)
        for name in ["x", "y", "z"][: self.rng.weighted([(1, 2), (2, 3), (3, 1)])]:
            spec = vec if name != "x" and self.rng.chance(0.3) else row
            self.params.append((name, self._arg_tensor(name, (N, f) if spec == row else (f,)), ("tensor", spec)))
        if self.rng.chance(0.3):  # an image batch: channels_last is one of its layouts
            self.params.append(("img", self._arg_tensor("img", (N, 2, 3, f)), ("tensor", ("N", 2, 3, f))))
        if self.rng.chance(0.5):
            self.params.append(("k", PyNum("int"), ("int", self.rng.int(1, 3))))
        if self.rng.chance(0.3):
            self.params.append(("s", PyNum("float"), ("float", self.rng.pick([0.5, -1.5, 2.0]))))
        if self.rng.chance(0.25):
            self.params.append(("xs", TList(T((N, f), "F", False), 2), ("list", 2, row)))
        if self.rng.chance(0.2):
            self.params.append(("d", TDict(T((N, f), "F", False), frozenset("ab")), ("dict", ("a", "b"), row)))
        if self.rng.chance(0.2):
            self.params.append(("obj", BoxV(T((N, f), "F", False)), ("box", row, 1)))

    def _arg_tensor(self, name: str, shape: tuple) -> T:
        """A tensor argument; one whose layout varies is not known contiguous (never `.view`ed)."""
        if self.plan.varies():
            self.varies.add(name)
            return T(shape, "F", False)
        return T(shape)

    def _components(self) -> None:
        self.comps.add_globals()
        adders = [
            (self.comps.add_helper, 0.5),
            (self.comps.add_helper, 0.25),
            (self.comps.add_varargs, 0.2),
            (self.comps.add_factory, 0.25),
            (self.comps.add_disabled, 0.25),
            (self.comps.add_module, 0.35),
            (self.comps.add_module, 0.15),
        ]
        for add, p in adders:
            if self.rng.chance(p):
                add()

    def _program(self) -> list[str]:
        names = [n for n, _, _ in self.params]
        fn = FnCtx("program", names, is_program=True)
        sc = self.module_scope(fn)
        for name, info, _ in self.params:
            sc.vars[name] = info
        w = Writer(1)
        self.stmts.budget = self.rng.int(4, 26)
        while self.stmts.budget > 0:
            if not self.stmts.one(w, sc):
                break
        w.line(self._return(sc))
        head = [f"def program({', '.join(names)}):"] + ["    " + line for line in fn.header()]
        return head + w.lines

    def _return(self, sc: Scope) -> str:
        tens = sc.tensors()
        recent = [n for n in tens if n not in sc.fn.params] or tens
        picks = []
        for _ in range(self.rng.weighted([(1, 3), (2, 3), (3, 1)])):
            pool = recent if self.rng.chance(0.75) else tens
            if pool:
                picks.append(self.rng.pick(pool))
        others = sc.names(lambda v: isinstance(v, (PyNum, TList, TDict, BoxV)))
        if others and self.rng.chance(0.3):
            picks.append(self.rng.pick(others))
        picks = list(dict.fromkeys(picks)) or ["None"]
        form = self.rng.weighted([("tuple", 4), ("dict", 1), ("list", 1)])
        if len(picks) == 1:
            return f"return {picks[0]}"
        if form == "dict":
            return "return {" + ", ".join(f"{p!r}: {p}" for p in picks) + "}"
        return f"return [{', '.join(picks)}]" if form == "list" else f"return {', '.join(picks)}"

    def generate(self) -> str:
        self._choose_params()
        self._components()
        program = self._program()
        head = ["import torch"] + (["import framejit"] if self.comps.uses_framejit else []) + [""]
        inputs = "INPUTS = [" + ", ".join(repr(spec) for _, _, spec in self.params) + "]"
        head += [inputs, f"TRAIN = {self.train}"]
        body = (
            ([""] + BOX_CLASS if any(spec[0] == "box" for _, _, spec in self.params) else [""])
            + self.comps.text
            + program
        )
        written = written_arguments("\n".join(head + body) + "\n")
        calls, policy = self.plan.draw(
            [(name, spec) for name, _, spec in self.params],
            self.varies,
            written,
            self.train,
            self.inductor_share,
            self.dynamic,
        )
        return "\n".join(head + render(calls, policy) + body) + "\n"


def generate(seed: int, inductor_share: float = 0.0, dynamic: bool = False) -> str:
    """The source of program number `seed`; about `inductor_share` of programs compile with inductor, and all
    with dynamic=True if `dynamic` (the draws are made whatever these say, so the rest of the program does not
    depend on them)."""
    return ProgramGen(seed, inductor_share, dynamic).generate()
