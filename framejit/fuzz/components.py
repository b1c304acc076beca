"""The module-level pieces of a generated program besides the entry function: globals, helper functions
(generated bodies, *args/**kwargs, closure factories), functions under `framejit.disable`, and small
nn.Module classes with their instances; and the calls of them that the program's statements make."""

from __future__ import annotations

import dataclasses
from typing import Callable

from framejit.fuzz.symbols import (
    FnCtx,
    Program,
    PyNum,
    Scope,
    T,
    TDict,
    TList,
    Writer,
    broadcast,
    dim_min,
    is_float,
    promote,
)


@dataclasses.dataclass
class Callee:
    """Something the program can call: `render(sc)` gives the call's source and result, or None when nothing
    in scope fits its parameters."""

    name: str
    render: Callable[[Scope], "tuple[str, T] | None"]


_LAYERS = {  # kind -> (constructor, weight expression, input reshape, output size for feature size f)
    "linear": ("torch.nn.Linear({f}, {h})", "self.layer.weight", "{a}", lambda f, h: h),
    "mlp": (
        "torch.nn.Sequential(torch.nn.Linear({f}, {h}), torch.nn.ReLU(), torch.nn.Linear({h}, {f}))",
        "self.layer[0].weight",
        "{a}",
        lambda f, h: f,
    ),
    "conv1d": (
        "torch.nn.Conv1d(2, 3, 3, padding=1)",
        "self.layer.weight",
        "{a}.reshape({a}.shape[0], 2, {f2})",
        lambda f, h: 3 * (f // 2),
    ),
    "conv2d": (
        "torch.nn.Conv2d(2, 2, 3, padding=1)",
        "self.layer.weight",
        "{a}.reshape({a}.shape[0], 2, 2, {f4})",
        lambda f, h: f,
    ),
    "conv_img": ("torch.nn.Conv2d(2, 2, 3, padding=1)", "self.layer.weight", "{a}", lambda f, h: f),  # (N, 2, H, f)
    "batchnorm": ("torch.nn.BatchNorm1d({f})", "self.layer.weight", "{a}", lambda f, h: f),
    "layernorm": ("torch.nn.LayerNorm({f})", "self.layer.weight", "{a}", lambda f, h: f),
}


class Components:
    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.rng = prog.rng
        self.ex = prog.ex
        self.callees: list[Callee] = []
        self.text: list[str] = []  # module-level source, in order
        self.uses_framejit = False

    def call(self, sc: Scope) -> tuple[str, T] | None:
        for _ in range(4):
            if not self.callees:
                return None
            got = self.rng.pick(self.callees).render(sc)
            if got is not None:
                return got
        return None

    def _arg(self, sc: Scope, pred: Callable[[T], bool]) -> tuple[str, T] | None:
        src, t = self.ex.tensor(sc, 1, pred)
        return (src, t) if pred(t) else None

    # -- globals -------------------------------------------------------------------------------------------
    def add_globals(self) -> None:
        f = self.prog.feat
        pool = [
            ("g_count", "0", PyNum("int")),
            ("g_scale", "1.5", PyNum("float")),
            ("g_t", f"torch.randn({f})", T((f,), "f32")),
            ("g_w", f"torch.randn({f}, {f})", T((f, f), "f32")),
            ("g_log", "[]", TList(T((f,), "F", False), 0)),
            ("g_d", "{}", TDict(T((f,), "F", False))),
            ("g_flag", "True", PyNum("int")),
        ]
        chosen = [g for g in pool if self.rng.chance(0.3)]
        if not chosen:
            return
        self.text.append(f"torch.manual_seed({self.rng.int(0, 999)})")
        for name, src, info in chosen:
            self.text.append(f"{name} = {src}")
            self.prog.global_infos[name] = info
        self.text.append("")

    # -- helper functions ----------------------------------------------------------------------------------
    def add_helper(self) -> None:
        """A function with a generated body: tensor parameters, a defaulted float, maybe keyword-only."""
        name = self.prog.fresh("helper")
        p0 = self.rng.pick(self.prog.arg_tensor_types())
        p1 = self.rng.pick(self.prog.arg_tensor_types()) if self.rng.chance(0.6) else None
        params = ["a"] + (["b"] if p1 else []) + ["scale"]
        fn = FnCtx(name, params)
        sc = self.prog.module_scope(fn)
        sc.vars["a"] = p0
        if p1:
            sc.vars["b"] = p1
        sc.vars["scale"] = PyNum("float")
        w = Writer(1)
        self.prog.stmts.body_with_budget(w, sc, self.rng.int(1, 4))
        ret, rt = self.ex.tensor(sc, 1)
        w.line(f"return {ret} * scale" if rt.dtype != "bool" else f"return {ret}")
        rt = T(rt.shape, rt.dtype if rt.dtype != "bool" else "bool")
        if rt.dtype != "bool" and not is_float(rt.dtype):
            rt = T(rt.shape, "f32")
        kw = ", *, scale=2.0" if self.rng.chance(0.3) else ", scale=2.0"
        self._emit_def(f"def {name}(a{', b' if p1 else ''}{kw}):", fn, w)

        def render(sc: Scope) -> tuple[str, T] | None:
            # a tensor not known contiguous may not go where the body may `.view` it
            a = self._arg(sc, lambda t: (t.shape, t.dtype) == (p0.shape, p0.dtype) and (t.contig or not p0.contig))
            b = (
                self._arg(sc, lambda t: (t.shape, t.dtype) == (p1.shape, p1.dtype) and (t.contig or not p1.contig))
                if p1
                else ("", None)
            )
            if a is None or b is None:
                return None
            scale, _ = self.ex.number(sc, "float")
            forms = [
                f"{name}({a[0]}{', ' + b[0] if p1 else ''})",
                f"{name}({a[0]}{', ' + b[0] if p1 else ''}, scale={scale})",
            ]
            if p1:
                forms += [
                    f"{name}({a[0]}, b={b[0]})",
                    f"{name}(*[{a[0]}, {b[0]}])",
                    f"{name}({a[0]}, **{{'b': {b[0]}, 'scale': {scale}}})",
                ]
            return self.rng.pick(forms), rt

        self.callees.append(Callee(name, render))

    def _emit_def(self, header: str, fn: FnCtx, body: Writer, decorator: str | None = None) -> None:
        if decorator:
            self.text.append(decorator)
        self.text.append(header)
        self.text.extend("    " + line for line in fn.header())
        self.text.extend(body.lines)
        self.text.append("")

    def add_varargs(self) -> None:
        name = self.prog.fresh("combine")
        self.text += [
            f"def {name}(*ts, scale=1.0, **kw):",
            "    out = ts[0]",
            "    for t in ts[1:]:",
            "        out = out + t",
            "    if kw.get('neg', False):",
            "        out = -out",
            "    if 'bias' in kw:",
            "        out = out + kw['bias']",
            "    return out * scale",
            "",
        ]

        def render(sc: Scope) -> tuple[str, T] | None:
            a = self._arg(sc, lambda t: is_float(t.dtype))
            if a is None:
                return None
            rest = [
                self._arg(sc, lambda t: broadcast(t.shape, a[1].shape) == a[1].shape and t.dtype != "bool")
                for _ in range(self.rng.int(0, 2))
            ]
            rest = [r for r in rest if r is not None]
            dtype = a[1].dtype
            for r in rest:
                dtype = promote(dtype, r[1].dtype)
            args = ", ".join([a[0]] + [r[0] for r in rest])
            like = T(a[1].shape, a[1].dtype, False)
            lists = sc.names(lambda v: isinstance(v, TList) and v.min_len >= 1 and v.elem == like)
            extra = self.rng.pick(
                ["", ", neg=True", f", scale={self.ex.number(sc, 'float')[0]}", ", bias=1.0", ", **{'neg': True}"]
            )
            if lists and self.rng.chance(0.4):
                return f"{name}(*{self.rng.pick(lists)}{extra})", T(a[1].shape, a[1].dtype)
            return f"{name}({args}{extra})", T(a[1].shape, dtype)

        self.callees.append(Callee(name, render))

    def add_factory(self) -> None:
        """A function returning a closure: over a number, over a tensor global, or over a `nonlocal` counter."""
        name = self.prog.fresh("make")
        kind = self.rng.pick(["number", "counter"] + (["tensor"] if "g_t" in self.prog.global_infos else []))
        if kind == "number":
            self.text += [f"def {name}(c):", "    def fn(t):", "        return t * c + 1", "    return fn", ""]
        elif kind == "counter":
            self.text += [
                f"def {name}():",
                "    n = 0",
                "    def fn(t):",
                "        nonlocal n",
                "        n += 1",
                "        return t * n",
                "    return fn",
                "",
            ]
        else:
            self.text += [
                f"def {name}(c):",
                "    w = g_t * c",
                "    def fn(t):",
                "        return (t + w).relu()",
                "    return fn",
                "",
            ]
        feat = self.prog.feat

        def render(sc: Scope) -> tuple[str, T] | None:
            pred = (
                (lambda t: is_float(t.dtype) and t.ndim >= 1 and t.shape[-1] == feat)
                if kind == "tensor"
                else (lambda t: is_float(t.dtype))
            )
            a = self._arg(sc, pred)
            if a is None:
                return None
            c = "" if kind == "counter" else self.ex.number(sc, "float")[0]
            return f"{name}({c})({a[0]})", T(a[1].shape, promote(a[1].dtype, "f32") if kind == "tensor" else a[1].dtype)

        self.callees.append(Callee(name, render))

    def add_disabled(self) -> None:
        """A function framejit must not capture (`@framejit.disable`): a graph break that runs it as Python."""
        self.uses_framejit = True
        name = self.prog.fresh("opaque")
        body = self.rng.pick(
            [
                ["    return t * 2 + 1"],
                ["    print('opaque', tuple(t.shape))", "    return t.relu()"],
                ["    out = t.clone()", "    out.add_(0.5)", "    return out"],
            ]
        )
        if "g_count" in self.prog.global_infos and self.rng.chance(0.5):
            body = ["    global g_count", "    g_count += 1"] + body
        self.text += ["@framejit.disable", f"def {name}(t):"] + body + [""]

        def render(sc: Scope) -> tuple[str, T] | None:
            a = self._arg(sc, lambda t: is_float(t.dtype))
            return None if a is None else (f"{name}({a[0]})", T(a[1].shape, a[1].dtype))

        self.callees.append(Callee(name, render))

    # -- modules -------------------------------------------------------------------------------------------
    def add_module(self) -> None:
        f = self.prog.feat
        kinds = (
            ["linear", "mlp", "batchnorm", "layernorm"]
            + (["conv1d"] if f % 2 == 0 else [])
            + (["conv2d"] if f % 4 == 0 else [])
        )
        if any(t.ndim == 4 for t in self.prog.arg_tensor_types()):  # an image argument: convolve it as it is laid out
            kinds += ["conv_img"] * 2
        kind = self.rng.pick(kinds)
        ctor, weight, reshape, out_size = _LAYERS[kind]
        h = self.rng.pick([3, 5])
        cls, inst = self.prog.fresh("Mod"), self.prog.fresh("m_")
        cast = self.rng.chance(0.85)
        two_d = kind in ("conv1d", "conv2d", "batchnorm")
        out = out_size(f, h)
        lines = [
            f"class {cls}(torch.nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            f"        self.layer = {ctor.format(f=f, h=h)}",
            "        self.calls = 0",
        ]
        fwd = ["    def forward(self, a):", "        self.calls += 1"]
        if cast:
            fwd.append(f"        a = a.to({weight}.dtype)")
        fwd.append(f"        h = self.layer({reshape.format(a='a', f2=f // 2, f4=f // 4)})")
        if kind in ("conv1d", "conv2d"):
            fwd.append("        h = h.flatten(1)")
        extras = [
            ("        if self.calls % 2 == 0:\n            h = h * 2", None),
            ("        self.last = h.detach()", None),
            ("        self.total += h.detach().sum()", "        self.register_buffer('total', torch.zeros(()))"),
            ("        h = h * self.gain", f"        self.gain = torch.linspace(0.5, 1.5, {out})"),
            ("        self.scale = self.scale * 0.5\n        h = h * self.scale", "        self.scale = 1.0"),
        ]
        for body, init in extras:
            if self.rng.chance(0.3):
                fwd += body.split("\n")
                if init:
                    lines.append(init)
        fwd.append(self.rng.pick(["        return h", "        return h.relu()", "        return torch.tanh(h)"]))
        self.text += lines + fwd + ["", f"torch.manual_seed({self.rng.int(0, 999)})", f"{inst} = {cls}()"]
        if kind == "batchnorm" and self.rng.chance(0.5):
            self.text.append(f"{inst}.eval()")
        self.text.append("")

        def render(sc: Scope) -> tuple[str, T] | None:
            a = self._arg(
                sc,
                lambda t: (
                    is_float(t.dtype)
                    and t.ndim >= 1
                    and t.shape[-1] == f
                    and (not two_d or (t.ndim == 2 and dim_min(t.shape[0]) >= 2))
                    and (kind != "conv_img" or (t.ndim == 4 and t.shape[1] == 2))
                ),
            )
            if a is None:
                return None
            shape = a[1].shape[:-1] + (out,)
            dtype = "f32" if cast else promote(a[1].dtype, "f32")
            out_t = T(shape, dtype, a[1].contig)  # a layer may keep its input's layout (a convolution does)
            if kind == "batchnorm" and self.rng.chance(0.1):
                return f"{inst}.train({inst}.calls % 2 == 0)({a[0]})", out_t
            return f"{inst}({a[0]})", out_t

        self.callees.append(Callee(inst, render))
