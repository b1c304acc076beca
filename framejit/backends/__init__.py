"""Backends: compilers that take a captured FX graph and its example inputs and return a callable.

Importing this package registers the built-ins (eager, debug, aot_eager, inductor, ofi, onnxrt, cudagraphs,
tensorrt, tvm, ipex); each imports its heavy or optional packages only when it compiles a graph."""

from framejit.backends import aot as _aot  # noqa: F401  (each module registers its backends on import)
from framejit.backends import builtin as _builtin  # noqa: F401
from framejit.backends import cudagraphs as _cudagraphs  # noqa: F401
from framejit.backends import external as _external  # noqa: F401
from framejit.backends import inductor as _inductor  # noqa: F401
from framejit.backends import onnxrt as _onnxrt  # noqa: F401
from framejit.backends import torchscript as _torchscript  # noqa: F401
from framejit.backends.aot import aot_autograd, make_boxed_func
from framejit.backends.common import BackendUnavailable
from framejit.backends.registry import BACKENDS, list_backends, lookup_backend, register_backend

__all__ = [
    "BACKENDS",
    "BackendUnavailable",
    "aot_autograd",
    "list_backends",
    "lookup_backend",
    "make_boxed_func",
    "register_backend",
]
from framejit.backends import autotune as _autotune  # noqa: E402,F401  (autotune: registered last, it times the others)
