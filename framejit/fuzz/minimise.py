"""Shrinking a failing program: delete statements (from any block; a block left empty becomes `pass`), unwrap
compound statements, drop whole helpers, classes and globals, and cut returned tuples down, keeping each change
only while the program still fails the same way (same outcome and kind), each candidate checked in a worker
subprocess. The result is written as a standalone repro file."""

from __future__ import annotations

import ast
import collections
import dataclasses
import os
import textwrap
import time
from typing import Callable, Iterator, Sequence

from framejit.fuzz.plan import drop_argument, simpler_plans
from framejit.fuzz.remote import Result, Worker, blank, signature

# module-level names a candidate cannot lose and still run
_KEEP = ("INPUTS", "TRAIN", "CALLS", "COMPILE", "Box", "program")


def _protected(stmt: ast.stmt, module_level: bool) -> bool:
    if not module_level:
        return False
    if isinstance(stmt, ast.Import):
        return any(alias.name == "torch" for alias in stmt.names)
    names = [t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)]
    return getattr(stmt, "name", None) in _KEEP or any(n in _KEEP for n in names)


def _bodies(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every statement list in the tree (module, function, class, if/else, loops, try parts and handlers,
    with), in ast.walk order."""
    out = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append((node, field))
    return out


def _slots(tree: ast.Module) -> list[tuple[ast.AST, str, int]]:
    """(owner, field, index) of every statement that may be removed."""
    slots = []
    for owner, field in _bodies(tree):
        for i, stmt in enumerate(getattr(owner, field)):
            counter = isinstance(owner, ast.While) and field == "body" and i == 0 and isinstance(stmt, ast.AugAssign)
            if not _protected(stmt, owner is tree) and not counter:  # without its counter step a while never ends
                slots.append((owner, field, i))
    return slots


def _changes_at(source: str, k: int) -> Iterator[str]:
    """Smaller programs by a change of the k-th removable statement: delete it, run a compound statement's body
    (or else) in its place, or return just one element of a returned tuple/list/dict."""
    for change in ("delete", "unwrap", "unwrap_else", "cut_return"):
        tree = ast.parse(source)
        owner, field, i = _slots(tree)[k]
        block = getattr(owner, field)
        stmt = block[i]
        if change == "delete":
            del block[i]
            _fill_empty(owner, field)
        elif change in ("unwrap", "unwrap_else"):
            inner = _unwrapped(stmt, change == "unwrap_else")
            if inner is None:
                continue
            block[i : i + 1] = inner
            _fill_empty(owner, field)
        else:
            if not (isinstance(stmt, ast.Return) and isinstance(stmt.value, (ast.Tuple, ast.List, ast.Dict))):
                continue
            elts = stmt.value.values if isinstance(stmt.value, ast.Dict) else stmt.value.elts
            for elt in elts if len(elts) > 1 else []:
                stmt.value = elt
                yield ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            continue
        yield ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _fill_empty(owner: ast.AST, field: str) -> None:
    """A block left empty: `pass`, or no else at all (a try with no handlers keeps a finally)."""
    if getattr(owner, field):
        return
    if field == "orelse" or (field == "finalbody" and not (isinstance(owner, ast.Try) and not owner.handlers)):
        return
    getattr(owner, field).append(ast.Pass())


def _program_and_inputs(tree: ast.Module) -> tuple[ast.FunctionDef | None, ast.List | None]:
    program = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "program"), None)
    inputs = next(
        (
            n.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.targets[0], ast.Name)
            and n.targets[0].id == "INPUTS"
            and isinstance(n.value, ast.List)
        ),
        None,
    )
    return program, inputs


def _param_count(source: str) -> int:
    program, inputs = _program_and_inputs(ast.parse(source))
    ok = program is not None and inputs is not None and len(program.args.args) == len(inputs.elts)
    return len(program.args.args) if ok else 0


def _without_param(source: str, j: int) -> str:
    """The program without its j-th parameter, the INPUTS entry that builds it, and its part of the plan
    (layouts, aliases of it, marks)."""
    tree = ast.parse(source)
    program, inputs = _program_and_inputs(tree)
    name = program.args.args[j].arg
    del program.args.args[j]
    del inputs.elts[j]
    found = _plan(tree)
    if found is not None:
        _set_plan(tree, *drop_argument(*found, name))
    return ast.unparse(tree) + "\n"


def _plan_nodes(tree: ast.Module) -> dict[str, ast.Assign]:
    return {
        n.targets[0].id: n
        for n in tree.body
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id in ("CALLS", "COMPILE")
    }


def _plan(tree: ast.Module) -> tuple[list, dict] | None:
    """The program's CALLS and COMPILE (plan.py), if it has both."""
    nodes = _plan_nodes(tree)
    if len(nodes) != 2:
        return None
    return ast.literal_eval(nodes["CALLS"].value), ast.literal_eval(nodes["COMPILE"].value)


def _set_plan(tree: ast.Module, calls: list, policy: dict) -> None:
    nodes = _plan_nodes(tree)
    nodes["CALLS"].value = ast.parse(repr(calls), mode="eval").body
    nodes["COMPILE"].value = ast.parse(repr(policy), mode="eval").body


def _plainer_plans(source: str) -> Iterator[str]:
    """The program with a plainer plan (plan.simpler_plans: fewer calls, layouts, marks; float32)."""
    found = _plan(ast.parse(source))
    for calls, policy in simpler_plans(*found) if found else []:
        tree = ast.parse(source)
        _set_plan(tree, calls, policy)
        yield ast.unparse(tree) + "\n"


def _unwrapped(stmt: ast.stmt, use_else: bool) -> list[ast.stmt] | None:
    """A compound statement's statements run unconditionally in its place: an if's body (or its else), a
    loop's body and else, a with's body, a try's body, else and finally."""
    if isinstance(stmt, ast.If):
        return stmt.orelse if use_else else stmt.body
    if use_else:
        return None
    if isinstance(stmt, ast.With):
        return stmt.body
    if isinstance(stmt, (ast.For, ast.While)):
        if any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(stmt)):
            return None  # a break/continue outside a loop would not compile
        return stmt.body + stmt.orelse
    if isinstance(stmt, ast.Try):
        return stmt.body + stmt.orelse + stmt.finalbody
    return None


