"""framejit.compiler: torch.compiler's names for framejit's functions (aliases, the same objects), so code written
against torch.compiler moves to framejit by its import."""

from framejit import config
from framejit.api import compile, disable, reset
from framejit.backends import list_backends
from framejit.markers import is_compiling
from framejit.policy import allow_in_graph, assume_constant_result, substitute_in_graph
from framejit.stance import set_stance

is_dynamo_compiling = is_compiling  # torch's other name for it: framejit is the only compiler here

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "list_backends",
    "reset",
    "set_stance",
    "substitute_in_graph",
]
