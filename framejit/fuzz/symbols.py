"""What the generator knows about the values a program handles: sizes that follow the batch size, dtypes, the
kinds of values in scope, and the scopes of a function body (what a nested block may read, and must not leave
behind)."""

from __future__ import annotations

import contextlib
import dataclasses
import random
from typing import Any, Callable, Iterator, Protocol, Sequence

N_MIN = 3  # the smallest batch size the runner passes: a size k*N + c is valid when it is >= 1 at N_MIN
DYN = "?"  # a data-dependent size (boolean-mask indexing): only ever reduced away


@dataclasses.dataclass(frozen=True)
class Sym:
    """A size k*N + c that follows the batch size N, which differs between calls (k >= 1)."""

    k: int
    c: int = 0

    def at(self, n: int) -> int:
        return self.k * n + self.c


N = Sym(1)
Dim = Any  # int | Sym | DYN


def dim_min(d: Dim) -> int:
    """The smallest value the size takes over the calls (a data-dependent size counts as 0)."""
    return d.at(N_MIN) if isinstance(d, Sym) else (0 if d == DYN else d)


def dim_mul(d: Dim, m: int) -> Dim:
    return Sym(d.k * m, d.c * m) if isinstance(d, Sym) else d * m


def dim_add(a: Dim, b: Dim) -> Dim | None:
    """The size of two tensors concatenated along this dim (None: N*N-like sizes are not tracked)."""
    if isinstance(a, Sym) or isinstance(b, Sym):
        sa = a if isinstance(a, Sym) else Sym(0, a)
        sb = b if isinstance(b, Sym) else Sym(0, b)
        return Sym(sa.k + sb.k, sa.c + sb.c)
    return a + b


def numel(shape: Sequence[Dim]) -> Dim | None:
    """The product of the sizes, if at most one follows N (else None)."""
    syms = [d for d in shape if isinstance(d, Sym)]
    if len(syms) > 1 or DYN in shape:
        return None
    rest = 1
    for d in shape:
        if not isinstance(d, Sym):
            rest *= d
    return dim_mul(syms[0], rest) if syms else rest


def broadcast(a: Sequence[Dim], b: Sequence[Dim]) -> tuple | None:
    """The broadcast shape, or None when the shapes do not broadcast for every N (a size following N only
    broadcasts with itself or 1)."""
    if DYN in a or DYN in b:
        return None
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))


FLOATS = ("F", "f32", "f64")  # F: the arguments' float dtype (float32, or float64 in the float64 call)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def promote(a: str, b: str) -> str:
    """Tensor-tensor type promotion over the dtypes tracked (bool < int64 < floats; F with f32 is F)."""
    if is_float(a) and is_float(b):
        return "f64" if "f64" in (a, b) else ("F" if "F" in (a, b) else "f32")
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    return "i64" if "i64" in (a, b) else "bool"


def with_scalar(dtype: str, scalar: str) -> str:
    """The dtype of tensor `op` Python scalar ('int' or 'float')."""
    if scalar == "float" and not is_float(dtype):
        return "f32"
    if scalar == "int" and dtype == "bool":
        return "i64"
    return dtype


def inplace_ok(dest: str, src: str) -> bool:
    """Whether an in-place op into `dest` accepts a `src` operand (no float into an integer tensor)."""
    return is_float(dest) or not is_float(src)


@dataclasses.dataclass(frozen=True)
class T:
    """A tensor: its shape (ints, Sym, DYN), dtype and whether `.view` can be used on it."""

    shape: tuple
    dtype: str = "F"
    contig: bool = True

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclasses.dataclass(frozen=True)
class PyNum:
    kind: str  # "int" | "float" | "bool"


@dataclasses.dataclass(frozen=True)
class TList:
    """A list of tensors that all look like `elem`; `min_len` elements are certainly there."""

    elem: T
    min_len: int = 0


@dataclasses.dataclass(frozen=True)
class TDict:
    """A str-keyed dict of tensors like `elem`; `keys` are certainly there."""

    elem: T
    keys: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class BoxV:
    """An instance of the program's Box class: `.t` a tensor like `elem`, `.n` an int."""

    elem: T


@dataclasses.dataclass(frozen=True)
class FnV:
    """A callable taking one tensor like `arg` and returning one like `ret`."""

    arg: T
    ret: T


