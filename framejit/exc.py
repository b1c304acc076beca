"""The errors framejit raises (every one a FramejitError), and why a trace stops: `BreakCode`, `unsupported()`."""

from __future__ import annotations

import dataclasses
import enum
from typing import NoReturn

_REWRITE = (
    "Rewrite this code, or compile without fullgraph=True so that framejit breaks the graph here and "
    "runs this part as Python."
)


class BreakCode(enum.StrEnum):
    """Why a trace stopped (a graph break). Each code carries the advice a fullgraph error gives."""

    advice: str

    def __new__(cls, value: str, advice: str = _REWRITE) -> "BreakCode":
        member = str.__new__(cls, value)
        member._value_ = value
        member.advice = advice
        return member

    # the value of a tensor or of Python state is needed at trace time
    DATA_DEPENDENT = (
        "data_dependent",
        "The value of a tensor is needed as a Python value here; keep the "
        "computation in tensor ops, or move it out of the compiled function.",
    )
    TENSOR_BRANCH = (
        "tensor_branch",
        "Dynamic control flow is not supported at the moment. Please use torch.cond "
        "to explicitly capture the control flow, or compute the condition outside the compiled "
        "function.",
    )
    # calls framejit does not trace into
    BUILTIN_IO = (
        "builtin_io",
        "Move the call out of the compiled function, or wrap the code doing it with framejit.disable.",
    )
    OPAQUE_CALL = (
        "opaque_call",
        "framejit only traces Python code and torch ops; move the call out, wrap it with "
        "framejit.disable, or use framejit.allow_in_graph if it only does tensor ops.",
    )
    DISALLOWED = (
        "disallowed",
        "The function is marked disallow_in_graph or framejit.disable; call it outside the compiled function.",
    )
    USER_BREAK = (
        "user_break",
        "The code asks for a graph break here (framejit.graph_break(), or TorchDynamo's graph_break()); remove "
        "the call to capture one graph.",
    )
    SKIPPED_FILE = (
        "skipped_file",
        "framejit does not trace into this library's code; call it outside the "
        "compiled function, or use framejit.allow_in_graph if it only does tensor ops.",
    )
    DISTRIBUTED = (
        "distributed",
        "This torch.distributed call has no form in the graph (the reason says which); it runs as Python "
        "on each rank, between graphs. Collectives called synchronously on tensors are traced.",
    )
    DYNAMIC_CONSTRAINT = (
        "dynamic_constraint",
        "Use framejit.maybe_mark_dynamic for a size the code may need as a "
        "number, or keep the size in tensor ops (no int(), range() or Python branches on it).",
    )
    GENERATOR = "generator"
    INLINE_DEPTH = ("inline_depth", "Raise framejit.config.inline_depth_limit, or flatten the recursion.")
    BUDGET = (
        "budget",
        "A long Python loop is unrolled into the graph; move it out of the compiled function, or "
        "raise framejit.config.instruction_budget.",
    )
    # Python that the trace does not model
    OPCODE = "opcode"
    PYTHON_ERROR = "python_error"
    UNSUPPORTED = "unsupported"
    CALL = "call"
    BAD_CALL = "bad_call"
    BUILTIN = "builtin"
    CONSTANT_ERROR = "constant_error"
    OPERATOR = "operator"
    IDENTITY = "identity"
    GETATTR = "getattr"
    MISSING_ATTR = "missing_attr"
    GETITEM = "getitem"
    INDEX = "index"
    ITER = "iter"
    UNPACK = "unpack"
    TRUTH = "truth"
    NOT_CONSTANT = "not_constant"
    CONTAINER = "container"
    CONTAINER_METHOD = "container_method"
    DICT_KEY = "dict_key"
    OBJECT = "object"
    UNBOUND = "unbound"
    GLOBAL = "global"
    SUPER = "super"
    CLOSURE_WRITE = "closure_write"
    ASSERT = "assert"
    IMPORT = "import"
    EXCEPTION = "exception"
    CONTEXT_MANAGER = "context_manager"
    # tensors and graph ops
    GRAPH_ARG = "graph_arg"
    TENSOR_ATTR = "tensor_attr"
    TENSOR_CONSTANT = (
        "tensor_constant",
        "Pass the tensor to the compiled function as an argument, or make it an attribute of a module it calls.",
    )
    TORCH_STATEFUL = "torch_stateful"
    TORCH_FUNCTION = "torch_function"
    TENSOR_SUBCLASS = (
        "tensor_subclass",
        "Wrapper tensor subclasses are traced when their ops dispatch through __torch_dispatch__ alone (DTensor, "
        "TwoTensor), with DTensor's to_local/redistribute/full_tensor/from_local; other attributes of torch's "
        "subclasses, and subclasses with a __torch_function__ of their own, run as Python, between graphs.",
    )
    NON_TENSOR_OP = "non_tensor_op"
    GRAD_MODE = "grad_mode"
    AUTOGRAD_FUNCTION = (
        "autograd_function",
        "The forward of this torch.autograd.Function must be traceable: tensor ops on tensor and constant "
        "arguments (no .item(), .tolist(), numpy), returning tensors and constants; move the rest out of it, or "
        "call the Function outside the compiled function.",
    )
    AUTOCAST = "autocast"
    FAKE_ERROR = "fake_error"
    OP_ERROR = "op_error"
    ALIASED_WRITE = "aliased_write"
    OP_RESULT = "op_result"
    NUMPY = (
        "numpy",
        "numpy code on tensors is traced through torch._numpy; move this numpy call out of the compiled function, "
        "or write it with torch ops.",
    )
    # modules
    MODULE_CALL = "module_call"
    MODULE_HOOKS = "module_hooks"
    MODULE_MUTATION = "module_mutation"
    # after the graph: rebuilding values, replaying writes, resuming
    SIDE_EFFECT = "side_effect"
    RECONSTRUCT = "reconstruct"
    BREAK_UNSUPPORTED = "break_unsupported"
    EXPORT = "export"


