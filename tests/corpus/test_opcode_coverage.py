"""Capture corpus: the corpus as a whole: its size, and every opcode in its
programs has a handler (or is a known exception-path-only opcode)."""

import dis
import importlib
import os
import pkgutil
import types

import torch.nn as nn

from tests import corpus
from tests.corpus.harness import _is_user_object, clone_keeping_types, is_corpus_module

CORPUS_DIR = os.path.dirname(__file__)


def _corpus_files():
    """Every file of the corpus (tests/corpus/test_*.py) that registers programs."""
    names = sorted(m.name for m in pkgutil.iter_modules(corpus.__path__) if m.name.startswith("test_"))
    modules = [importlib.import_module(f"{corpus.__name__}.{name}") for name in names]
    return [m for m in modules if hasattr(m, "CASES")]


CASES = [c for m in _corpus_files() for c in m.CASES]
# programs outside CASES, and the harness' copying code: the walk reached it through the programs'
# globals while the corpus was one file (`x.clone()` names the global `clone` it had then)
EXTRA_PROGRAMS = [fn for m in _corpus_files() for fn in getattr(m, "EXTRA_PROGRAMS", ())] + [clone_keeping_types]
assert len({fn.__name__ for fn, *_ in CASES}) == len(CASES), "program names must be unique"


def test_corpus_size():
    assert len(CASES) >= 160


# ---------------------------------------------------------------------------------------------
# every opcode in the corpus has a handler (or is a known exception-path-only opcode)
# ---------------------------------------------------------------------------------------------

# Opcodes that appear in the corpus' bytecode without a handler, and why that is fine.
KNOWN_UNSUPPORTED = {}


def _corpus_code_objects():
    """Code objects of every program, of the functions and class methods (of the corpus' files) they
    reach through their globals, closures and arguments, and of everything nested in them."""
    codes = {}
    seen_objects = set()

    def walk_code(code):
        if code in codes:
            return
        codes[code] = None
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk_code(const)

    def walk_object(obj, f_globals=None):
        if id(obj) in seen_objects:
            return
        seen_objects.add(id(obj))
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            obj = obj.fget
        if isinstance(obj, types.FunctionType):
            if os.path.dirname(obj.__code__.co_filename) != CORPUS_DIR:
                return
            walk_code(obj.__code__)
            names = set()
            stack = [obj.__code__]
            while stack:
                code = stack.pop()
                names.update(code.co_names)
                stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in names:
                if name in obj.__globals__:
                    walk_object(obj.__globals__[name])
            for cell in obj.__closure__ or ():
                try:
                    walk_object(cell.cell_contents)
                except ValueError:
                    pass
        elif isinstance(obj, type):
            if not is_corpus_module(obj.__module__):
                return
            for klass in obj.__mro__:
                if is_corpus_module(klass.__module__):
                    for attr in vars(klass).values():
                        walk_object(attr)
        elif isinstance(obj, nn.Module):
            for sub in obj.modules():
                walk_object(type(sub))
        elif _is_user_object(obj):
            walk_object(type(obj))
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk_object(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                walk_object(item)

    for fn, args, kwargs, _, _ in CASES:
        walk_object(fn)
        walk_object(args)
        walk_object(kwargs)
    for extra in EXTRA_PROGRAMS:
        walk_object(extra)
    return list(codes)


def test_every_corpus_opcode_has_a_handler():
    from framejit.trace.translator import OPCODE_HANDLERS

    codes = _corpus_code_objects()
    assert len(codes) >= len(CASES)
    met = {}
    for code in codes:
        for inst in dis.get_instructions(code):
            met.setdefault(inst.opname, code.co_qualname)
    missing = {
        op: where for op, where in met.items() if OPCODE_HANDLERS[dis.opmap[op]] is None and op not in KNOWN_UNSUPPORTED
    }
    assert not missing, f"opcodes without a handler (opcode: first code object using it): {missing}"
    # the allowlist holds only opcodes that really lack a handler
    for op in KNOWN_UNSUPPORTED:
        assert OPCODE_HANDLERS[dis.opmap[op]] is None, f"{op} now has a handler: remove it from KNOWN_UNSUPPORTED"
