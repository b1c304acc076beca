"""Dynamic shapes: which input dims are symbolic, the shape environment they live in, and the guards it asks for."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Any, Callable

import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatefulSymbolicContext,
    StatelessSymbolicContext,
    compute_unbacked_bindings,
    constrain_range,
    free_unbacked_symbols,
)

from framejit.exc import BreakCode, UserError
from framejit.sources import AttrSource, Source
from framejit.weak_identity import WeakIdentityKeyDict

# code object -> {source name: sizes seen by earlier compiles, None in a dim that already changed}
_SEEN_SIZES: "WeakIdentityKeyDict[Any, dict[str, tuple[int | None, ...]]]" = WeakIdentityKeyDict()

_DYNAMIC_ATTR = "_framejit_dynamic_dims"  # mark_dynamic: {dim: (min, max)}
_MAYBE_DYNAMIC_ATTR = "_framejit_maybe_dynamic_dims"
_STATIC_ATTR = "_framejit_static_dims"
_UNBACKED_ATTR = "_framejit_unbacked_dims"  # mark_unbacked: {dim}


@dataclasses.dataclass(frozen=True)
class _TokenSource(TorchSource):
    """How the shape environment names one input tensor in the guards it writes: a token that guard code
    replaces with the tensor's own expression."""

    token: str

    @property
    def _name_template(self) -> str:
        return self.token

    @property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


