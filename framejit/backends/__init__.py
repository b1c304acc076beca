"""Backends: compilers that take a captured FX graph and its example inputs and return a callable."""
from framejit.backends import builtin as _builtin  # noqa: F401  (registers eager, debug, inductor)
from framejit.backends.registry import BACKENDS, list_backends, lookup_backend, register_backend

__all__ = ["BACKENDS", "list_backends", "lookup_backend", "register_backend"]
