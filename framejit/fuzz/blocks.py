"""Compound statements of a generated function body: if/else, for and while loops with break/continue,
try/except/else/finally and raise, grad-mode `with` blocks, and functions defined in the body (closures over
its locals, `nonlocal` counters, lambdas)."""

from __future__ import annotations

from typing import Any

from framejit.fuzz.symbols import FnCtx, FnV, Program, PyNum, Rng, Scope, T, TDict, TList, Writer, is_float

_EXC = {"ValueError": "ValueError(f'bad value {}')", "KeyError": "KeyError('{}')", "IndexError": "IndexError('{}')"}


class CompoundStatements:
    """The compound statement kinds of stmts.Stmts, which provides `body`, `body_with_budget` and `bind`."""

    prog: Program
    rng: Rng
    ex: Any  # exprs.Exprs

    def _size(self) -> int:
        return self.rng.int(1, 3)

    def if_(self, w: Writer, sc: Scope) -> bool:
        with w.block(f"if {self.ex.condition(sc)}:"):
            self.body(w, sc.child(), self._size())
        if self.rng.chance(0.25):
            with w.block(f"elif {self.ex.condition(sc)}:"):
                self.body(w, sc.child(), self._size())
        if self.rng.chance(0.45):
            with w.block("else:"):
                self.body(w, sc.child(), self._size())
        return True

    def for_(self, w: Writer, sc: Scope) -> bool:
        body = sc.child(loop=True)
        lists = sc.names(lambda v: isinstance(v, TList))
        dicts = sc.names(lambda v: isinstance(v, TDict))
        tens = sc.tensors(lambda t: t.ndim >= 1)
        kinds = [
            ("range", 3),
            ("list", 2 * bool(lists)),
            ("items", 1.5 * bool(dicts)),
            ("tuple", 1),
            ("enumerate", 1 * bool(lists)),
            ("rows", 0.7 * bool(tens)),
        ]
        kind = self.rng.weighted(kinds)
        i, t = self.prog.fresh("i"), self.prog.fresh("e")
        if kind == "range":
            bound, _ = self.ex.number(sc, "int") if self.rng.chance(0.5) else (str(self.rng.int(1, 4)), None)
            header = f"for {i} in range({bound}):" if bound.isdigit() else f"for {i} in range(min({bound}, 4)):"
            binds = {i: PyNum("int")}
        elif kind in ("list", "enumerate"):
            lst = self.rng.pick(lists)
            body.vars[lst] = None  # the body must not grow the list it walks
            if lst in self.prog.global_infos or sc.names(lambda v: isinstance(v, FnV)) or self.prog.comps.callees:
                walked = f"list({lst})"  # a function called in the body might grow it: walk a copy
            else:
                walked = lst
            if kind == "list":
                header, binds = f"for {t} in {walked}:", {t: sc.vars[lst].elem}
            else:
                header, binds = f"for {i}, {t} in enumerate({walked}):", {i: PyNum("int"), t: sc.vars[lst].elem}
        elif kind == "items":
            d = self.rng.pick(dicts)
            header, binds = f"for {i}, {t} in {d}.items():", {t: sc.vars[d].elem}
            body.vars[d] = None  # changing a dict's size while iterating raises
        elif kind == "tuple":
            a_src, a = self.ex.tensor(sc, 1)
            b_src, b = self.ex.tensor(sc, 1, lambda o: (o.shape, o.dtype) == (a.shape, a.dtype))
            if (b.shape, b.dtype) != (a.shape, a.dtype):
                b_src = a_src
            header, binds = f"for {t} in ({a_src}, {b_src}):", {t: T(a.shape, a.dtype, a.contig)}
        else:
            name = self.rng.pick(tens)
            header, binds = f"for {t} in {name}:", {t: T(sc.vars[name].shape[1:], sc.vars[name].dtype, False)}
        for name, info in binds.items():
            sc.fn.locals.add(name)
            body.vars[name] = info
        with w.block(header):
            self.body(w, body, self._size() + 1)
        if self.rng.chance(0.15):
            with w.block("else:"):
                self.body(w, sc.child(), 1)
        return True

    def while_(self, w: Writer, sc: Scope) -> bool:
        j = self.prog.fresh("j")
        if not self.bind(w, sc, j, "0", PyNum("int")):
            return False
        body = sc.child(loop=True)
        body.vars.pop(j)  # the counter is stepped first, so `continue` cannot loop forever
        with w.block(f"while {j} < {self.rng.int(1, 4)}:"):
            w.line(f"{j} += 1")
            self.body(w, body, self._size())
        return True

    def break_continue(self, w: Writer, sc: Scope) -> bool:
        word = self.rng.pick(["break", "continue"])
        if self.rng.chance(0.2):
            w.line(word)
            return True
        with w.block(f"if {self.ex.condition(sc)}:"):
            w.line(word)
        return True

    def raise_(self, w: Writer, sc: Scope) -> bool:
        """A raise under a condition; at the top of the program it usually escapes (the program raises)."""
        if sc.depth == 0 and self.rng.chance(0.6):
            return False
        kind = self.rng.pick(sorted(_EXC))
        with w.block(f"if {self.ex.condition(sc)}:"):
            w.line("raise " + _EXC[kind].format(self.rng.int(0, 9)))
        return True

    def _raising(self, w: Writer, sc: Scope, caught: list[str]) -> None:
        """A statement in a try body that may raise: an explicit raise, a missing key, an index past the end;
        mostly of a kind the handlers catch, sometimes not (the exception escapes the program)."""
        kinds = [k for k in sorted(_EXC) if k in caught or "Exception" in caught]
        kind = self.rng.pick(kinds) if kinds and self.rng.chance(0.85) else self.rng.pick(sorted(_EXC))
        lists = sc.names(lambda v: isinstance(v, TList))
        dicts = sc.names(lambda v: isinstance(v, TDict))
        if kind == "IndexError" and lists and self.rng.chance(0.5):
            w.line(f"_ = {self.rng.pick(lists)}[{self.rng.int(1, 4)}]")
        elif kind == "KeyError" and dicts and self.rng.chance(0.5):
            w.line(f"_ = {self.rng.pick(dicts)}['c']")
        else:
            with w.block(f"if {self.ex.condition(sc)}:"):
                w.line("raise " + _EXC[kind].format(self.rng.int(0, 9)))

    def try_(self, w: Writer, sc: Scope) -> bool:
        handlers = self.rng.pick(
            [["ValueError"], ["KeyError", "IndexError"], ["Exception"], ["ValueError", "KeyError"], []]
        )
        with w.block("try:"):
            inner = sc.child()
            self.body(w, inner, self._size())
            if handlers or self.rng.chance(0.3):
                self._raising(w, inner, handlers)
            if self.rng.chance(0.4):
                self.body(w, inner, 1)
        if handlers:
            caught = handlers[0] if len(handlers) == 1 else "(" + ", ".join(handlers) + ")"
            e = self.prog.fresh("err")
            with w.block(f"except {caught} as {e}:"):
                if self.rng.chance(0.6):
                    w.line(f'print("caught", type({e}).__name__, {e})')
                self.body(w, sc.child(), self._size() - 1 or 1)
                if self.rng.chance(0.1):
                    w.line("raise")
            if self.rng.chance(0.2):
                with w.block("else:"):
                    self.body(w, sc.child(), 1)
        if not handlers or self.rng.chance(0.35):
            with w.block("finally:"):
                self.body(w, sc.child(), self._size())
        return True

    def with_grad(self, w: Writer, sc: Scope) -> bool:
        ctx = self.rng.weighted(
            [
                ("torch.no_grad()", 3),
                ("torch.enable_grad()", 1.5),
                ("torch.set_grad_enabled(False)", 2),
                ("torch.set_grad_enabled(True)", 0.5),
                (f"torch.set_grad_enabled(bool({self.ex.condition(sc)}))", 0.5),
            ]
        )
        inner = sc.child()
        with w.block(f"with {ctx}:"):
            if sc.depth < 2 and self.rng.chance(0.25):
                self.with_grad(w, inner)
            self.body(w, inner, self._size())
        return True

    def nested_def(self, w: Writer, sc: Scope) -> bool:
        """A function defined in the body: a lambda, a closure over tensors in scope, or one that bumps a
        `nonlocal` counter; bound in scope as a callable for later statements."""
        name = self.prog.fresh("inner")
        src, arg = self.ex.tensor(sc, 1, lambda t: is_float(t.dtype))
        if not is_float(arg.dtype):
            return False
        kind = self.rng.weighted([("lambda", 1), ("closure", 2), ("counter", 1)])
        if kind == "lambda":
            scale, _ = self.ex.number(sc, "float")
            like = T(arg.shape, arg.dtype, False)  # the body never `.view`s its argument
            return self.bind(w, sc, name, f"lambda a: (a * {scale}).relu() + 1", FnV(like, like))
        if kind == "counter":
            count = self.prog.fresh("count")
            if not self.bind(w, sc, count, "0", PyNum("int")):
                return False
        fn = FnCtx(name, ["a"], sc.fn)
        inner = sc.function(fn)
        inner.vars["a"] = T(arg.shape, arg.dtype, arg.contig)
        body = Writer(w.level + 1)
        if kind == "counter":
            fn.nonlocal_decls.add(count)
            body.line(f"{count} += 1")
        self.body_with_budget(body, inner, self.rng.int(1, 2))
        ret, rt = self.ex.tensor(inner, 1, lambda t: t.shape == arg.shape and is_float(t.dtype))
        if rt.shape != arg.shape or not is_float(rt.dtype):
            ret, rt = "a", inner.vars["a"]
        body.line(f"return {ret}")
        sc.fn.locals.add(name)
        w.line(f"def {name}(a):")
        for line in fn.header():
            w.line("    " + line)
        w.lines.extend(body.lines)
        sc.bind(name, FnV(T(arg.shape, arg.dtype, arg.contig), T(rt.shape, rt.dtype)))
        return True
