"""pytest plugin of run_memcheck.py's ASan variant (`-p tests.memcheck.asan_plugin`): framejit's two C extensions
come from FRAMEJIT_ASAN_LIB (the AddressSanitizer build in a temporary directory) instead of the in-place build.

Loaded before any conftest, so before framejit: the modules are put in sys.modules under their own names, and
framejit's `from framejit._C import _hook` finds them there. Everything else (framejit's Python code, the tests)
is the working tree's."""

from __future__ import annotations

import glob
import importlib.util
import os
import sys

import torch  # noqa: F401  (_tensor_guard links against torch's libraries)

LIB = os.environ["FRAMEJIT_ASAN_LIB"]


def _load(name: str) -> None:
    (path,) = glob.glob(os.path.join(LIB, "framejit", "_C", f"{name}.*.so"))
    spec = importlib.util.spec_from_file_location(f"framejit._C.{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


assert "framejit._C._hook" not in sys.modules, "framejit was imported before the ASan plugin"
_load("_hook")
_load("_tensor_guard")
_load("_tensor_state")

import framejit.guard_program  # noqa: E402
import framejit.as_eager.rerun  # noqa: E402

for _module in (framejit._C._hook, framejit.guard_program._tensor_guard, framejit.as_eager.rerun._tensor_state):
    assert _module.__file__.startswith(LIB), f"{_module.__name__} is not the ASan build: {_module.__file__}"


def pytest_report_header(config):
    return f"framejit C extensions: the ASan build in {LIB}"
