"""framejit.explain: run a function once under a recording backend and report graphs, breaks and guards.

The cache is left as explain found it: entries it compiled are removed afterwards.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any, Callable

import torch

from framejit import eval_frame, fate
from framejit.contracts import Guard
from framejit.exc import Unsupported
from framejit.fate import GraphFate


@dataclasses.dataclass(frozen=True)
class BreakReason:
    reason: str
    user_stack: list[traceback.FrameSummary]

    def __str__(self) -> str:
        return f"{self.reason} at " + ", ".join(f"{f.filename}:{f.lineno}" for f in self.user_stack)


@dataclasses.dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule]
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    op_count: int
    ops_per_graph: list[list[Any]]
    out_guards: list[Guard]
    compile_times: str
    graph_fates: list[GraphFate] = dataclasses.field(default_factory=list)  # what the backend made of each graph

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
        ]
        for i, br in enumerate(self.break_reasons, 1):
            lines += [f"  Break Reason {i}:", f"    Reason: {br.reason}", "    User Stack:"]
            lines += [f"      <FrameSummary file {f.filename}, line {f.lineno} in {f.name}>" for f in br.user_stack]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            how = f" ({self.graph_fates[i - 1]})" if i <= len(self.graph_fates) else ""
            lines.append(f"  Ops {i}:{how}")
            lines += [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        for i, guard in enumerate(self.out_guards, 1):
            lines += [
                f"  Guard {i}:",
                f"    Name: {guard.name!r}",
                f"    Source: {guard.source_kind}",
                f"    Create Function: {guard.kind}",
                f"    Code List: {list(guard.code_list)}",
            ]
        lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines) + "\n"


def _ops(gm: torch.fx.GraphModule) -> list[Any]:
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`explain(fn)(*args, **kwargs)` (or `explain(fn, *args, **kwargs)`) -> ExplainOutput.

    A plain function or module is captured without compiling its graphs. One that framejit.compile/optimize made
    is captured with its backend and options, which compile each graph: `graph_fates` says what became of each."""
    if args or kwargs:
        return _explain(fn, args, kwargs)
    return lambda *a, **kw: _explain(fn, a, kw)


class _ExplainCall:
    """Owns what one explain forces to be captured, for as long as the call runs."""


def _explain(fn: Callable[..., Any], args: tuple, kwargs: dict) -> ExplainOutput:
    graphs: list[torch.fx.GraphModule] = []
    breaks: list[BreakReason] = []
    guards: list[Guard] = []
    fates: list[GraphFate] = []
    fn, compiler = eval_frame.unwrap(fn)

    def record(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        if compiler is not None:
            return compiler.backend(gm, example_inputs)
        fate.compiled_by("no backend (explain of a function framejit.compile did not make)")
        return gm.forward

    def on_break(reason: Unsupported) -> None:
        breaks.append(BreakReason(reason=reason.msg, user_stack=list(reason.user_stack)))

    ctx = eval_frame.make_context(
        record,
        "explain" if compiler is None else compiler.backend_name,
        dynamic=None if compiler is None else compiler.dynamic,
        guard_export_fn=guards.extend,
        on_break=on_break,
        # (a graph the backend compiles in pieces, at DDP's buckets, is one graph: its fate lists the pieces)
        on_graph=lambda gm, compiled, record: (graphs.append(gm), fates.append(record)),
    )
    saved = eval_frame.snapshot_state()
    start = time.perf_counter()
    call = _ExplainCall()
    if isinstance(fn, torch.nn.Module):  # its forward is captured as compile's would be (nn.Linear's too)
        eval_frame.force_forward_capture(fn, call)
    try:
        with ctx:
            fn(*args, **kwargs)
    finally:
        eval_frame.restore_state(saved)
        del call
    ops = [_ops(gm) for gm in graphs]
    return ExplainOutput(
        graphs=graphs,
        graph_count=len(graphs),
        graph_break_count=len(breaks),
        break_reasons=breaks,
        op_count=sum(map(len, ops)),
        ops_per_graph=ops,
        out_guards=guards,
        compile_times=f"{time.perf_counter() - start:.4f} s in total",
        graph_fates=fates,
    )
