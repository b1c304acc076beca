"""Contracts between the pipeline's layers: record types, guard kinds, and the protocols the value layer sees."""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any, Callable, NamedTuple, Protocol

import torch

# The protocols below speak of values (variables.base.Variable) and sources (sources.Source). Both modules
# import this one, so here they are named loosely rather than imported. Protocols for them were tried: the
# contracts run both ways (the value kinds call the tracer with values and sources, the tracer calls values
# with itself), so each implementer's own narrower parameter types then fail the protocol (parameters are
# contravariant), and a TYPE_CHECKING import would draw the circle tests/test_layering.py forbids. The layers
# mypy checks import the real classes.
Variable = Any
Source = Any


class Backend(Protocol):
    """A compiler: takes the captured graph and its real example inputs, returns a callable."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]: ...


class GuardKind(enum.StrEnum):
    """What a guard checks about the value at its source (or, for the global ones, about torch's state)."""

    TENSOR_MATCH = "TENSOR_MATCH"  # type, dtype, device, requires_grad, sizes, strides, dispatch keys
    ID_MATCH = "ID_MATCH"  # the same object
    FUNCTION_MATCH = "FUNCTION_MATCH"  # the same function, module or builtin
    CODE_MATCH = "CODE_MATCH"  # a function with the same code (closures made anew each call match)
    EQUALS = "EQUALS"  # a Python constant of the same type and value
    TYPE_MATCH = "TYPE_MATCH"
    LEN_MATCH = "LEN_MATCH"  # a tuple or list of the same type and length
    DICT_KEYS = "DICT_KEYS"  # a dict (set) of the same type and keys (items), in order
    NO_HOOKS = "NO_HOOKS"  # a module called: still no hooks and no instance `forward`
    NO_ATTR = "NO_ATTR"  # an attribute the trace found missing is still missing
    NO_KEY = "NO_KEY"  # a name the trace found absent (a global shadowing a builtin)
    ALIAS = "ALIAS"  # two sources are one object
    NOT_ALIAS = "NOT_ALIAS"  # two sources are different objects
    GRAD_MODE = "GRAD_MODE"
    DEFAULT_DTYPE = "DEFAULT_DTYPE"
    DEFAULT_DEVICE = "DEFAULT_DEVICE"
    AUTOCAST = "AUTOCAST"
    GLOBAL_QUERY = "GLOBAL_QUERY"  # a query of global state folded to its answer
    SHAPE_ENV = "SHAPE_ENV"  # what the trace assumed of dynamic sizes (equalities, ranges...)
    STORAGE_SHARING = "STORAGE_SHARING"  # which guarded tensors share storage (views of one another)
    SUBCLASS_METADATA = "SUBCLASS_METADATA"  # a wrapper subclass's type and __tensor_flatten__ metadata (placements)


GUARDED_VALUE = "\x00"
"""How a Check's expression writes the guarded value (replaced by its source's expression when rendered): a
character that repr() never writes, so a name or key quoted in the expression cannot be mistaken for it."""

# a module's own hook dicts, forward ones first: the NO_HOOKS guard checks them (the backward ones always)
MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")

# the meta key of a graph input that is a module's parameter or buffer (it lives as long as the model: a backend's
# partitioner may save it for backward at no cost)
MODULE_STATE_META = "framejit_module_state"

# the meta key of a node calling a torch.autograd.Function's real apply (the Function's name): only its tensor
# arguments are the Function's inputs (a tensor in a list it gets carries no gradient back)
AUTOGRAD_FUNCTION_APPLY_META = "framejit_autograd_function_apply"
# the positions, among such a node's arguments, of the tensors apply gets as arguments of its own (the node also
# takes the tensors inside the lists and objects it gets, which are no inputs of the Function)
AUTOGRAD_FUNCTION_INPUTS_META = "framejit_autograd_function_inputs"
# the meta key of such a node whose forward writes into Python state at every call (a list reached from a global):
# a graph holding one runs as its torch ops under any grad mode, so that the forward runs at every call
AUTOGRAD_FUNCTION_LIVE_WRITES_META = "framejit_autograd_function_live_writes"
# the meta key of a node whose target draws random numbers or writes into tensors from before it though its name
# does not say so (a torch.autograd.Function's apply): a graph holding one never runs twice (as_eager/rerun.py)
OPAQUE_EFFECTS_META = "framejit_opaque_effects"
# the meta key of a node calling a torch.autograd.Function's real apply in a training graph, when AOTAutograd must
# not trace through it: why (variables/autograd_speculation.py; the graph then runs as its torch ops)
AUTOGRAD_FUNCTION_REFUSAL_META = "framejit_autograd_function_refusal"


@dataclasses.dataclass(frozen=True)
class Check:
    """One test of a guard, kept as a record so that a miss is explained by evaluating it, not by parsing text.

    The test is `expr op expected`, or, with no `op`, `expr` alone. `expr` writes the guarded value as
    GUARDED_VALUE. `expected_text` is how guard code writes `expected`: an inline literal or a constant's name
    (___c<n>); None when `expected` is another Source, written like the guarded one. `field` names what `expr`
    reads, for messages ("dtype", "shape"...); `parts` are the alternatives of a `not (a or b ...)` test.
    """

    expr: str
    _: dataclasses.KW_ONLY
    op: str = ""  # "is", "is not", "==", or "" when `expr` is the test itself
    expected: Any = True
    expected_text: str | None = ""
    field: str = ""
    parts: tuple["Check", ...] = ()

    @classmethod
    def none_of(cls, parts: list["Check"]) -> "Check":
        """The test that none of these tests is true; each part's `field` names it in messages."""
        return cls(f"not ({' or '.join(p.expr for p in parts)})", parts=tuple(parts))

    def over(self, x: str) -> str:
        """`expr` with the guarded value written as `x`."""
        return self.expr.replace(GUARDED_VALUE, x)

    def text(self, x: str, render: Callable[[Source], str]) -> str:
        """The whole test, the guarded value written as `x` and another source as `render` writes it."""
        if not self.op:
            return self.over(x)
        expected = render(self.expected) if self.expected_text is None else self.expected_text
        return f"{self.over(x)} {self.op} {expected}"


@dataclasses.dataclass(frozen=True)
class Guard:
    """One check a cache entry needs to hold before its compiled code may run.

    `name` is the source expression (e.g. "L['a']", "G['torch']"), `kind` the
    guard type (TENSOR_MATCH, ID_MATCH, FUNCTION_MATCH, EQUALS, TYPE_MATCH,
    LEN_MATCH, DICT_KEYS, NO_HOOKS, GRAD_MODE, DEFAULT_DTYPE, DEFAULT_DEVICE, AUTOCAST), `code_list` the Python
    expressions (over L[...] / G[...]) that must all be true, rendered from `checks`, one line per check.
    """

    name: str
    kind: GuardKind
    code_list: tuple[str, ...]
    source_kind: str = "local"
    checks: tuple[Check, ...] = dataclasses.field(default=(), repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.source_kind} {self.name!r} {self.kind}: " + " and ".join(self.code_list)


@dataclasses.dataclass(frozen=True)
class GuardFailure:
    """Handed to `guard_fail_fn` when no cache entry of a code object matched."""

    code: types.CodeType
    guard: Guard
    reason: str

    def __str__(self) -> str:
        return f"{self.code.co_name} ({self.code.co_filename}:{self.code.co_firstlineno}): {self.reason}"


@dataclasses.dataclass(frozen=True)
class CompiledFrame:
    """What converting one frame produced: the replacement code, its guards and graphs."""

    code: types.CodeType  # the transformed code object (parameters: the original argument slots)
    guard_fn: Callable[..., bool]  # guard_fn(func, *arg_slots) -> bool
    guards: tuple[Guard, ...]
    check_fn_source: str  # the generated source of guard_fn, for debugging
    graph_names: tuple[str, ...]  # __compiled_fn_<n> names of the graphs this code calls
    graph_fates: tuple[Any, ...]  # what the backend made of each graph (fate.GraphFate), in that order
    constants: dict[str, Any]  # the objects guard expressions name as ___c<n>
    watched: tuple[Any, ...]  # objects guarded by id: when one dies, the entry is dropped
    passthrough: bool = False  # `code` is the original body: this path had no tensor op
    reads_tensors: bool = True  # the trace read some tensor
    identity: tuple[tuple[str, int], ...] = ()  # (argument, id) guarded by identity: the objects it is for


class CacheEntry(NamedTuple):
    """One entry of a code object's cache list in co_extra, in the field order the C hook reads."""

    guard_fn: Callable[..., bool]  # guard_fn(func, *arg_slots) -> bool
    code: types.CodeType  # the replacement code
    memo: list  # the C hook's memo of replacement function objects per (closure, globals)
    owner: Any  # the FrameCallback that compiled it: other contexts never run it
    runs_graphs: bool  # its code calls compiled graphs (the hook counts its hits: _hook.get_stats()["graph_hits"])


# -- what the value layer sees of the layers above it -------------------------------------------------------


class GuardRecorder(Protocol):
    """The guards of one compile (guards.GuardSet)."""

    def add(self, source: Source, kind: GuardKind, value: Any) -> None: ...

    def add_query(self, fn: Callable[..., Any], args: tuple, result: Any) -> None: ...


class WriteLog(Protocol):
    """Writes the trace made to state outside the frame, replayed after the graph (side_effects.SideEffects)."""

    def note_write(self, born: int = -1) -> None: ...

    def checkpoint(self) -> tuple[int, int]: ...

    def wrote_older_state(self, checkpoint: tuple[int, int], tensors: bool = True) -> bool: ...

    def mutated_container(self, var: Variable) -> None: ...

    def store_attr(self, obj: Variable, name: str, value: Variable, generic: bool = False) -> None: ...

    def delete_attr(self, obj: Variable, name: str) -> bool: ...

    def attribute_names(self, obj: Variable) -> list[str]: ...

    def pending_attr(self, obj: Variable, name: str) -> Variable | None: ...

    def store_global(self, f_globals: dict, name: str, value: Variable) -> None: ...

    def pending_global(self, f_globals: dict, name: str) -> Variable | None: ...

    def store_cell(self, name: str, value: Variable) -> None: ...

    def store_closure_cell(self, cell_source: Source, value: Variable) -> None: ...

    def rewrites_held_value(self, obj: Variable, name: str, value: Variable) -> bool: ...

    def restore_exc_info(self, saved: Variable) -> None: ...

    def track_iterator(self, iterator: Variable) -> None: ...

    def speculation(self) -> Any: ...

    def forgettable_since(self, mark: Any) -> bool: ...

    def reported_since(self, mark: Any) -> bool: ...

    def forget_since(self, mark: Any) -> None: ...


class TraceOutput(Protocol):
    """The graph being captured (output_graph.OutputGraph), as the translator and the value kinds use it."""

    options: Any  # config.Options of this compile
    budget: int  # symbolic instructions left
    f_globals: dict[str, Any]  # the captured frame's globals
    guards: GuardRecorder
    side_effects: WriteLog
    wrapped: dict[str, Variable]  # by source name: each real value is wrapped (and guarded) once
    wrapped_by_id: dict[int, Variable]  # tensors and mutable objects, by identity
    real_cells: dict[int, Any]  # id(real cell of a closure the trace reads) -> its one trace Cell

    def add_graph_input(self, source: Source, value: torch.Tensor) -> Variable: ...

    def add_int_input(self, source: Source, value: int) -> Variable | None: ...

    def call_graph_op(self, tx: "Tracer", op: str, target: Any, args: Any, kwargs: dict[str, Variable]) -> Variable: ...

    def set_grad_mode(self, mode: bool) -> None: ...

    def set_autocast_state(self, device: str, enabled: bool, dtype: torch.dtype, cache_enabled: bool) -> None: ...

    def leave_after_graph(self, exit_source: Source, reenter_args: tuple) -> None: ...

    def create_node(self, tx: "Tracer", op: str, target: Any, args: tuple, kwargs: dict) -> Any: ...


class Tracer(Protocol):
    """The translator of the frame being traced (trace.translator.Translator), as the value kinds use it."""

    output: TraceOutput

    def wrap(self, value: Any, source: Source | None) -> Variable:
        """A real value read from `source` as a Variable, guarding what the trace relies on."""
        ...

    def wrap_constant(self, value: Any) -> Variable:
        """A value computed at trace time from constants (no source, no guard)."""
        ...

    def speculate_getattr(self, obj: Variable, name: str) -> Variable: ...

    def inline_call(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        bound: dict[str, Variable],
        *,
        closure: Any,
        fn_source: Source | None,
        fn_name: str,
    ) -> Variable: ...

    def zero_arg_super(self) -> Variable: ...

    def run_class_body(self, body: Any) -> dict[str, Variable]:
        """Trace a class body (a function made by MAKE_FUNCTION) and return the namespace it filled."""
        ...

    def frame_locals(self) -> dict[str, Variable]:
        """The frame's variables as `locals()` gives them."""
        ...

    def store_attr(self, obj: Variable, name: str, value: Variable, generic: bool = False) -> None:
        """obj.name = value; `generic`: as object.__setattr__ does it (the class's own __setattr__ asked)."""
        ...


class GuardScope(Protocol):
    """The guard program being built (guard_program.ProgramBuilder), as a source loads its value there: each
    method loads a value into a register, once per source, and returns the register."""

    def __call__(self, source: Source) -> int:
        """The register of another source (loaded there first if it is not yet)."""
        ...

    def argument(self, local_name: str) -> int: ...

    def closure_cell(self, var_name: str) -> int:
        """The contents of a free variable of the captured function (or of a continuation's cell parameter)."""
        ...

    def globals_dict(self) -> int: ...

    def const(self, value: Any) -> int: ...

    def attr(self, base: Source, name: str, generic: bool = False) -> int:
        """base.name; with `generic`, object.__getattribute__(base, name)."""
        ...

    def item(self, base: Source, key: Any) -> int: ...

    def call(self, base: Source, fn: Callable[..., Any], *args: Any) -> int:
        """fn(base, *args)."""
        ...


class Emitter(Protocol):
    """The code generator (codegen.PyCodegen), as sources and value kinds use it to rebuild a value."""

    cell_names: frozenset[str]  # the frame's cellvars (arguments among them are cells)

    def emit(self, opname: str, arg: Any = ...) -> None: ...

    def emit_const(self, value: Any) -> None: ...

    def shared(self, key: str, emit: Callable[[], None]) -> None:
        """Emit `emit`'s load, made once where loads are shared (a graph's inputs)."""

    def call(self, nargs: int, kw_names: tuple[str, ...] = ()) -> None: ...

    def load(self, var: Variable) -> None:
        """Leave var's real value on the stack: a graph output, reloaded from its source, or rebuilt."""
        ...

    def build_fresh(self, var: Variable) -> None:
        """Make var anew from its parts (ignoring its source); a mutable one is made once."""
        ...

    def new_temp(self) -> str: ...

    def load_source(self, var: Variable) -> None:
        """var reloaded from its source (from where it was pinned before replayed writes)."""
        ...

    def store_temp(self, produce: Callable[[], None]) -> str: ...

    def frame_cell_name(self, cell: Any) -> str | None:
        """The name of a trace Cell in the frame being generated, if it is one of that frame's own cells."""
        ...
