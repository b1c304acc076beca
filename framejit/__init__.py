"""framejit: a PEP 523 JIT that captures PyTorch programs into FX graphs and compiles them.

See docs/api.md for the contract: optimize / compile / compile_in_place / run / disable / reset, graph_break /
is_compiling / set_stance / substitute_in_graph, explain / export, backends, config, exc, testing, and compiler
(torch.compiler's names).
"""

from framejit import codeobj as _codeobj  # noqa: F401  (checks the Python version first)
from framejit import backends, compiler, config, exc, logs, testing
from framejit import distributed as _distributed  # noqa: F401  (torch.distributed's collectives traced)
from framejit.api import (
    OptimizedModule,
    compile,
    compile_in_place,
    disable,
    optimize,
    optimize_assert,
    reset,
    run,
)
from framejit.backends import list_backends, lookup_backend, register_backend
from framejit.explain import explain
from framejit.export import export
from framejit.markers import graph_break, is_compiling
from framejit.policy import allow_in_graph, assume_constant_result, disallow_in_graph, substitute_in_graph
from framejit.portable import save_onnx, save_torchscript
from framejit.shapes import Dim, mark_dynamic, mark_static, mark_unbacked, maybe_mark_dynamic
from framejit.stance import set_stance

logs.sections()  # FRAMEJIT_LOGS naming a section that does not exist is an error, as TORCH_LOGS is for torch

__all__ = [
    "Dim",
    "OptimizedModule",
    "allow_in_graph",
    "assume_constant_result",
    "backends",
    "compile",
    "compile_in_place",
    "compiler",
    "config",
    "disable",
    "disallow_in_graph",
    "exc",
    "explain",
    "export",
    "graph_break",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "mark_unbacked",
    "maybe_mark_dynamic",
    "optimize",
    "optimize_assert",
    "register_backend",
    "reset",
    "run",
    "save_onnx",
    "save_torchscript",
    "set_stance",
    "substitute_in_graph",
    "testing",
]
