"""Which locals a frame may still read from a given instruction on.

Backward may-liveness over the instruction list, following fall-through, jumps
and exception-table edges. It over-approximates, never under-approximates.
"""

from __future__ import annotations

import types

from framejit.codeobj.reading import TERMINATORS, Inst, exception_table, exception_entry_at, read_instructions

# DELETE_FAST reads whether the slot is bound (it raises if not), so it counts as a read.
_FAST_READS = frozenset({"LOAD_FAST", "DELETE_FAST"})
_FAST_WRITES = frozenset({"STORE_FAST"})
# A cell's identity matters to the closures sharing it, so no deref write ends its liveness.
_CELL_READS = frozenset({"LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF", "MAKE_CELL", "DELETE_DEREF"})


def _successors(code: types.CodeType, insts: list[Inst]) -> tuple[list[tuple[int, ...]], list[int | None]]:
    """For each instruction: the indices control may go to next, and the index its exception goes to (its except target)."""
    index_of = {inst.offset: i for i, inst in enumerate(insts)}
    table = exception_table(code)
    out = []
    except_targets: list[int | None] = []
    for i, inst in enumerate(insts):
        succ = []
        if inst.opname not in TERMINATORS and i + 1 < len(insts):
            succ.append(i + 1)
        if inst.target_index is not None:
            succ.append(inst.target_index)
        entry = exception_entry_at(table, inst.offset)
        except_targets.append(None if entry is None else index_of[entry.target])
        out.append(tuple(succ))
    return out, except_targets


def _live_in(code: types.CodeType, insts: list[Inst]) -> list[frozenset[str]]:
    """Live-in sets of every instruction, iterated backwards to a fixed point."""
    succs, except_targets = _successors(code, insts)
    reads: list[frozenset[str]] = []
    writes: list[frozenset[str]] = []
    for inst in insts:
        is_read = inst.opname in _FAST_READS or inst.opname in _CELL_READS
        reads.append(frozenset([inst.argval]) if is_read else frozenset())
        writes.append(frozenset([inst.argval]) if inst.opname in _FAST_WRITES else frozenset())
    live: list[frozenset[str]] = [frozenset()] * len(insts)
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(insts))):
            after = frozenset().union(*(live[s] for s in succs[i]))
            new = reads[i] | (after - writes[i])
            # The instruction may raise before its own write lands: nothing is subtracted here.
            handler = except_targets[i]
            if handler is not None:
                new |= live[handler]
            if new != live[i]:
                live[i] = new
                changed = True
    return live


def live_locals_table(code: types.CodeType) -> dict[int, frozenset[str]]:
    """`live_locals_at` for every instruction offset at once (one analysis instead of one per offset)."""
    insts = read_instructions(code)
    return {inst.offset: live for inst, live in zip(insts, _live_in(code, insts))}


def live_locals_at(code: types.CodeType, offset: int) -> frozenset[str]:
    """Names of locals (fast locals, cells, free variables) that may be read before written from `offset` on."""
    table = live_locals_table(code)
    if offset not in table:
        raise ValueError(f"no instruction at offset {offset} in {code.co_qualname}")
    return table[offset]
