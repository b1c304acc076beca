"""The errors framejit raises; every one is a FramejitError."""
from __future__ import annotations


class FramejitError(RuntimeError):
    """Base of every framejit error."""


class Unsupported(FramejitError):
    """The trace met something it cannot put in a graph.

    `code` is a short machine-readable reason code (e.g. "tensor_branch"),
    `user_stack` the user frames (traceback.FrameSummary) where it happened.
    """

    def __init__(self, msg: str, *, code: str = "unsupported", user_stack: list | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.code = code
        self.user_stack = list(user_stack or [])
        self.break_index: int | None = None  # index of the captured frame's instruction that failed

    def __str__(self) -> str:
        text = self.msg if not self.user_stack else \
            self.msg + "\n\nfrom user code:\n" + format_user_stack(self.user_stack)
        if getattr(self, "fullgraph_hint", False):
            text += ("\n\nTo run this part as Python instead (a graph break), compile without "
                     "fullgraph=True / nopython=True.")
        return text


class UserError(Unsupported):
    """Code framejit will not capture by design (e.g. data-dependent control flow under fullgraph)."""


class BackendCompilerFailed(FramejitError):
    """A backend raised while compiling a graph; the backend's exception is chained."""

    def __init__(self, backend_name: str, inner: BaseException) -> None:
        super().__init__(f"backend {backend_name!r} raised {type(inner).__name__}: {inner}")
        self.backend_name = backend_name
        self.inner_exception = inner


class CacheLimitExceeded(FramejitError):
    """A code object recompiled more than config.cache_size_limit times."""


class InternalError(FramejitError):
    """A bug in framejit met while tracing; the frame runs as plain Python instead."""


def format_user_stack(stack: list) -> str:
    lines = []
    for fs in stack:
        lines.append(f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"    {fs.line.strip()}")
    return "\n".join(lines)


_ADVICE = {
    "data_dependent": "The value of a tensor is needed as a Python value here; keep the computation in tensor "
                      "ops, or move it out of the compiled function.",
    "builtin_io": "Move the call out of the compiled function, or wrap the code doing it with framejit.disable.",
    "opaque_call": "framejit only traces Python code and torch ops; move the call out, wrap it with "
                   "framejit.disable, or use framejit.allow_in_graph if it only does tensor ops.",
    "disallowed": "The function is marked disallow_in_graph or framejit.disable; call it outside the compiled "
                  "function.",
    "skipped_file": "framejit does not trace into this library's code; call it outside the compiled function, "
                    "or use framejit.allow_in_graph if it only does tensor ops.",
}
_CONTROL_FLOW = ("Dynamic control flow is not supported at the moment. Please use torch.cond to explicitly "
                 "capture the control flow, or compute the condition outside the compiled function.")


def fullgraph_error(e: Unsupported) -> Unsupported:
    """The error `fullgraph=True` / `nopython=True` raises at the first graph break."""
    advice = _ADVICE.get(e.code, "Rewrite this code, or compile without fullgraph=True so that framejit "
                                 "breaks the graph here and runs this part as Python.")
    if e.code == "tensor_branch":
        err: Unsupported = UserError(f"{_CONTROL_FLOW}\n(graph break reason: {e.msg})", code=e.code,
                                     user_stack=e.user_stack)
    else:
        err = Unsupported(f"{e.msg}\n{advice}", code=e.code, user_stack=e.user_stack)
    err.fullgraph_hint = True
    return err
