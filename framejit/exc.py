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

    def __str__(self) -> str:
        if not self.user_stack:
            return self.msg
        return self.msg + "\n\nfrom user code:\n" + format_user_stack(self.user_stack)


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