class Rng:
    """random.Random with the few draws the generator makes."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.r.randrange(len(seq))]

    def weighted(self, pairs: Sequence[tuple[Any, float]]) -> Any:
        items, weights = zip(*pairs)
        return self.r.choices(items, weights=weights)[0]

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)


class FnCtx:
    """One function being generated: its parameters and locals, the locals of the functions around it (which it
    reads as cells), and the names it must declare `global` / `nonlocal` at its top."""

    def __init__(
        self, name: str, params: Sequence[str] = (), enclosing: "FnCtx | None" = None, is_program: bool = False
    ) -> None:
        self.name = name
        self.is_program = is_program
        self.params = set(params)
        self.locals = set(params)
        self.enclosing: set[str] = (enclosing.locals | enclosing.enclosing) if enclosing else set()
        self.global_decls: set[str] = set()
        self.nonlocal_decls: set[str] = set()

    def header(self) -> list[str]:
        """The declarations that open the body."""
        out = []
        if self.global_decls:
            out.append("global " + ", ".join(sorted(self.global_decls)))
        if self.nonlocal_decls:
            out.append("nonlocal " + ", ".join(sorted(self.nonlocal_decls)))
        return out


class Scope:
    """The names visible at one point of a function body. A nested block works on a child: names it defines
    are dropped when it ends (it may not run), and names of the parent it rebinds must keep their kind."""

    def __init__(self, fn: FnCtx, parent: "Scope | None" = None, loop: bool = False) -> None:
        self.fn = fn
        self.vars: dict[str, Any] = dict(parent.vars) if parent else {}
        self.outer: frozenset = frozenset(self.vars) if parent else frozenset()
        self.in_loop = loop or (parent.in_loop if parent else False)
        self.depth = parent.depth + 1 if parent else 0
        self.parent = parent

    def child(self, loop: bool = False) -> "Scope":
        return Scope(self.fn, self, loop)

    def function(self, fn: FnCtx) -> "Scope":
        """The scope of a function defined here: it sees these names, but is no loop or block of this one."""
        sc = Scope(fn, self)
        sc.in_loop, sc.depth, sc.outer = False, 0, frozenset(sc.vars)
        return sc

    def names(self, pred: Callable[[Any], bool]) -> list[str]:
        return [n for n, v in self.vars.items() if pred(v)]

    def tensors(self, pred: Callable[[T], bool] = lambda t: True) -> list[str]:
        return self.names(lambda v: isinstance(v, T) and v.shape.count(DYN) == 0 and pred(v))

    def bind(self, name: str, info: Any) -> bool:
        """Bind `name`; refused (False) for an outer name when the kind would change."""
        if name in self.outer and self.vars.get(name) != info:
            return False
        self.vars[name] = info
        return True

    def forget(self, name: str) -> None:
        self.vars.pop(name, None)
        scope = self.parent
        while scope is not None:  # `del t` in a block that runs may leave t unbound afterwards
            scope.vars.pop(name, None)
            scope = scope.parent

    def update_container(self, name: str, info: Any) -> None:
        """A container's certain length/keys shrank (or, at the top of the body, grew): record it in every
        scope that shares the object."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                old = scope.vars[name]
                scope.vars[name] = info if scope is self or _smaller(info, old) else old
            scope = scope.parent


def _smaller(new: Any, old: Any) -> bool:
    if isinstance(new, TList):
        return new.min_len <= old.min_len
    if isinstance(new, TDict):
        return new.keys <= old.keys
    return False


class Writer:
    """Source lines with indentation."""

    def __init__(self, level: int = 0) -> None:
        self.lines: list[str] = []
        self.level = level

    def line(self, text: str) -> None:
        self.lines.append("    " * self.level + text)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header)
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1


class Program(Protocol):
    """What the statement and component generators use of the program being generated (generate.ProgramGen)."""

    rng: Rng
    feat: int
    train: bool
    global_infos: dict[str, Any]
    ex: Any  # exprs.Exprs
    comps: Any  # components.Components
    stmts: Any  # stmts.Stmts

    def fresh(self, prefix: str) -> str: ...

    def arg_tensor_types(self) -> list[T]: ...

    def module_scope(self, fn: FnCtx) -> Scope: ...
