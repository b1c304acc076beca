"""The C extension: only the PEP 523 frame hook (framejit/_C/hook.c)."""

from framejit._C import _hook

__all__ = ["_hook"]
