"""Graph breaks: the corpus: a brk() before every statement of every statement list of the
functions in break_corpus.py.

How the tests compare with eager, and how graph counts are derived: see harness.py."""

from __future__ import annotations

import ast
import dis
import inspect
import linecache
import textwrap
import types

import pytest
import torch

import framejit
from framejit import break_resume, eval_frame
from framejit._C import _hook
from framejit.testing import CompileCounter

from tests.graph_breaks import break_corpus
from tests.graph_breaks.harness import no_internal_errors, opaque, run_catching
from tests.helpers import assert_equal, clone


# ---------------------------------------------------------------------------------------------
# the corpus: a brk() before every statement of every statement list
# ---------------------------------------------------------------------------------------------

CORPUS_HITS: list = []


@opaque
def corpus_brk():
    CORPUS_HITS.append(1)


def _statement_lists(tree):
    """Every statement list in the function, in a fixed walk order."""
    lists = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                lists.append(value)
    return lists


def _variants(fn):
    source = textwrap.dedent(inspect.getsource(fn))
    count = sum(len(lst) for lst in _statement_lists(ast.parse(source)))
    for k in range(count):
        tree = ast.parse(source)
        seen = 0
        for lst in _statement_lists(tree):
            if seen + len(lst) > k:
                lst.insert(k - seen, ast.Expr(ast.Call(ast.Name("brk", ast.Load()), [], [])))
                break
            seen += len(lst)
        ast.fix_missing_locations(tree)
        yield f"{fn.__name__}-{k}", ast.unparse(tree)


CORPUS_VARIANTS = [v for fn in break_corpus.CORPUS for v in _variants(fn)]
CORPUS_INPUTS = [
    (torch.tensor([0.5, 1.0, 1.5, 2.0]), 3),
    (torch.tensor([-1.0, -2.0, 0.5, -0.25]), 1),
    (torch.tensor([0.25, -0.5, 0.75, -1.0], requires_grad=True), 0),
    (torch.tensor([0.5, 1.0, 1.5, 2.0]), 2),
]


def _load_variant(name, source):
    filename = f"/framejit_corpus/{name}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "brk": corpus_brk, "__name__": f"framejit_corpus_{name}"}
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace[name.rsplit("-", 1)[0]]
    brk_line = 1 + [line.strip() for line in source.splitlines()].index("brk()")
    return fn, filename, brk_line


def _code_with_line(code, line):
    """The code object (fn's own or a nested one) whose own instructions include `line`."""
    if any(ins.positions.lineno == line for ins in dis.get_instructions(code) if ins.positions):
        return code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found = _code_with_line(const, line)
            if found is not None:
                return found
    return None


def _run_counting(f, args):
    CORPUS_HITS.clear()
    outcome = run_catching(f, clone(args), {})
    return outcome, len(CORPUS_HITS), torch.is_grad_enabled()


@pytest.mark.parametrize("name, source", CORPUS_VARIANTS, ids=[n for n, _ in CORPUS_VARIANTS])
def test_corpus(name, source):
    """Eager and compiled agree (results, exceptions, number of brk() calls, grad mode after), and
    explain() reports a graph break whenever brk() ran."""
    fn, filename, brk_line = _load_variant(name, source)
    for args in CORPUS_INPUTS:  # explain first, on a fresh cache (conftest resets framejit)
        CORPUS_HITS.clear()
        out = framejit.explain(fn)(*clone(args))
        if CORPUS_HITS:
            assert out.graph_break_count >= 1, f"brk() ran {len(CORPUS_HITS)} times"
    compiled = framejit.optimize(CompileCounter())(fn)
    for args in CORPUS_INPUTS + CORPUS_INPUTS[:1]:  # the last one: a second call with the same guards
        (e_kind, e_val), e_hits, e_grad = _run_counting(fn, args)
        with no_internal_errors():
            (c_kind, c_val), c_hits, c_grad = _run_counting(compiled, args)
        assert (c_kind, c_hits, c_grad) == (e_kind, e_hits, e_grad), (e_val, c_val)
        if e_kind == "ok":
            assert_equal(c_val, e_val)
        else:
            assert type(c_val) is type(e_val) and str(c_val) == str(e_val)


@pytest.mark.parametrize("name, source", CORPUS_VARIANTS, ids=[n for n, _ in CORPUS_VARIANTS])
def test_corpus_continuation_captured(name, source):
    """The break is made at brk() itself (explain names its line), and the continuation that
    starts right after the call is a frame the hook captured (compiled, or found nothing to
    compile), not one given up to run as Python."""
    fn, filename, brk_line = _load_variant(name, source)
    ran = False
    for args in CORPUS_INPUTS:
        CORPUS_HITS.clear()
        out = framejit.explain(fn)(*clone(args))
        if CORPUS_HITS:
            ran = True
            assert any(
                r.user_stack and r.user_stack[-1].filename == filename and r.user_stack[-1].lineno == brk_line
                for r in out.break_reasons
            ), [(r.reason, r.user_stack[-1:]) for r in out.break_reasons]
    if not ran:
        pytest.skip("brk() is not reached by these inputs")
    framejit.reset()
    compiled = framejit.optimize(CompileCounter())(fn)
    for args in CORPUS_INPUTS:
        run_catching(compiled, clone(args), {})
    code = _code_with_line(fn.__code__, brk_line)
    instructions = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    calls = [k for k, i in enumerate(instructions) if i.opname == "CALL" and i.positions.lineno == brk_line]
    after = instructions[calls[0] + 1].offset
    resumes = [c for (offset, _, _), c in break_resume._RESUME_CODES.get(code, {}).items() if offset == after]
    assert resumes, f"no continuation was made after brk() (offset {after}); the frame ran as Python"
    for resume in resumes:
        # a continuation inside a loop is compiled once per loop position (the rest of the loop is
        # unrolled), so a long loop may reach cache_size_limit: it was still captured if it has entries
        assert (
            resume not in eval_frame._fallback or isinstance(_hook.get_extra(resume), list) and _hook.get_extra(resume)
        ), f"{resume.co_name} was given up and ran as Python"
        assert _hook.get_extra(resume) is not None, f"{resume.co_name} was never seen by the hook"