class TraceShapes:
    """The shape environment of one trace and its symbolic inputs."""

    def __init__(
        self, dynamic: bool | None, code: Any, scalar_outputs: bool = False, dynamic_output_shapes: bool = False
    ) -> None:
        self.dynamic = dynamic
        self.code = code
        # Ops whose output size depends on data (nonzero, masking, unique) and numbers read out of tensors get
        # unbacked symbols when the graph must be whole (fullgraph, export) or the settings ask for them; elsewhere
        # they are graph breaks (fake execution raises), as in torch.compile by default.
        self.env = ShapeEnv(allow_dynamic_output_shape_ops=dynamic_output_shapes, allow_scalar_outputs=scalar_outputs)
        self.fake_mode = FakeTensorMode(shape_env=self.env)
        self.tokens: dict[str, Source] = {}  # token -> the input's source
        self._symbolic: list[tuple[torch.Tensor, _TokenSource]] = []
        self.has_unbacked = False  # a data-dependent size or number is in the graph (fullgraph)
        self.marked: dict[tuple[str, int], tuple[torch.Tensor, int | None, int | None]] = {}  # mark_dynamic dims
        self._views: list[tuple[torch.Tensor, Source, torch.Tensor]] = []  # view inputs: fake, source, base

    def fake_input(
        self, value: torch.Tensor, source: Source, is_module_state: bool
    ) -> tuple[torch.Tensor, frozenset[int]]:
        """The fake tensor the trace uses for input `value`, and its dynamic dims."""
        if is_traceable_wrapper_subclass(value):  # static: its inner tensors' sizes follow from its own
            return self.fake_mode.from_tensor(value, static_shapes=True), frozenset()
        dims = self._dynamic_dims(value, source, is_module_state)
        # a view (a slice, a transpose, a narrow) is dynamic by the same rule: torch's meta converter makes its fake
        # by as_strided of a fake of its base, with symbols of its own for its sizes, and for the strides and
        # storage offset that are not plain numbers (the guards check those; 0 and 1 stay constants). The base's
        # dims follow the rule at `<view>._base` (static until they change, as TorchDynamo's); the trace never
        # reads them (`_base` is a graph break), a backend may (see view_bases)
        base_context = self._base_context(value, source, is_module_state)  # (its sizes recorded at every compile)
        if not dims:
            fake = self.fake_mode.from_tensor(value, static_shapes=True)
            if value._base is not None:
                self._views.append((fake, source, value._base))
            return fake, dims
        token = self._token(source)
        # a dim mark_dynamic named gets a symbol of its own; the others are duck-sized, as in torch.compile: dims
        # of equal size share one symbol (a square image's height and width), guarded equal, which keeps the
        # symbolic arithmetic of view ops (Swin's windows) far simpler
        marked = getattr(value, _DYNAMIC_ATTR, {})
        unbacked = getattr(value, _UNBACKED_ATTR, set())
        sizes = [
            (DimDynamic.UNBACKED if d in unbacked else DimDynamic.DYNAMIC if d in marked else DimDynamic.DUCK)
            if d in dims
            else DimDynamic.STATIC
            for d in range(value.dim())
        ]
        context = StatefulSymbolicContext(dynamic_sizes=sizes, tensor_source=token, view_base_context=base_context)
        # an unbacked input size is bound by the input itself, not by the first op that meets it
        with self.env.ignore_fresh_unbacked_symbols() if unbacked else contextlib.nullcontext():
            fake = self.fake_mode.from_tensor(value, source=token, symbolic_context=context)
        self._symbolic.append((fake, token))
        if value._base is not None:
            self._views.append((fake, source, value._base))
        for d, (low, high) in getattr(value, _DYNAMIC_ATTR, {}).items():  # mark_dynamic: a promise, with a range
            if d in dims:
                self.marked[(source.name(), d)] = (fake, low, high)
                if not (low or 0) <= value.size(d) <= (high if high is not None else value.size(d)):
                    raise UserError(
                        f"framejit.mark_dynamic({source.name()}, {d}{_range_text(low, high)}): the "
                        f"size is {value.size(d)}, outside that range",
                        code=BreakCode.DYNAMIC_CONSTRAINT,
                    )
                if low is not None or high is not None:
                    constrain_range(fake.shape[d], min=low, max=high)
        return fake, dims

    def _base_context(self, value: torch.Tensor, source: Source, is_module_state: bool) -> Any:
        """How the fake of a view's base is made: its dims dynamic by the automatic rule at `<view>._base`."""
        base = value._base
        if base is None:
            return None
        dims = self._dynamic_dims(base, AttrSource(source, "_base"), is_module_state)
        sizes = [DimDynamic.DUCK if d in dims else DimDynamic.STATIC for d in range(base.dim())]
        return StatelessSymbolicContext(dynamic_sizes=sizes, view_base_context=None)

    def _token(self, source: Source) -> _TokenSource:
        """A new name for an input in the shape environment's guards, standing for `source`."""
        token = _TokenSource(f"___shape{len(self.tokens)}")
        self.tokens[token.token] = source
        return token

    def _dynamic_dims(self, value: torch.Tensor, source: Source, is_module_state: bool) -> frozenset[int]:
        if value.dim() == 0:
            return frozenset()
        static = getattr(value, _STATIC_ATTR, set())
        marked = set(getattr(value, _DYNAMIC_ATTR, {})) | set(getattr(value, _MAYBE_DYNAMIC_ATTR, set()))
        if self.dynamic is True and not is_module_state:
            marked |= set(range(value.dim()))
        elif self.dynamic is None and self.code is not None and not is_module_state:
            marked |= self._changed(source.name(), tuple(value.shape))
        unbacked = getattr(value, _UNBACKED_ATTR, set())  # symbolic whatever the size, 0 and 1 included
        return frozenset(d for d in marked | unbacked if d not in static and (value.size(d) > 1 or d in unbacked))

    def _changed(self, name: str, now: tuple[int, ...]) -> set[int]:
        """Automatic dynamic: the dims of the input at `name` whose size (`now`) differs from the one an earlier
        compile of this frame saw there (an int input is one dim: its value)."""
        seen = _SEEN_SIZES.setdefault(self.code, {})
        before = seen.get(name)
        if before is None or len(before) != len(now):
            seen[name] = now
            return set()
        changed = {d for d, (a, b) in enumerate(zip(before, now)) if a != b}
        seen[name] = tuple(None if d in changed else n for d, n in enumerate(before))
        return changed

    def symbolic_int(
        self, value: int, source: Source, automatic_only: bool = False, numpy: bool = False
    ) -> torch.SymInt | None:
        """A SymInt for a Python int read from `source`, if the policy makes it dynamic (as a size would be:
        never 0 or 1; automatic: once its value changed between compiles). `automatic_only`: only once it
        changed, even under dynamic=True (a module's configuration stays static; a counter it keeps does not).
        `numpy`: a numpy integer, an argument of which is dynamic from the first call, 0 and 1 included (as
        torch.compile, which passes them as tensors: a program feeding np.int64 steps compiles once)."""
        unspecialised = numpy and not automatic_only
        if self.dynamic is False:
            return None
        automatic = (self.dynamic is None or automatic_only) and not unspecialised
        # the value is remembered even when it is 0 or 1 (kept a constant): a 1 then a 2 is a change
        changed = automatic and self.code is not None and bool(self._changed(source.name(), (value,)))
        if value in (0, 1) and not unspecialised or automatic and not changed:
            return None
        token = self._token(source)
        # positive=None: an int argument may be negative (sizes are the positive ones). An argument is duck-sized
        # (a `seq_len` equal to a tensor's size is that size's symbol); an attribute that changed (a counter) is
        # unrelated to sizes and gets a symbol of its own
        symbol = self.env.create_symintnode(
            self.env.create_symbol(
                value,
                token,
                positive=None,
                do_not_specialize_zero_one=unspecialised,
                dynamic_dim=DimDynamic.DYNAMIC if automatic_only or unspecialised else DimDynamic.DUCK,
            ),
            hint=value,
            source=token,
        )
        self._symbolic.append((symbol, token))
        return symbol

    def symbolic_float(self, value: float, source: Source) -> torch.SymFloat | None:
        """A SymFloat for a Python float argument once its value changed between compiles (torch.compile's
        automatic dynamic floats: a learning rate or a timestep that changes every call compiles twice, not at
        every call). Never under dynamic=False; not NaN or infinities (guarded by value)."""
        if self.dynamic is False or self.code is None or value != value or value in (float("inf"), float("-inf")):
            return None
        if not self._changed(source.name(), (value,)):
            return None
        token = self._token(source)
        symbol = self.env.create_symfloatnode(
            self.env.create_unspecified_symbol(value, source=token, dynamic_dim=DimDynamic.DYNAMIC),
            hint=value,
            source=token,
        )
        self._symbolic.append((symbol, token))
        return symbol

    def view_bases(self, shared: Callable[[torch.Tensor], bool]) -> list[tuple[Source, torch.Tensor, torch.Tensor]]:
        """The bases of view inputs that a backend may have read, as (`<view>._base`, the base, its fake):
        made inputs of the shape guards, to be guarded like inputs. AOTAutograd merges inputs that share memory,
        one of them written, into their base, compiles for its layout and guards how they lie in it
        (`a.size(0) * 6 > b.storage_offset()`): a view `shared(view)` (its memory is another input's too) has its
        base guarded, and so has one whose base's own symbols the guards name."""
        bound = set().union(*(_layout_symbols(fake) for fake, _ in self._symbolic))
        referenced = set(self.env.replacements).union(*(g.expr.free_symbols for g in self.env.guards))
        bases = []
        for fake, source, base in self._views:
            fake_base = fake._base
            if fake_base is None:
                continue
            own = _layout_symbols(fake_base) - bound
            if not shared(base) and not own & referenced:
                continue
            base_source = AttrSource(source, "_base")
            if _layout_symbols(fake_base):
                self._symbolic.append((fake_base, self._token(base_source)))
            bound |= own
            bases.append((base_source, base, fake_base))
        return bases

    def unbacked_bindings(self, result: Any) -> dict | None:
        """Where an op's result holds the sizes or numbers only its data decides (nonzero, masking, .item();
        fullgraph only), for its node's `unbacked_bindings`. A symbol made inside the kernel that the result does
        not hold (a foreach op's .item() of a 0-dim scalar) is the kernel's own."""
        env = self.env
        if env.pending_fresh_unbacked_symbols:
            held = free_unbacked_symbols(result)
            env.ignorable_fresh_unbacked_symbols.extend(s for s in env.pending_fresh_unbacked_symbols if s not in held)
            self.has_unbacked = True  # (a backend's trace of the kernel makes them again: it needs this env)
        bindings = compute_unbacked_bindings(env, result)
        self.has_unbacked = self.has_unbacked or bool(bindings)
        return bindings

    def backend_context(self) -> Any:
        """Where the backend compiles: a tracing context that hands AOTAutograd and inductor the trace's fake
        mode, so that they fakify the real example inputs to the fakes the trace used (the mode memoises each
        tensor's fake: symbolic where the trace's were, static elsewhere; TorchDynamo shares its mode the same
        way) and compile kernels for every size; its shape environment also has the unbacked symbols of
        data-dependent ops."""
        if not self._symbolic and not self.has_unbacked:
            # a static graph compiles as before: AOTAutograd under a tracing context was seen to give other
            # gradients for one model with dropout (PEGASUS-X), which nothing static needs the context for
            return contextlib.nullcontext()
        return torch._guards.tracing(torch._guards.TracingContext(self.fake_mode))

    def symbolic_dims(self) -> dict[str, frozenset[int]]:
        """For each input made symbolic, the dims still symbolic at the end of the trace (by source name)."""
        return {
            self.tokens[token.token].name(): frozenset(d for d, n in enumerate(fake.shape) if is_symbolic(n))
            for fake, token in self._symbolic
            if isinstance(fake, torch.Tensor)
        }

    def specialised_ints(self) -> dict[str, int]:
        """The int inputs made symbolic that the trace then needed as numbers: by source name, their value."""
        return {
            self.tokens[token.token].name(): int(symbol)
            for symbol, token in self._symbolic
            if isinstance(symbol, torch.SymInt) and not is_symbolic(symbol)
        }

    def broken_marks(self) -> list[str]:
        """mark_dynamic dims the trace specialised (it needed the size as a number), described."""
        return [
            f"framejit.mark_dynamic({name}, {d}{_range_text(low, high)}) asked for a symbolic size, but the code "
            f"needs it to be {int(fake.shape[d])}"
            for (name, d), (fake, low, high) in self.marked.items()
            if not is_symbolic(fake.shape[d])
        ]

    def guards(self) -> list[str]:
        """The shape environment's guards over the symbolic inputs, written over tokens (see `render`)."""
        if not self._symbolic:
            return []
        fakes, sources = zip(*self._symbolic)
        return list(self.env.produce_guards(list(fakes), list(sources)))


SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def is_symbolic(value: Any) -> bool:
    """A SymInt/SymFloat/SymBool that still has free symbols (a constant one is a plain number)."""
    return isinstance(value, SYMBOLIC_TYPES) and not value.node.expr.is_number


def hint(value: Any) -> Any:
    """The value a (symbolic) number has in the call being traced, read without a guard; None for an unbacked
    one. A plain number is itself."""
    return value.node.hint if isinstance(value, SYMBOLIC_TYPES) else value


def _layout_symbols(value: Any) -> set[Any]:
    """The free symbols of a symbolic number, or of a tensor's sizes, strides and storage offset."""
    if isinstance(value, torch.Tensor):
        numbers = [*value.shape, *value.stride(), value.storage_offset()]
    else:
        numbers = [value]
    return set().union(*(n.node.expr.free_symbols for n in numbers if is_symbolic(n)))


def symbolic_sizes(fake: torch.Tensor) -> frozenset[int]:
    """The dims of `fake` whose size is symbolic."""
    return frozenset(d for d, n in enumerate(fake.shape) if is_symbolic(n))


def symbolic_strides(fake: torch.Tensor) -> frozenset[int]:
    """The dims of `fake` whose stride is symbolic (the shape guards cover them; the rest are guarded by value)."""
    return frozenset(d for d, stride in enumerate(fake.stride()) if is_symbolic(stride))


