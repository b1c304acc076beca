"""Which code framejit captures (as a frame) or inlines (as a call): user code yes; stdlib, torch, framejit no."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import os
import sysconfig
import types
import weakref
from typing import Any

import torch

_FRAMEJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this file is in framejit/
# framejit's own example models (the demo, the bench suite): user-style code, captured like user code
_USER_STYLE_FILES = frozenset(
    os.path.join(_FRAMEJIT_DIR, *p) for p in (("demo.py",), ("bench", "models.py"), ("bench", "hf_models.py"))
)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
TORCH_DISTRIBUTED_DIR = os.path.join(_TORCH_DIR, "distributed") + os.sep
_TORCH_TRACED_DIRS = tuple(
    os.path.join(_TORCH_DIR, *sub) + os.sep for sub in (("nn", "modules"), ("nn", "utils"), ("backends", "mha"))
)
# torch files traced when user code calls into them (never captured as frames): the wrapper that
# `@torch.no_grad()` / `@torch.enable_grad()` put around a function enters the mode and calls it
_TORCH_TRACED_FILES = frozenset({os.path.join(_TORCH_DIR, "utils", "_contextlib.py")})
_STDLIB_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})


def _package_dir(name: str) -> str | None:
    """A package's directory, or a single-module library's file (typing_extensions.py)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    if spec.submodule_search_locations is None:
        return os.path.abspath(spec.origin)
    return os.path.dirname(os.path.abspath(spec.origin)) + os.sep


# Libraries that compilers and optimizers call into; never user model code.
_THIRD_PARTY = tuple(
    filter(
        None,
        map(
            _package_dir,
            (
                "numpy",
                "bytecode",
                "tabulate",
                "sympy",
                "filelock",
                "typing_extensions",
                "tqdm",
                "onnx",
                "onnxruntime",
                "triton",
                "jinja2",
                "networkx",
                "packaging",
                "fsspec",
                "mpmath",
            ),
        ),
    )
)

# Code torch and framejit generate (FX graphs, guards); other "<...>" files (exec'd user code) are captured.
_GENERATED = ("<frozen", "<eval_with_key", "<framejit", "<torch_package")

# Standard-library code that model code leans on, written in Python with no effects beyond its arguments:
# traced when user code calls it (Mapping.get / __contains__, dataclasses.fields, functools helpers), though
# never captured as a frame of its own.
_TRACED_STDLIB = frozenset(
    {"<frozen _collections_abc>", collections.__file__, dataclasses.__file__, functools.__file__, contextlib.__file__}
)  # nullcontext(), suppress()...

# code objects captured even though their file is skipped (nn.Linear.forward of an optimized nn.Linear), each
# for as long as the object that asked for it lives
_forced: "dict[types.CodeType, weakref.WeakSet[Any]]" = {}


def force_capture(code: types.CodeType, owner: Any) -> None:
    """Capture frames of `code`, refused by its file, while `owner` (the OptimizedModule whose forward it is)
    lives."""
    if _refusal(code) is not None:
        _forced.setdefault(code, weakref.WeakSet()).add(owner)


def _skipped_file(filename: str) -> str | None:
    if filename.startswith(_FRAMEJIT_DIR) and filename not in _USER_STYLE_FILES:
        return "framejit's own code"
    if filename.startswith(_TORCH_DIR) and not filename.startswith(_TORCH_TRACED_DIRS):
        return "torch internals"
    if filename.startswith(_STDLIB_DIRS) and "site-packages" not in filename:
        return "the standard library"
    if filename.startswith(_THIRD_PARTY):
        return "a library framejit does not trace"
    if filename.startswith(_GENERATED) or "torchinductor_" in filename:
        return f"generated code ({filename})"
    return None


def capture_refusal(code: types.CodeType) -> str | None:
    """Why a frame of `code` should run untouched, or None to capture it."""
    return None if _forced.get(code) else _refusal(code)


def _refusal(code: types.CodeType) -> str | None:
    if not code.co_flags & inspect.CO_OPTIMIZED:
        return "module or class body"
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return "generator or coroutine"
    if code.co_filename.startswith(_TORCH_TRACED_DIRS):
        return "torch internals (traced when called from user code)"
    return _skipped_file(code.co_filename)


def inline_refusal(code: types.CodeType) -> str | None:
    """Why a call to `code` cannot be traced into, or None."""
    if code.co_filename in _TRACED_STDLIB or code.co_filename in _TORCH_TRACED_FILES:
        return None
    return _skipped_file(code.co_filename)