def minimise(
    source: str, still_fails: Callable[[str], bool], *, budget_s: float = 240.0, max_checks: int = 600
) -> tuple[str, int]:
    """Passes until one changes nothing (or the budget runs out): drop parameters, make the plan plainer (one
    change at a time, while one holds), then try changes of each statement from the last to the first. Slots
    are in ast.walk order, so a change at slot k leaves the slots before k where they were and a pass goes on at
    k - 1. Returns (smallest program, checks made)."""
    start = time.perf_counter()
    current = ast.unparse(ast.parse(source)) + "\n"
    checks = 0

    def accept(candidate: str, shorter: bool = True) -> bool | None:  # None: out of budget
        nonlocal checks
        if time.perf_counter() - start > budget_s or checks >= max_checks:
            return None
        if shorter and len(candidate) >= len(current):  # e.g. deleting a `pass` that comes back as `pass`
            return False
        checks += 1
        return still_fails(candidate)

    changed = True
    while changed:
        changed = False
        for j in reversed(range(_param_count(current))):
            candidate = _without_param(current, j)
            verdict = accept(candidate)
            if verdict is None:
                return current, checks
            if verdict:
                current, changed = candidate, True
        plainer = True
        while plainer:  # each plainer plan only removes something or makes a dtype float32: this ends
            plainer = False
            for candidate in _plainer_plans(current):
                verdict = accept(candidate, shorter=False)
                if verdict is None:
                    return current, checks
                if verdict:
                    current, changed, plainer = candidate, True, True
                    break
        for k in reversed(range(len(_slots(ast.parse(current))))):
            for candidate in _changes_at(current, k):
                verdict = accept(candidate)
                if verdict is None:
                    return current, checks
                if verdict:
                    current, changed = candidate, True
                    break
    return current, checks


def _same_failure(verdict: dict, original: dict) -> bool:
    if verdict["outcome"] != original["outcome"]:
        return False
    if original["outcome"] in ("crash", "hang"):
        return True
    return signature(verdict) == signature(original) or verdict["kind"] == original["kind"]


def _has_internal_error(verdict: dict, message: str) -> bool:
    return any(_fallback(m) == message for m in verdict.get("internal_errors", []))


def _fallback(message: str) -> str:
    return blank(message.partition("running it as Python: ")[2])


@dataclasses.dataclass
class Target:
    """A program to minimise, what its candidates must keep doing, and the repro's name."""

    result: Result
    name: str
    keeps: Callable[[dict], bool]
    reference_agrees: bool = False  # torch.compile agreed with eager: candidates must keep it agreeing
    internal: str | None = None  # the internal error (fallback) kept, for those repros


def failure_targets(failing: Sequence[Result], seed: int, per_signature: int) -> list[Target]:
    """Up to `per_signature` failures of each signature, counted apart for those torch.compile agrees on (one
    signature can hold a framejit bug and a shared one)."""
    taken: collections.Counter = collections.Counter()
    targets = []
    for r in failing:
        agrees = r.verdict.get("reference", "").startswith("ok")
        key = (signature(r.verdict), agrees)
        if taken[key] < per_signature:
            taken[key] += 1
            targets.append(Target(r, f"repro_{seed}_{r.index}", lambda v, o=r.verdict: _same_failure(v, o), agrees))
    return targets