_TOKEN = re.compile(r"___shape\d+")


def render(expr: str, tokens: dict[str, Source], write: Any) -> str:
    """`expr` with each input's token replaced by `write(source)`."""
    return _TOKEN.sub(lambda m: write(tokens[m.group(0)]), expr)


def _range_text(low: int | None, high: int | None) -> str:
    return "".join(f", {k}={v}" for k, v in (("min", low), ("max", high)) if v is not None)


def reset() -> None:
    _SEEN_SIZES.clear()


@dataclasses.dataclass(frozen=True)
class Dim:
    """A named dynamic dimension for `framejit.export(..., dynamic_shapes=...)`, with an optional range (as
    torch.export.Dim)."""

    name: str
    min: int | None = None
    max: int | None = None


def mark_from_spec(args: tuple, kwargs: dict, spec: Any, arg_names: list[str]) -> list[torch.Tensor]:
    """Apply export's `dynamic_shapes` (a tuple mirroring the positional arguments, or a dict by argument name;
    per tensor a {dim: Dim} mapping, a sequence of Dim-or-None per dim, or None) as mark_dynamic calls.
    Returns the tensors marked (their marks are taken off again by `unmark`)."""
    if spec is None:
        return []
    named = dict(zip(arg_names, args), **kwargs)
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in named]
        if unknown:
            raise UserError(
                f"export: dynamic_shapes names {unknown}, which are not arguments ({list(named)})",
                code=BreakCode.DYNAMIC_CONSTRAINT,
            )
        pairs = [(named[k], v, k) for k, v in spec.items()]
    else:
        pairs = [(a, v, n) for a, v, n in zip(args, spec, arg_names)]
    marked: list[torch.Tensor] = []
    for value, dims, name in pairs:
        if dims is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise UserError(
                f"export: dynamic_shapes gives dims for {name!r}, which is a {type(value).__name__}, not a tensor",
                code=BreakCode.DYNAMIC_CONSTRAINT,
            )
        items = dims.items() if isinstance(dims, dict) else enumerate(dims)
        for d, dim in items:
            if dim is None:
                continue
            if not isinstance(dim, Dim):
                raise UserError(
                    f"export: dynamic_shapes[{name!r}][{d}] is {dim!r}, not a framejit.Dim or None",
                    code=BreakCode.DYNAMIC_CONSTRAINT,
                )
            mark_dynamic(value, d, min=dim.min, max=dim.max)
        marked.append(value)
    return marked


