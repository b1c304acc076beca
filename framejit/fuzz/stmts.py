"""Simple statements of a generated function body: tensor assignments, in-place updates and item writes,
Python numbers read from tensors, containers and their mutation, prints, calls of the program's helpers,
global writes; and the dispatch that picks a statement kind (compound kinds are in blocks.py)."""

from __future__ import annotations

from typing import Any, Callable

from framejit.fuzz.blocks import CompoundStatements
from framejit.fuzz.exprs import Exprs
from framejit.fuzz.symbols import (
    BoxV,
    FnV,
    Program,
    PyNum,
    Scope,
    T,
    TDict,
    TList,
    Writer,
    broadcast,
    dim_min,
    inplace_ok,
    is_float,
)


class Stmts(CompoundStatements):
    """Picks and writes statements; `budget` is how many more the program may have."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.rng = prog.rng
        self.ex: Exprs = prog.ex
        self.budget = 0

    def body(self, w: Writer, sc: Scope, count: int) -> None:
        """`count` statements (fewer when the budget runs out), at least `pass`."""
        start = len(w.lines)
        for _ in range(count):
            if self.budget <= 0:
                break
            self.one(w, sc)
        if len(w.lines) == start:
            w.line("pass")

    def body_with_budget(self, w: Writer, sc: Scope, count: int) -> None:
        """A body of its own size (a function's), leaving the program's budget as it was."""
        saved, self.budget = self.budget, count
        self.body(w, sc, count)
        self.budget = saved

    def one(self, w: Writer, sc: Scope) -> bool:
        kinds = self._kinds(sc)
        for _ in range(12):
            if self.rng.weighted(kinds)(w, sc):
                self.budget -= 1
                return True
        return False

    def _kinds(self, sc: Scope) -> list[tuple[Callable[[Writer, Scope], bool], float]]:
        nested = sc.depth < 2 and self.budget > 2
        kinds = [
            (self.assign, 9),
            (self.rebind, 3),
            (self.inplace, 3),
            (self.setitem, 2),
            (self.number, 1.5),
            (self.container, 3),
            (self.print, 1.2),
            (self.call, 3),
            (self.global_write, 1.2),
            (self.box_write, 1),
            (self.unpack, 0.6),
            (self.delete, 0.2),
            (self.raise_, 0.25),
        ]
        if nested:
            kinds += [
                (self.if_, 2.5),
                (self.for_, 2),
                (self.while_, 0.8),
                (self.try_, 1.2),
                (self.with_grad, 1.2),
                (self.nested_def, 0.8),
            ]
        if sc.in_loop:
            kinds.append((self.break_continue, 1.2))
        return kinds

    # -- naming --------------------------------------------------------------------------------------------
    def bind(self, w: Writer, sc: Scope, name: str, src: str, info: Any) -> bool:
        """Write `name = src`, declaring the name global/nonlocal where it belongs to a global/outer function."""
        if not sc.bind(name, info):
            return False
        self.declare(sc, name)
        w.line(f"{name} = {src}")
        return True

    def declare(self, sc: Scope, name: str) -> None:
        """Record that this function assigns `name`: a global, a cell of an enclosing function, or a local."""
        if name in self.prog.global_infos:
            sc.fn.global_decls.add(name)
        elif name in sc.fn.enclosing and name not in sc.fn.locals:
            sc.fn.nonlocal_decls.add(name)
        else:
            sc.fn.locals.add(name)

    def writable(self, sc: Scope, name: str) -> bool:
        """Whether this function may assign `name`: its own, a global, or an enclosing function's (nonlocal)."""
        return name in sc.fn.locals or name in self.prog.global_infos or name in sc.fn.enclosing

    # -- statements ----------------------------------------------------------------------------------------
    def assign(self, w: Writer, sc: Scope) -> bool:
        src, t = self.ex.tensor(sc, self.rng.int(1, 3))
        return self.bind(w, sc, self.prog.fresh("t"), src, t)

    def rebind(self, w: Writer, sc: Scope) -> bool:
        """`t = f(t, ...)` or `t += ...` on a name in scope (an augmented tensor assignment works in place)."""
        names = [n for n in sc.tensors(lambda t: t.dtype != "bool") if self.writable(sc, n)]
        if not names:
            return False
        name = self.rng.pick(names)
        t = sc.vars[name]
        o_src, o = self.ex.operand(sc, t)
        if self.rng.chance(0.5) and (isinstance(o, PyNum) or broadcast(o.shape, t.shape) == t.shape):
            ok_type = inplace_ok(t.dtype, o.dtype) if isinstance(o, T) else (is_float(t.dtype) or o.kind == "int")
            if ok_type and sc.bind(name, t):
                self.declare(sc, name)
                w.line(f"{name} {self.rng.pick(['+=', '-=', '*='])} {o_src}")
                return True
        src, new = self.ex.tensor(sc, 1, lambda n: n.shape == t.shape and n.dtype == t.dtype)
        if new.shape != t.shape or new.dtype != t.dtype:
            return False
        return self.bind(w, sc, name, f"{src} + {name}" if t.dtype != "bool" and self.rng.chance(0.5) else src, t)

    def _inplace_target(self, sc: Scope) -> tuple[str, T] | None:
        """A tensor to update in place: a local, an argument, a global, a Box's tensor, a list element."""
        names = sc.tensors(lambda t: t.dtype != "bool")
        cands = [(n, sc.vars[n]) for n in names]
        for n, v in sc.vars.items():
            if isinstance(v, BoxV) and v.elem.dtype != "bool":
                cands.append((f"{n}.t", v.elem))
            elif isinstance(v, TList) and v.min_len and v.elem.dtype != "bool":
                cands.append((f"{n}[0]", v.elem))
        return self.rng.pick(cands) if cands else None

    def inplace(self, w: Writer, sc: Scope) -> bool:
        target = self._inplace_target(sc)
        if target is None:
            return False
        name, t = target
        o_src, o = self.ex.operand(sc, t)
        forms = [
            "{n}.relu_()",
            "{n}.clamp_(-1, 1)",
            "{n}.abs_()",
            "{n}.neg_()",
            "{n}.zero_()",
            "{n}.fill_(1)",
            "{n}.masked_fill_({n} > 0, 0)",
        ]
        if isinstance(o, PyNum) or (broadcast(o.shape, t.shape) == t.shape and inplace_ok(t.dtype, o.dtype)):
            forms += ["{n}.add_({o})", "{n}.mul_({o})", "{n}.sub_({o})", "{n}.add_({o}, alpha=2)"] * 2
            if isinstance(o, T):
                forms.append("{n}.copy_({o})")
        if is_float(t.dtype):
            forms += ["{n}.div_(2)", "{n}.sigmoid_()", "{n}.mul_(0.5)", "{n}.exp_()"]
        if t.ndim >= 1:
            forms += ["{n}[0].mul_(2)", "{n}[-1].add_(1)"]
            if t.contig:
                forms.append("{n}.view(-1).add_(1)")
        if t.ndim == 2:
            forms.append("{n}.t().mul_(0.5)" if is_float(t.dtype) else "{n}.t().mul_(2)")
        w.line(self.rng.pick(forms).format(n=name, o=o_src))
        return True

    def setitem(self, w: Writer, sc: Scope) -> bool:
        target = self._inplace_target(sc)
        if target is None or target[1].ndim == 0:
            return False
        name, t = target
        s = t.shape
        opts = [("[0]", s[1:]), ("[-1]", s[1:]), (f"[{name} > 1]", ())]
        if t.ndim >= 2:
            opts.append(("[:, 0]", (s[0],) + s[2:]))
        if isinstance(s[-1], int) and s[-1] >= 2:
            opts.append(("[..., :2]", s[:-1] + (2,)))
        if dim_min(s[0]) >= 3:
            opts.append(("[torch.tensor([0, 2])]", (2,) + s[1:]))
        index, shape = self.rng.pick(opts)
        o_src, o = self.ex.operand(sc, T(shape, t.dtype))
        if isinstance(o, T) and "[" in index[1:]:  # advanced indexing writes only the same dtype
            o_src = f"{o_src}.to({name}.dtype)"
        w.line(f"{name}{index} = {o_src}")
        return True

    def number(self, w: Writer, sc: Scope) -> bool:
        """A Python number read from a tensor (a graph break: .item(), .tolist(), float(), int())."""
        src, t = self.ex.tensor(sc, 1, lambda t: t.dtype != "bool")
        kind = "float" if is_float(t.dtype) else "int"
        name = self.prog.fresh("v")
        form = self.rng.weighted([("item", 3), ("float", 1), ("tolist", 1.5), ("int", 1)])
        if form == "item":
            return self.bind(w, sc, name, f"{src}.sum().item()", PyNum(kind))
        if form == "float":
            return self.bind(w, sc, name, f"float({src}.amax())", PyNum("float"))
        if form == "int":
            return self.bind(w, sc, name, f"int({src}.argmax())", PyNum("int"))
        if t.ndim != 1:
            src = f"{src}.reshape(-1)" if t.ndim else f"{src}.reshape(1)"
        vals = self.prog.fresh("vals")
        if not self.bind(w, sc, vals, f"{src}.tolist()", None):
            return False
        return self.bind(w, sc, name, f"{vals}[0] + {vals}[-1] if {vals} else 0", PyNum(kind))

    def container(self, w: Writer, sc: Scope) -> bool:
        lists = [n for n in sc.names(lambda v: isinstance(v, TList))]
        dicts = [n for n in sc.names(lambda v: isinstance(v, TDict))]
        pick = self.rng.weighted(
            [
                ("new_list", 1.5 if len(lists) < 3 else 0.2),
                ("new_dict", 1 if len(dicts) < 2 else 0.2),
                ("list", 3 * bool(lists)),
                ("dict", 2.5 * bool(dicts)),
            ]
        )
        if pick == "new_list":
            src, t = self.ex.tensor(sc, 1)
            other, o = self.ex.tensor(sc, 1, lambda o: (o.shape, o.dtype) == (t.shape, t.dtype))
            if (o.shape, o.dtype) != (t.shape, t.dtype):
                other = src
            return self.bind(w, sc, self.prog.fresh("lst"), f"[{src}, {other}]", TList(T(t.shape, t.dtype, False), 2))
        if pick == "new_dict":
            src, t = self.ex.tensor(sc, 1)
            two = t.dtype != "bool"
            return self.bind(
                w,
                sc,
                self.prog.fresh("dd"),
                f"{{'a': {src}, 'b': {src} * 2}}" if two else f"{{'a': {src}}}",
                TDict(T(t.shape, t.dtype, False), frozenset("ab" if two else "a")),
            )
        if pick == "list":
            return self.list_op(w, sc, self.rng.pick(lists))
        return self.dict_op(w, sc, self.rng.pick(dicts))

    def _like(self, sc: Scope, elem: T) -> str | None:
        src, t = self.ex.tensor(sc, 1, lambda o: o.shape == elem.shape and o.dtype == elem.dtype)
        return src if (t.shape, t.dtype) == (elem.shape, elem.dtype) else None

    def _apply(self, w: Writer, sc: Scope, name: str, opts: list[tuple[str, Any, dict]]) -> bool:
        """Write one of `opts` (text, the container's new info, names it binds) and record what it did."""
        text, new, binds = self.rng.pick(opts)
        for line in text.split("\n"):
            w.line(line)
        for bound, info in binds.items():
            sc.fn.locals.add(bound)
            sc.bind(bound, info)
        sc.update_container(name, new)
        return True

    def list_op(self, w: Writer, sc: Scope, name: str) -> bool:
        info: TList = sc.vars[name]
        e = info.elem
        item = self._like(sc, e)
        top = sc.depth == 0 and not sc.in_loop
        grown = (lambda k: TList(e, info.min_len + k)) if top else (lambda k: info)
        u = self.prog.fresh("u")
        opts: list[tuple[str, Any, dict]] = [(f"if {name}:\n    {name}.pop()", TList(e, 0), {})]
        if item:
            opts += [
                (f"{name}.append({item})", grown(1), {}),
                (f"{name}.insert(0, {item})", grown(1), {}),
                (f"{name}.extend([{item}, {item}])", grown(2), {}),
            ]
        if info.min_len:
            shrunk = TList(e, 0 if sc.in_loop else info.min_len - 1)
            opts += [
                (f"{u} = {name}.pop()", shrunk, {u: e}),
                (f"del {name}[0]", shrunk, {}),
                (f"{u} = {name}[-1]", info, {u: e}),
                (f"{u} = torch.stack({name}).sum(0)", info, {u: T(e.shape, e.dtype if e.dtype != "bool" else "i64")}),
            ]
            if e.dtype != "bool":
                opts.append((f"{u} = sum({name}[1:], {name}[0])", info, {u: e}))
            if item:
                opts.append((f"{name}[-1] = {item}", info, {}))
        if e.dtype != "bool":
            opts.append((f"{u} = [p.sum() for p in {name}]", info, {u: TList(T((), e.dtype, False), 0)}))
        return self._apply(w, sc, name, opts)

    def dict_op(self, w: Writer, sc: Scope, name: str) -> bool:
        info: TDict = sc.vars[name]
        e = info.elem
        item = self._like(sc, e)
        top = sc.depth == 0 and not sc.in_loop
        key = self.rng.pick(["a", "b", "c"])
        u = self.prog.fresh("u")
        without = TDict(e, info.keys - {key})
        opts: list[tuple[str, Any, dict]] = [
            (f"{name}.pop({key!r}, None)", without, {}),
            (f"if {key!r} in {name}:\n    del {name}[{key!r}]", without, {}),
        ]
        if item:
            added = TDict(e, info.keys | {key}) if top else info
            opts += [
                (f"{name}[{key!r}] = {item}", added, {}),
                (f"{name}.update({{{key!r}: {item}}})", added, {}),
                (f"{name}.setdefault({key!r}, {item})", added, {}),
                (f"{u} = {name}.get({key!r}, {item})", info, {u: e}),
            ]
        if info.keys:
            k = self.rng.pick(sorted(info.keys))
            opts += [(f"{u} = {name}[{k!r}]", info, {u: e}), (f"del {name}[{k!r}]", TDict(e, info.keys - {k}), {})]
        if e.dtype != "bool":
            opts.append((f"{u} = sum(v.sum() for v in {name}.values())", info, {u: PyNum("float")}))
            opts.append((f"{u} = [k for k, v in sorted({name}.items()) if v.sum() > 0]", info, {}))
        return self._apply(w, sc, name, opts)

    def print(self, w: Writer, sc: Scope) -> bool:
        names = sc.tensors(lambda t: t.dtype != "bool")
        nums = sc.names(lambda v: isinstance(v, PyNum))
        opts = ['print("step")']
        if names:
            n = self.rng.pick(names)
            opts += [
                f"print({n}.shape, {n}.dtype)",
                f'print("sum", round(float({n}.sum()), 3))',
                f'print(f"max={{float({n}.max()):.3f}}")',
                f"print({n}.requires_grad)",
            ]
            if not self.prog.train:
                opts.append(f"print({n}.detach().round(decimals=3))")
        if nums:
            opts.append(f'print("n", {self.rng.pick(nums)})')
        lists = sc.names(lambda v: isinstance(v, (TList, TDict)))
        if lists:
            opts.append(f"print(len({self.rng.pick(lists)}))")
        w.line(self.rng.pick(opts))
        return True

    def call(self, w: Writer, sc: Scope) -> bool:
        """A call of a helper, closure, module or disabled function of the program, or of a local function."""
        got = self.prog.comps.call(sc)
        local_fns = sc.names(lambda v: isinstance(v, FnV))
        if local_fns and (got is None or self.rng.chance(0.5)):
            fn = self.rng.pick(local_fns)
            want = sc.vars[fn].arg

            def fits(t: T) -> bool:  # a tensor not known contiguous may not go where the body may `.view` it
                return (t.shape, t.dtype) == (want.shape, want.dtype) and (t.contig or not want.contig)

            arg, t = self.ex.tensor(sc, 1, fits)
            if not fits(t):
                return False
            got = f"{fn}({arg})", sc.vars[fn].ret
        if got is None:
            return False
        return self.bind(w, sc, self.prog.fresh("r"), *got)

    def global_write(self, w: Writer, sc: Scope) -> bool:
        """Rebinding or mutating a module global (`global g; g = g + ...`, `g_list.append(...)`)."""
        infos = self.prog.global_infos
        if not infos:
            return False
        name = self.rng.pick(sorted(infos))
        info = sc.vars.get(name)  # None: hidden here (a loop walks it)
        if isinstance(info, PyNum):
            sc.fn.global_decls.add(name)
            w.line(f"{name} = {name} + 1" if info.kind == "int" else f"{name} = {name} * 0.5")
            return True
        if isinstance(info, T):
            o_src, o = self.ex.operand(sc, info)
            fits = isinstance(o, PyNum) or (
                broadcast(o.shape, info.shape) == info.shape and inplace_ok(info.dtype, o.dtype)
            )
            if not fits:
                return False
            if self.rng.chance(0.5):
                sc.fn.global_decls.add(name)
                w.line(f"{name} = ({name} + {o_src}).to({name}.dtype)")
            else:
                w.line(f"{name}.add_({o_src})")
            return True
        if isinstance(info, TList):
            return self.list_op(w, sc, name)
        return self.dict_op(w, sc, name) if isinstance(info, TDict) else False

    def box_write(self, w: Writer, sc: Scope) -> bool:
        boxes = sc.names(lambda v: isinstance(v, BoxV))
        if not boxes:
            return False
        b = self.rng.pick(boxes)
        e = sc.vars[b].elem
        item = self._like(sc, e)
        opts = [
            f"{b}.n += 1",
            f"{b}.n = {b}.n * 2",
            f"setattr({b}, 'flag', {b}.n > 2)",
            f"{b}.hits = getattr({b}, 'hits', 0) + 1",
        ]
        if item:
            opts += [f"{b}.t = {item}", f"setattr({b}, 't', {item})"]
        w.line(self.rng.pick(opts))
        return True

    def unpack(self, w: Writer, sc: Scope) -> bool:
        lists = sc.names(lambda v: isinstance(v, TList) and v.min_len >= 2)
        p, q = self.prog.fresh("p"), self.prog.fresh("p")
        if lists and self.rng.chance(0.5):
            lst = self.rng.pick(lists)
            info = sc.vars[lst]
            rest = self.prog.fresh("rest")
            sc.fn.locals.update([p, rest])
            sc.bind(p, info.elem)
            sc.bind(rest, TList(info.elem, info.min_len - 1))
            w.line(f"{p}, *{rest} = {lst}")
            return True
        a_src, a = self.ex.tensor(sc, 1)
        b_src, b = self.ex.tensor(sc, 1)
        sc.fn.locals.update([p, q])
        sc.bind(p, a)
        sc.bind(q, b)
        w.line(f"{p}, {q} = {a_src}, {b_src}" if self.rng.chance(0.5) else f"({p}, {q}) = ({a_src}, {b_src})")
        return True

    def delete(self, w: Writer, sc: Scope) -> bool:
        names = [n for n in sc.tensors() if n in sc.fn.locals and n not in sc.fn.params]
        if len(names) < 3:
            return False
        name = self.rng.pick(names)
        sc.forget(name)
        w.line(f"del {name}")
        return True