def unsupported(msg: str, code: BreakCode = BreakCode.UNSUPPORTED) -> NoReturn:
    """Stop the trace with a reason; the translator attaches the user's frame."""
    raise Unsupported(msg, code=code)


@dataclasses.dataclass(frozen=True)
class BreakPoint:
    """Where a root trace stops for a graph break: before instruction `index`, the time it runs with `budget`
    instructions left after it (None: the first time); `raise_instead`, what eager raises there (the code then
    raises it), or None."""

    index: int
    budget: int | None = None
    raise_instead: BaseException | None = None


class FramejitError(RuntimeError):
    """Base of every framejit error."""


class Unsupported(FramejitError):
    """The trace met something it cannot put in a graph.

    `code` says why (a BreakCode, e.g. BreakCode.TENSOR_BRANCH; it compares equal to its text),
    `user_stack` the user frames (traceback.FrameSummary) where it happened.
    """

    def __init__(self, msg: str, *, code: BreakCode = BreakCode.UNSUPPORTED, user_stack: list | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.code = code
        self.user_stack = list(user_stack or [])
        self.break_index: int | None = None  # index of the captured frame's instruction that failed
        self.break_budget: int | None = None  # the trace's instruction budget left after it started it
        # what eager raises at that instruction where running it again at the break would not (see OutputGraph)
        self.raise_instead: BaseException | None = None
        # no break within the frame that met it can keep Python's behaviour: that frame runs as Python (a frame
        # that called it inline breaks at the call instead)
        self.frame_runs_as_python = False
        # an argument of the captured frame the trace could not read (its name): the trace starts over with it
        # unread (variables.base.UnreadableArg), rather than keep what reading it half made
        self.unreadable_arg: str | None = None

    def break_point(self) -> "BreakPoint":
        """Where the trace that met this stops when it runs again as a graph break."""
        assert self.break_index is not None, "not met in the captured frame"
        # an error eager raises at the break instruction itself (not inside a function it calls, whose frame runs
        # as Python and is captured again) is raised there, so the trace stops the time it failed, not the first
        # time a loop ran that instruction
        raise_instead = self.raise_instead if len(self.user_stack) == 1 else None
        return BreakPoint(self.break_index, self.break_budget if raise_instead is not None else None, raise_instead)

    def __str__(self) -> str:
        text = (
            self.msg if not self.user_stack else self.msg + "\n\nfrom user code:\n" + format_user_stack(self.user_stack)
        )
        if getattr(self, "fullgraph_hint", False):
            text += (
                "\n\nTo run this part as Python instead (a graph break), compile without "
                "fullgraph=True / nopython=True."
            )
        return text


class ObservedException(Unsupported):
    """A Python exception the traced code raised and could catch (`exc`, a real instance): an inlined frame whose
    try block covers the raising instruction jumps to its handler; otherwise it is a graph break like any other."""

    def __init__(
        self, msg: str, exc: BaseException, *, code: BreakCode = BreakCode.EXCEPTION, reraised: bool = False
    ) -> None:
        super().__init__(msg, code=code)
        self.exc = exc
        self.chained = reraised  # its __context__ is set (a re-raise keeps the one it has)


def raise_observed(exc: BaseException, code: BreakCode = BreakCode.EXCEPTION, *, reraised: bool = False) -> NoReturn:
    """The traced code raises `exc` here (a missing key, an index out of range, a `raise` statement); `reraised`:
    a bare `raise` or RERAISE, which leave its __context__ as it is."""
    raise ObservedException(f"{type(exc).__name__}: {exc}", exc, code=code, reraised=reraised)


class UserError(Unsupported):
    """Code framejit will not capture by design (e.g. data-dependent control flow under fullgraph)."""


class BackendCompilerFailed(FramejitError):
    """A backend raised while compiling a graph (the backend's exception is chained), or returned something
    that cannot run it (`message` says what)."""

    def __init__(self, backend_name: str, inner: BaseException, message: str | None = None) -> None:
        super().__init__(message or f"backend {backend_name!r} raised {type(inner).__name__}: {inner}")
        self.backend_name = backend_name
        self.inner_exception = inner


class BackendOutputError(FramejitError):
    """A compiled graph returned something other than its graph's outputs (a tuple or list of as many values
    as `gm.forward` returns)."""


class CacheLimitExceeded(FramejitError):
    """A code object recompiled more than config.cache_size_limit times."""


class RecompileError(FramejitError):
    """A frame would be recompiled while framejit.set_stance("fail_on_recompile") is in force."""


class InternalError(FramejitError):
    """A bug in framejit met while tracing; the frame runs as plain Python instead."""


class FramejitWarning(UserWarning):
    """What framejit tells a user without stopping the program: filter it as any warning."""


class BackendFallbackWarning(FramejitWarning):
    """The backend asked for did not compile all of a graph: part of it runs as its torch ops (the message says
    which frame, which backend and why). `framejit.config.warn_on_fallback = False` silences it."""


class NothingCompiledWarning(FramejitWarning):
    """A function or module handed to framejit compiled no graph in its own frame (the message says why)."""


def format_user_stack(stack: list) -> str:
    lines = []
    for fs in stack:
        lines.append(f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"    {fs.line.strip()}")
    return "\n".join(lines)


def fullgraph_error(e: Unsupported) -> Unsupported:
    """The error `fullgraph=True` / `nopython=True` raises at the first graph break."""
    code = BreakCode(e.code)
    if code is BreakCode.TENSOR_BRANCH:
        err: Unsupported = UserError(
            f"{code.advice}\n(graph break reason: {e.msg})", code=code, user_stack=e.user_stack
        )
    else:
        err = Unsupported(f"{e.msg}\n{code.advice}", code=code, user_stack=e.user_stack)
    err.fullgraph_hint = True
    return err
