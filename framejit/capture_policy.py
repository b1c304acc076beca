"""Which code framejit captures (as a frame) or traces into (a call): user code, the standard library but for a
short deny list, and torch's Python layers over its ops (modules, optimizers); not torch's internals nor its own."""

from __future__ import annotations

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
# framejit's polyfills (torch.distributed's collectives): traced in place of what they stand for, never captured
_TRACED_OWN_FILES = frozenset({os.path.join(_FRAMEJIT_DIR, "distributed", "collectives.py")})
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
TORCH_DISTRIBUTED_DIR = os.path.join(_TORCH_DIR, "distributed") + os.sep
# torch's pure-Python layers over its ops, traced like user code: modules, their utilities, optimizers (a compiled
# `opt.step` is one graph) and distributions. Frames of the first three are captured only when handed to framejit.
_TORCH_INLINED_DIRS = tuple(
    os.path.join(_TORCH_DIR, *sub) + os.sep for sub in (("nn", "modules"), ("nn", "utils"), ("backends", "mha"))
)
_TORCH_TRACED_DIRS = _TORCH_INLINED_DIRS + tuple(
    os.path.join(_TORCH_DIR, sub) + os.sep for sub in ("optim", "distributions")
)
# torch files traced when user code calls into them (never captured as frames): the wrapper that
# `@torch.no_grad()` / `@torch.enable_grad()` put around a function enters the mode and calls it; tensor
# parallelism's input and output functions (DTensor.from_local, redistribute, to_local around a module's call);
# torch.utils._ordered_set.OrderedSet, a pure-Python set over a dict that torch's own Python code builds
_TORCH_TRACED_FILES = frozenset(
    [os.path.join(_TORCH_DIR, "utils", name) for name in ("_contextlib.py", "_foreach_utils.py", "_ordered_set.py")]
    + [os.path.join(_TORCH_DIR, "distributed", "tensor", "parallel", "style.py")]
)
# torch functions traced when user code calls them, in files that are not: the wrappers `torch.amp.custom_fwd` and
# `custom_bwd` put around an autograd.Function's forward and backward (they set and read ctx attributes, cast the
# inputs and enter autocast), the one `once_differentiable` puts around a backward (it runs it under no_grad), and
# the module hooks `distribute_module` registers (lambdas calling tensor parallelism's input and output functions)
_TORCH_TRACED_FUNCTIONS = frozenset(
    [(os.path.join(_TORCH_DIR, "amp", "autocast_mode.py"), n) for n in ("decorate_fwd", "decorate_bwd", "_cast")]
    + [(os.path.join(_TORCH_DIR, "autograd", "function.py"), "wrapper")]
    + [(os.path.join(_TORCH_DIR, "distributed", "tensor", "_api.py"), "<lambda>")]
)
# TorchDynamo's own files: a few of its functions reach traced code (torch's optimizers call its graph_break(); once
# torch.compile ran, it wraps nn.Module.__init__). They are recognised by file and name, never imported.
_TORCHDYNAMO_DIR = os.path.join(_TORCH_DIR, "_dynamo") + os.sep
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
_GENERATED = ("<eval_with_key", "<framejit", "<torch_package")

# The standard library is traced when user code calls it (typing.cast, functools.wraps, unittest's assertions,
# dataclasses, enum...), but for these top-level modules, where tracing is wrong or cannot help; a call into one is
# a graph break that names it and says why. Its frames are never captured on their own.
_STDLIB_NOT_TRACED_WHY = (
    (
        "threading _threading_local queue concurrent multiprocessing asyncio selectors",
        "threads, locks and queues: their state is shared with code outside the trace",
    ),
    (
        "os posixpath genericpath ntpath stat io _pyio shutil tempfile pathlib glob socket subprocess signal site "
        "sysconfig platform locale codecs encodings",
        "the operating system, files and the interpreter's setup",
    ),
    ("importlib pkgutil zipimport runpy", "importing modules"),
    ("logging", "logging: records go to handlers, which write outside the trace"),
    ("warnings", "warnings: a registry and filters shared with code outside the trace"),
    ("re sre_compile sre_parse sre_constants fnmatch", "regular expressions: a compile cache, matched in C"),
    ("random", "the interpreter's global random generator: a draw is a side effect the graph would not replay"),
    ("abc _py_abc weakref _weakrefset copyreg gc", "class registries and object lifetimes (weak references)"),
    ("inspect dis opcode ast linecache tokenize traceback", "reading source, code objects and frames"),
    ("pdb bdb cProfile profile trace timeit", "debuggers and profilers: they hook frames themselves"),
)
_STDLIB_NOT_TRACED = {module: why for modules, why in _STDLIB_NOT_TRACED_WHY for module in modules.split()}


