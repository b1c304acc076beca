"""Random tensor, Python-number and condition expressions that are valid for every call the runner makes:
each builder returns source text and what it evaluates to (shape, dtype), or None when it does not apply."""

from __future__ import annotations

from typing import Any, Callable

from framejit.fuzz.symbols import (
    DYN,
    N_MIN,
    BoxV,
    PyNum,
    Rng,
    Scope,
    Sym,
    T,
    TDict,
    TList,
    broadcast,
    dim_add,
    dim_min,
    is_float,
    numel,
    promote,
    with_scalar,
)

Built = "tuple[str, T] | None"

_FLOAT_UNARY = [
    "torch.sin({})",
    "{}.cos()",
    "torch.tanh({})",
    "{}.sigmoid()",
    "torch.exp({}.clamp(max=3))",
    "torch.log1p({}.abs())",
    "{}.abs().sqrt()",
    "torch.nn.functional.gelu({})",
    "{}.exp().log()",
]
_SAME_UNARY = [
    "{}.relu()",
    "{}.abs()",
    "(-{})",
    "{}.neg()",
    "torch.clamp({}, -1, 1)",
    "{}.clamp(min=0)",
    "({} * 2)",
    "({} + 1)",
    "({} ** 2)",
    "torch.nn.functional.relu({})",
    "{}.clone()",
    "{}.detach()",
    "{}.contiguous()",
    "torch.square({})",
]
_SCALAR_FLOAT = ["({} * 0.5)", "({} - 0.25)", "({} / 3)", "({} + 1.5)"]
_COMPARE = ["({} > 0)", "({} <= 0.5)", "({} < 0)", "({} >= -0.5)"]
_BINARY = [
    "({} + {})",
    "({} - {})",
    "({} * {})",
    "torch.maximum({}, {})",
    "torch.minimum({}, {})",
    "torch.add({}, {}, alpha=2)",
    "torch.mul({}, {})",
    "{}.sub({})",
]