def named_dims(args: tuple, kwargs: dict, spec: Any, arg_names: list[str]) -> dict[str, dict[int, str]]:
    """{argument name: {dim: Dim name}} of the tensor arguments `spec` makes dynamic (saved programs name their
    dynamic axes so)."""
    if spec is None:
        return {}
    pairs = spec.items() if isinstance(spec, dict) else zip(arg_names, spec)
    return {
        name: {
            d: dim.name
            for d, dim in (dims.items() if isinstance(dims, dict) else enumerate(dims))
            if isinstance(dim, Dim)
        }
        for name, dims in pairs
        if dims is not None
    }


def unmark(tensors: list[torch.Tensor]) -> None:
    for t in tensors:
        for attr in (_DYNAMIC_ATTR, _MAYBE_DYNAMIC_ATTR, _STATIC_ATTR, _UNBACKED_ATTR):
            if hasattr(t, attr):
                delattr(t, attr)


def mark_dynamic(t: torch.Tensor, dim: int | list[int], *, min: int | None = None, max: int | None = None) -> None:
    """Make these dims of `t` symbolic in every compile that reads `t`."""
    dims = _dims(t, dim, "mark_dynamic")
    marks = dict(getattr(t, _DYNAMIC_ATTR, {}))
    for d in dims:
        marks[d] = (min, max)
    setattr(t, _DYNAMIC_ATTR, marks)


def mark_unbacked(t: torch.Tensor, index: int | list[int]) -> None:
    """Make these dims of `t` unbacked in every compile that reads `t`: symbolic from the first compile with no
    size known to the trace (not even 0 or 1), so nothing specialises on it and no size recompiles."""
    setattr(t, _UNBACKED_ATTR, set(getattr(t, _UNBACKED_ATTR, set())) | set(_dims(t, index, "mark_unbacked")))


def maybe_mark_dynamic(t: torch.Tensor, dim: int | list[int]) -> None:
    """Like mark_dynamic, but a trace that specialises the dim is not an error."""
    setattr(
        t, _MAYBE_DYNAMIC_ATTR, set(getattr(t, _MAYBE_DYNAMIC_ATTR, set())) | set(_dims(t, dim, "maybe_mark_dynamic"))
    )


def mark_static(t: torch.Tensor, dim: int | list[int] | None = None) -> None:
    """Keep these dims of `t` (all of them by default) static, whatever the policy."""
    dims = _dims(t, list(range(t.dim())) if isinstance(t, torch.Tensor) and dim is None else dim, "mark_static")
    setattr(t, _STATIC_ATTR, set(getattr(t, _STATIC_ATTR, set())) | set(dims))


def _dims(t: Any, dim: int | list[int], caller: str) -> list[int]:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"framejit.{caller} expects a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"framejit.{caller}: dim {d!r} is out of range for a tensor of {t.dim()} dims")
    return [d % t.dim() for d in dims]