def _stdlib_module(filename: str) -> str | None:
    """The top-level standard-library module a code file belongs to, or None if it is not the standard library."""
    if filename.startswith("<frozen "):
        return filename[len("<frozen ") : -1].split(".")[0]
    if not filename.startswith(_STDLIB_DIRS) or "-packages" + os.sep in filename:
        return None
    first = os.path.relpath(filename, next(d for d in _STDLIB_DIRS if filename.startswith(d))).split(os.sep)[0]
    return first.removesuffix(".py")


# code objects captured even though their file is skipped (nn.Linear.forward of an optimized nn.Linear), each
# for as long as the object that asked for it lives
_forced: "dict[types.CodeType, weakref.WeakSet[Any]]" = {}


def force_capture(code: types.CodeType, owner: Any) -> None:
    """Capture frames of `code`, refused by its file, while `owner` (the OptimizedModule whose forward it is)
    lives."""
    if _refusal(code) is not None:
        _forced.setdefault(code, weakref.WeakSet()).add(owner)


def _skipped_file(filename: str) -> str | None:
    """Why calls into this file are not traced, or None."""
    if filename.startswith(_FRAMEJIT_DIR) and filename not in _USER_STYLE_FILES:
        return "framejit's own code"
    if filename.startswith(_TORCH_DIR) and not filename.startswith(_TORCH_TRACED_DIRS):
        return "torch internals"
    module = _stdlib_module(filename)
    if module is not None:
        reason = _STDLIB_NOT_TRACED.get(module)
        return f"the standard library's {module} ({reason})" if reason else None
    if filename.startswith(_THIRD_PARTY):
        return "a library framejit does not trace"
    if filename.startswith(_GENERATED) or "torchinductor_" in filename:
        return f"generated code ({filename})"
    return None


def _generated_by_stdlib(code: types.CodeType) -> bool:
    """Code the standard library writes as text and compiles (file "<string>"): a namedtuple's `__new__` (a
    lambda calling `_tuple_new`) and a dataclass's methods (made inside `__create_fn__`). Traced where code calls
    them; as frames of their own they are not user code (tiny graphs, recompiles)."""
    if code.co_filename != "<string>":
        return False
    return code.co_qualname.startswith("__create_fn__.<locals>.") or (
        code.co_name == "<lambda>" and code.co_names == ("_tuple_new",)
    )


def capture_refusal(code: types.CodeType) -> str | None:
    """Why a frame of `code` should run untouched, or None to capture it."""
    return None if _forced.get(code) else _refusal(code)


def _refusal(code: types.CodeType) -> str | None:
    if not code.co_flags & inspect.CO_OPTIMIZED:
        return "module or class body"
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return "generator or coroutine"
    if code.co_filename.startswith(_TORCH_INLINED_DIRS):
        return "torch internals (traced when called from user code)"
    if _stdlib_module(code.co_filename) is not None or _generated_by_stdlib(code):
        return "the standard library (traced when called from user code)"
    return _skipped_file(code.co_filename)


def inline_refusal(code: types.CodeType) -> str | None:
    """Why a call to `code` cannot be traced into, or None."""
    if (
        code.co_filename in _TORCH_TRACED_FILES
        or code.co_filename in _TRACED_OWN_FILES
        or (code.co_filename, code.co_name) in _TORCH_TRACED_FUNCTIONS
    ):
        return None
    return _skipped_file(code.co_filename)


def is_torchdynamo_function(fn: Any, name: str) -> bool:
    """Whether `fn` is TorchDynamo's Python function called `name` (by its code's file and name)."""
    if not isinstance(fn, types.FunctionType):  # (reading __code__ of anything else may run its __getattr__)
        return False
    code = fn.__code__
    return code.co_name == name and code.co_filename.startswith(_TORCHDYNAMO_DIR)