class Exprs:
    """Expression builders over one program's shapes: the feature size `feat` is fixed, the batch size N is
    not."""

    def __init__(self, rng: Rng, feat: int) -> None:
        self.rng = rng
        self.feat = feat
        self.builders: list[tuple[Callable[[Scope, int], Any], float]] = [
            (self.var, 6),
            (self.unary, 4),
            (self.binary, 4),
            (self.reduce, 3),
            (self.view, 2.5),
            (self.index, 2),
            (self.matmul, 1.2),
            (self.cat, 1),
            (self.dtype_change, 1),
            (self.where, 1),
            (self.create, 0.8),
            (self.misc, 1.5),
            (self.layout_read, 0.8),
        ]

    # -- entry points ---------------------------------------------------------------------------------------
    def tensor(self, sc: Scope, depth: int = 2, want: Callable[[T], bool] | None = None) -> tuple[str, T]:
        """Any tensor expression (satisfying `want` if given; falls back to a fresh constant)."""
        for _ in range(30):
            builder = self.rng.weighted(self.builders) if depth > 0 else self.var
            got = builder(sc, depth)
            if got is not None and DYN not in got[1].shape and (want is None or want(got[1])):
                return got
        return self.constant_like(want)

    def constant_like(self, want: Callable[[T], bool] | None) -> tuple[str, T]:
        for src, t in [
            (f"torch.ones({self.feat})", T((self.feat,), "f32")),
            ("torch.tensor(0.5)", T((), "f32")),
            (f"torch.arange({self.feat})", T((self.feat,), "i64")),
        ]:
            if want is None or want(t):
                return src, t
        return "torch.tensor(1.0)", T((), "f32")

    def operand(self, sc: Scope, target: T, depth: int = 1) -> tuple[str, T | PyNum]:
        """A tensor or Python number that broadcasts to `target` and may be written into it in place."""
        if self.rng.chance(0.25):
            return self.number(sc, "int" if not is_float(target.dtype) else "float")
        return self.tensor(
            sc,
            depth,
            lambda t: (
                broadcast(t.shape, target.shape) == target.shape
                and (is_float(target.dtype) or not is_float(t.dtype))
                and t.dtype != "bool"
            ),
        )

    def float_tensor(self, sc: Scope, depth: int = 2, ndim_min: int = 0) -> tuple[str, T]:
        return self.tensor(sc, depth, lambda t: is_float(t.dtype) and t.ndim >= ndim_min)

    # -- builders -------------------------------------------------------------------------------------------
    def var(self, sc: Scope, depth: int) -> Built:
        names = sc.tensors()
        holders = sc.names(lambda v: isinstance(v, (TList, TDict, BoxV)))
        if names and (not holders or self.rng.chance(0.85)):
            name = self.rng.pick(names)
            return name, sc.vars[name]
        if not holders:
            return None
        name = self.rng.pick(holders)
        info = sc.vars[name]
        if isinstance(info, BoxV):
            return f"{name}.t", info.elem
        if isinstance(info, TList):
            return (f"{name}[0]", info.elem) if info.min_len else None
        return (f"{name}[{self.rng.pick(sorted(info.keys))!r}]", info.elem) if info.keys else None

    def unary(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1)
        if t.dtype == "bool":
            return self.rng.pick([(f"(~{src})", t), (f"{src}.float()", T(t.shape, "f32")), (f"{src}.logical_not()", t)])
        kind = self.rng.weighted([("float", 3), ("same", 4), ("scalar", 1.5), ("compare", 1)])
        if kind == "float":
            form = self.rng.pick(_FLOAT_UNARY)
            if "gelu" in form and not is_float(t.dtype):  # gelu has no integer kernel (the others promote)
                src = f"{src}.float()"
            return form.format(src), T(t.shape, t.dtype if is_float(t.dtype) else "f32", t.contig)
        if kind == "same":
            form = self.rng.pick(_SAME_UNARY)
            return form.format(src), T(t.shape, t.dtype, t.contig or form.endswith("contiguous()"))
        if kind == "scalar":
            return self.rng.pick(_SCALAR_FLOAT).format(src), T(t.shape, with_scalar(t.dtype, "float"), t.contig)
        return self.rng.pick(_COMPARE).format(src), T(t.shape, "bool", t.contig)

    def binary(self, sc: Scope, depth: int) -> Built:
        a_src, a = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool")
        b_src, b = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool" and broadcast(a.shape, t.shape) is not None)
        shape = broadcast(a.shape, b.shape)
        if shape is None:  # fell back to a constant that does not fit: reduce `a` against itself
            b_src, b = f"{a_src}.sum(-1, keepdim=True)" if a.ndim else a_src, a
            shape = a.shape
        form = self.rng.pick(_BINARY)
        if form.startswith("(") and self.rng.chance(0.2):
            form = "({} / {})"
            dtype = promote(promote(a.dtype, b.dtype), "f32")
        else:
            dtype = promote(a.dtype, b.dtype)
        return form.format(a_src, b_src), T(shape, dtype, a.contig and b.contig)

    def reduce(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool")
        fl = is_float(t.dtype)
        if t.ndim == 0 or self.rng.chance(0.3):
            form = self.rng.pick(
                ["{}.sum()", "{}.amax()", "torch.sum({})", "{}.max()", "{}.min()"]
                + (["{}.mean()", "{}.norm()", "{}.std()"] if fl and t.ndim else [])
            )
            dtype = t.dtype
            return form.format(src), T((), dtype)
        dim = self.rng.int(0, t.ndim - 1)
        keep = self.rng.chance(0.4)
        ops = ["sum", "amax", "amin", "prod"] + (["mean", "logsumexp"] if fl else [])
        op = self.rng.pick(ops)
        dim_text = str(dim - t.ndim) if self.rng.chance(0.3) else str(dim)
        keep_text = ", keepdim=True" if keep else ""
        if self.rng.chance(0.15):
            src = f"torch.max({src}, dim={dim_text}{keep_text}).values"
        else:
            src = f"{src}.{op}({dim_text}{keep_text})"
        shape = (
            tuple(1 if i == dim else d for i, d in enumerate(t.shape))
            if keep
            else tuple(d for i, d in enumerate(t.shape) if i != dim)
        )
        return src, T(shape, t.dtype, t.contig)  # a reduction may keep its operand's layout (channels_last)

    def view(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1, lambda t: t.ndim >= 1)
        opts = []
        flat = numel(t.shape)
        if flat is not None:
            opts += [(f"{src}.reshape(-1)", T((flat,), t.dtype)), (f"{src}.flatten()", T((flat,), t.dtype))]
            if t.contig:
                opts.append((f"{src}.view(-1)", T((flat,), t.dtype)))
        if t.ndim >= 2:
            s = t.shape
            opts += [
                (f"{src}.transpose(0, 1)", T((s[1], s[0]) + s[2:], t.dtype, False)),
                (f"{src}.flatten(1)", T((s[0], numel(s[1:])), t.dtype, t.contig)) if numel(s[1:]) else None,
            ]
            if t.ndim == 2:
                opts += [(f"{src}.t()", T((s[1], s[0]), t.dtype, False)), (f"{src}.T", T((s[1], s[0]), t.dtype, False))]
            if t.ndim == 3:
                opts.append((f"{src}.permute(2, 0, 1)", T((s[2], s[0], s[1]), t.dtype, False)))
            if t.ndim == 4:
                opts += [
                    (f"{src}.permute(0, 2, 3, 1)", T((s[0], s[2], s[3], s[1]), t.dtype, False)),
                    (f"{src}.contiguous(memory_format=torch.channels_last)", T(s, t.dtype, False)),
                ]
        last = t.shape[-1]
        if isinstance(last, int) and last % 2 == 0 and last > 2:
            meth = "view" if t.contig else "reshape"
            opts.append((f"{src}.{meth}(*{src}.shape[:-1], 2, {last // 2})", T(t.shape[:-1] + (2, last // 2), t.dtype)))
        opts += [
            (f"{src}.unsqueeze(0)", T((1,) + t.shape, t.dtype, t.contig)),
            (f"{src}.unsqueeze(-1)", T(t.shape + (1,), t.dtype, t.contig)),
            (f"{src}[None]", T((1,) + t.shape, t.dtype, t.contig)),
        ]
        if 1 in t.shape:
            i = t.shape.index(1)
            opts.append((f"{src}.squeeze({i})", T(t.shape[:i] + t.shape[i + 1 :], t.dtype, t.contig)))
        if t.ndim >= 1 and t.shape[0] == 1:
            opts.append((f"{src}.expand(2, *{src}.shape[1:])", T((2,) + t.shape[1:], t.dtype, False)))
        return self.rng.pick([o for o in opts if o is not None])

    def index(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1, lambda t: t.ndim >= 1)
        s, d0 = t.shape, t.shape[0]
        opts = [
            (f"{src}[0]", T(s[1:], t.dtype, t.contig)),
            (f"{src}[-1]", T(s[1:], t.dtype, t.contig)),
            (f"{src}[..., 0]", T(s[:-1], t.dtype, t.ndim == 1)),
        ]
        if dim_min(d0) >= 3:
            opts += [
                (f"{src}[1:]", T((_minus(d0, 1),) + s[1:], t.dtype, t.contig)),
                (f"{src}[:2]", T((2,) + s[1:], t.dtype, t.contig)),
                (f"{src}[torch.tensor([0, 2])]", T((2,) + s[1:], t.dtype, t.contig)),
                (f"{src}[[1, 0]]", T((2,) + s[1:], t.dtype, t.contig)),
            ]
        if isinstance(s[-1], int) and s[-1] >= 3:
            opts += [
                (f"{src}[..., ::2]", T(s[:-1] + ((s[-1] + 1) // 2,), t.dtype, False)),
                (f"{src}[..., 1:3]", T(s[:-1] + (2,), t.dtype, False)),
            ]
        if t.ndim >= 2:
            opts += [
                (f"{src}[:, 1]", T((d0,) + s[2:], t.dtype, False)),
                (f"{src}[:, None]", T((d0, 1) + s[1:], t.dtype, t.contig)),
            ]
        if t.dtype != "bool":
            opts.append((f"{src}[{src} > 0].sum()", T((), t.dtype)))
            opts.append((f"{src}.masked_fill({src} < 0, 0)", T(s, t.dtype, t.contig)))
        return self.rng.pick(opts)

    def matmul(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1, lambda t: t.ndim in (1, 2) and is_float(t.dtype))
        if t.ndim == 1:
            return f"({src} @ {src})", T((), t.dtype)
        m, k = t.shape
        others = sc.tensors(lambda o: o.ndim >= 1 and o.shape[0] == k and o.ndim <= 2 and is_float(o.dtype))
        opts = [
            (f"({src} @ {src}.t())", T((m, m), t.dtype)),
            (f"torch.mm({src}.t(), {src})", T((k, k), t.dtype)),
            (f"{src}.matmul({src}.transpose(0, 1))", T((m, m), t.dtype)),
        ]
        if others:
            name = self.rng.pick(others)
            o = sc.vars[name]
            opts.append((f"({src} @ {name}.to({src}.dtype))", T((m,) + o.shape[1:], t.dtype)))
        return self.rng.pick(opts)

    def cat(self, sc: Scope, depth: int) -> Built:
        a_src, a = self.tensor(sc, depth - 1, lambda t: t.ndim >= 1)
        b_src, b = self.tensor(sc, depth - 1, lambda t: t.shape == a.shape)
        if b.shape != a.shape:
            b_src, b = a_src, a
        dtype, contig = promote(a.dtype, b.dtype), a.contig and b.contig  # cat keeps its operands' layout
        if self.rng.chance(0.35):
            return f"torch.stack([{a_src}, {b_src}])", T((2,) + a.shape, dtype, contig)
        dim = self.rng.pick([0, a.ndim - 1])
        size = dim_add(a.shape[dim], b.shape[dim])
        shape = a.shape[:dim] + (size,) + a.shape[dim + 1 :]
        return f"torch.cat([{a_src}, {b_src}], dim={dim})", T(shape, dtype, contig)

    def dtype_change(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1)
        form, dtype = self.rng.pick(
            [
                ("{}.float()", "f32"),
                ("{}.double()", "f64"),
                ("{}.to(torch.int64)", "i64"),
                ("{}.long()", "i64"),
                ("{}.to(torch.float32)", "f32"),
                ("{}.bool()", "bool"),
            ]
            + ([("({} * 4).to(torch.int64)", "i64")] if t.dtype != "bool" else [])
        )
        return form.format(src), T(t.shape, dtype, t.contig)

    def where(self, sc: Scope, depth: int) -> Built:
        a_src, a = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool")
        b_src, b = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool" and broadcast(t.shape, a.shape) == a.shape)
        if broadcast(b.shape, a.shape) != a.shape:
            b_src, b = f"torch.zeros_like({a_src})", a
        cond = self.rng.pick(["({} > 0)", "({} < {})"]).format(a_src, b_src)
        return f"torch.where({cond}, {a_src}, {b_src})", T(a.shape, promote(a.dtype, b.dtype), a.contig and b.contig)

    def create(self, sc: Scope, depth: int) -> Built:
        f = self.feat
        opts = [
            (f"torch.arange({f})", T((f,), "i64")),
            (f"torch.zeros({f})", T((f,), "f32")),
            (f"torch.linspace(0, 1, {f})", T((f,), "f32")),
            (f"torch.eye({f})", T((f, f), "f32")),
            ("torch.tensor(2.0)", T((), "f32")),
            (f"torch.full(({f},), 0.5)", T((f,), "f32")),
        ]
        names = sc.tensors()
        if names:
            name = self.rng.pick(names)
            t = sc.vars[name]
            like = T(t.shape, t.dtype, t.contig)  # *_like keeps the layout
            opts += [
                (f"torch.zeros_like({name})", like),
                (f"torch.ones_like({name})", like),
                (f"torch.full_like({name}, 2)", like),
                (f"{name}.new_ones({f})", T((f,), t.dtype)),
            ]
        return self.rng.pick(opts)

    def misc(self, sc: Scope, depth: int) -> Built:
        src, t = self.tensor(sc, depth - 1, lambda t: t.ndim >= 1 and t.dtype != "bool")
        last = t.shape[-1]
        fl = t.dtype if is_float(t.dtype) else "f32"
        c = t.contig  # these may keep their operand's layout
        opts = [
            (f"{src}.cumsum(-1)", T(t.shape, t.dtype if t.dtype != "bool" else "i64", c)),
            (f"torch.flip({src}, [0])", T(t.shape, t.dtype, c)),
            (f"{src}.roll(1, 0)", T(t.shape, t.dtype, c)),
            (f"torch.sort({src}, dim=-1).values", T(t.shape, t.dtype, c)),
        ]
        if is_float(t.dtype):
            opts += [
                (f"torch.softmax({src}, dim=-1)", T(t.shape, fl, c)),
                (f"torch.nn.functional.normalize({src}, dim=-1)", T(t.shape, fl, c)),
                (f"{src}.tanh().cumprod(0)", T(t.shape, fl, c)),
            ]
        if dim_min(last) >= 2:
            opts.append((f"torch.topk({src}, 2, dim=-1).values", T(t.shape[:-1] + (2,), t.dtype, c)))
        return self.rng.pick(opts)

    def layout_read(self, sc: Scope, depth: int) -> Built:
        """A tensor scaled or shifted by a layout property of (mostly) an argument, whose layout changes between
        calls: a value that guards must tell apart (a stride, the storage offset, contiguity)."""
        names = sc.tensors(lambda t: t.ndim >= 1)
        args = [n for n in names if n in sc.fn.params]
        if not names:
            return None
        name = self.rng.pick(args if args and self.rng.chance(0.8) else names)
        ndim = sc.vars[name].ndim
        reads = (
            [f"{name}.stride(0)", f"{name}.stride(-1)", f"{name}.storage_offset()", f"int({name}.is_contiguous())"]
            + ([f"{name}.stride(1)"] if ndim >= 2 else [])
            + ([f"int({name}.is_contiguous(memory_format=torch.channels_last))"] * 2 if ndim == 4 else [])
        )
        src, t = self.tensor(sc, depth - 1, lambda t: t.dtype != "bool")
        if t.dtype == "bool":
            return None
        form = self.rng.pick(["({} * {})", "({} + {})", "({} - {})"])
        return form.format(src, self.rng.pick(reads)), T(t.shape, t.dtype, t.contig)

    # -- Python values --------------------------------------------------------------------------------------
    def number(self, sc: Scope, kind: str = "float") -> tuple[str, PyNum]:
        """A Python int or float: a literal, a number in scope, a size."""
        names = sc.names(lambda v: isinstance(v, PyNum) and v.kind == kind)
        if names and self.rng.chance(0.5):
            return self.rng.pick(names), PyNum(kind)
        if kind == "int":
            tens = sc.tensors(lambda t: t.ndim >= 1)
            if tens and self.rng.chance(0.4):
                name = self.rng.pick(tens)
                forms = [
                    f"{name}.shape[0]",
                    f"{name}.size(-1)",
                    f"len({name})",
                    f"{name}.dim()",
                    f"{name}.stride(-1)",
                    f"{name}.storage_offset()",
                ]
                return self.rng.pick(forms), PyNum("int")
            return str(self.rng.int(1, 3)), PyNum("int")
        return self.rng.pick(["0.5", "2.0", "-1.5", "0.25"]), PyNum("float")

    def condition(self, sc: Scope) -> str:
        """A Python condition: on tensor values (a graph break), sizes, dtypes, layouts (mostly of arguments,
        whose layouts change between calls), numbers, containers, grad mode."""
        kind = self.rng.weighted(
            [("tensor", 4), ("size", 1.5), ("layout", 1.5), ("number", 1.5), ("container", 1), ("misc", 1)]
        )
        if kind == "tensor":
            src, t = self.tensor(sc, 1, lambda t: t.dtype != "bool")
            return self.rng.pick(
                [
                    f"{src}.sum() > 0",
                    f"({src} > 0).any()",
                    f"{src}.max() > 1",
                    f"bool({src}.min() < 0)",
                    f"{src}.abs().sum() > 2",
                ]
            )
        names = sc.tensors(lambda t: t.ndim >= 1)
        if kind == "size" and names:
            name = self.rng.pick(names)
            return self.rng.pick(
                [
                    f"{name}.shape[0] > {N_MIN}",
                    f"{name}.dim() == 2",
                    f"{name}.numel() > 8",
                    f"{name}.dtype == torch.float64",
                    f"{name}.is_floating_point()",
                ]
            )
        if kind == "layout" and names:
            args = [n for n in names if n in sc.fn.params]
            name = self.rng.pick(args if args and self.rng.chance(0.75) else names)
            forms = [
                f"{name}.is_contiguous()",
                f"{name}.stride(-1) == 1",
                f"{name}.storage_offset() > 0",
                f"{name}.stride(0) > {name}.shape[-1]",
            ]
            if sc.vars[name].ndim == 4:
                forms += [f"{name}.is_contiguous(memory_format=torch.channels_last)"] * 2
            return self.rng.pick(forms)
        if kind == "number":
            src, _ = self.number(sc, self.rng.pick(["int", "float"]))
            return f"{src} > {self.rng.pick([0, 1, 2])}"
        if kind == "container":
            lists = sc.names(lambda v: isinstance(v, TList))
            dicts = sc.names(lambda v: isinstance(v, TDict))
            if lists:
                return f"len({self.rng.pick(lists)}) > {self.rng.int(0, 2)}"
            if dicts:
                return f"{self.rng.pick(['a', 'b', 'c'])!r} in {self.rng.pick(dicts)}"
        return self.rng.pick(["torch.is_grad_enabled()", "True", "not torch.is_grad_enabled()"])


def _minus(d: Any, c: int) -> Any:
    return Sym(d.k, d.c - c) if isinstance(d, Sym) else d - c