def internal_error_targets(results: Sequence[Result], seed: int) -> list[Target]:
    """One program per distinct internal-error fallback (message with numbers and names blanked)."""
    targets = []
    seen: set[str] = set()
    for r in results:
        for message in r.verdict.get("internal_errors", []):
            key = _fallback(message)
            if key not in seen:
                seen.add(key)
                # the same outcome, and no call raising that did not before (a NameError path is a poor repro)
                targets.append(
                    Target(
                        r,
                        f"internal_{seed}_{r.index}",
                        lambda v, key=key, o=r.verdict: (
                            v["outcome"] == o["outcome"]
                            and v["eager_raised"] <= o["eager_raised"]
                            and _has_internal_error(v, key)
                        ),
                        internal=message,
                    )
                )
    return targets


_DETAIL_LINES = 12  # of what was observed, in a repro's docstring


def repro_text(
    source: str, verdict: dict, seed: int, index: int, backend: str | None, internal: str | None = None
) -> str:
    """A standalone file: the program, what was observed, and a main that checks it (fails while it differs)."""
    what = (
        f"framejit internal error, the frame then runs as Python:\n{internal}"
        if internal
        else f"Outcome: {verdict['outcome']} ({verdict['kind']})\n{verdict['detail']}"
    )
    if "reference" in verdict:
        what += f"\ntorch.compile on the same program: {verdict['reference']}"
    lines = what.splitlines()
    if len(lines) > _DETAIL_LINES:  # (a compiler's own output: a C++ error quotes the whole command and source)
        lines = [*lines[:_DETAIL_LINES], f"... ({len(lines) - _DETAIL_LINES} more lines)"]
    text = "\n".join(textwrap.fill(line, 110, subsequent_indent="    ") for line in lines)
    head = (
        f'"""framejit fuzz repro: run seed {seed}, program {index} (program seed {seed + index}), minimised.\n\n'
        f"{text}\n\n`python <this file>` runs it eagerly and compiled by framejit (the calls, argument layouts,\n"
        "dtypes, backend and shape policy its CALLS and COMPILE name; with a gradient check when TRAIN is set)\n"
        "and fails while they disagree"
        f"{' or framejit falls back on an internal error' if internal else ''}.\n" + '"""\n'
    )
    args = "".join([f", backend={backend!r}" if backend else "", ", internal_errors=True" if internal else ""])
    foot = (
        '\n\nif __name__ == "__main__":\n    from framejit.fuzz.runner import check_repro\n'
        f"    check_repro(__file__{args})\n"
    )
    return head + source.replace('"""', "'''") + foot


def minimise_targets(
    targets: Sequence[Target],
    sources: dict[int, str],
    seed: int,
    out: str,
    workdir: str,
    *,
    timeout: float = 30.0,
    backend: str | None = None,
    say: Callable[..., None] = print,
) -> list[str]:
    """Minimise each target in worker subprocesses and write its repro; returns the repro paths."""
    worker = Worker(workdir, batch=200, timeout=timeout)
    quick = Worker(workdir, batch=200, timeout=timeout)
    written = []
    counter = [0]
    try:
        for target in targets:
            r = target.result
            # a candidate that runs far longer than the program did has most likely lost what ended a loop:
            # give up on it early, unless the failure is a hang
            quick.timeout = timeout if r.outcome == "hang" else min(timeout, max(5.0, 10 * r.verdict["seconds"]))

            def verdict(candidate: str, w: Worker, backend: str | None, target: Target = target) -> dict:
                counter[0] += 1
                path = os.path.join(workdir, f"candidate_{target.result.index}_{counter[0]}.py")
                with open(path, "w") as f:
                    f.write(candidate)
                return w.check(f"min{counter[0]}", path, backend)

            def holds(candidate: str, target: Target = target) -> bool:
                if not target.keeps(verdict(candidate, quick, backend)):
                    return False
                return not target.reference_agrees or verdict(candidate, quick, "torch.compile")["outcome"] == "ok"

            start = time.perf_counter()
            small, checks = minimise(sources[r.index], holds, budget_s=max(60.0, 8 * timeout))
            final = verdict(small, worker, backend)
            if not target.keeps(final):  # flaky: keep the original program rather than one that passes
                small, final = ast.unparse(ast.parse(sources[r.index])) + "\n", r.verdict
            if "reference" in r.verdict:
                final["reference"] = r.verdict["reference"]
            repro = os.path.join(out, f"{target.name}.py")
            with open(repro, "w") as f:
                f.write(repro_text(small, final, seed, r.index, backend, target.internal))
            written.append(repro)
            say(
                f"minimised program {r.index}{' (internal error)' if target.internal else ''}: "
                f"{len(sources[r.index].splitlines())} -> {len(small.splitlines())} lines in {checks} checks, "
                f"{time.perf_counter() - start:.0f} s: {repro}",
                flush=True,
            )
    finally:
        worker.stop()
        quick.stop()
    return written
