"""Converting one frame: trace its bytecode, compile the graph, build the replacement code and guards."""
from __future__ import annotations

import types
from typing import Any, Callable

import torch

from framejit import logs
from framejit.codeobj import arg_slot_names, build_function_code, format_code
from framejit.config import Options
from framejit.contracts import CompiledFrame
from framejit.exc import BackendCompilerFailed
from framejit.guards import compile_guard_fn
from framejit.output_graph import OutputGraph, next_graph_name
from framejit.trace import ops_basic, ops_call, ops_data, ops_flow  # noqa: F401  (register opcode handlers)
from framejit.trace.translator import root_translator


class CompileHooks:
    """What one optimize() context hands to every compile it triggers."""

    def __init__(self, backend: Callable, backend_name: str,
                 on_graph: Callable[[torch.fx.GraphModule, Callable], None] | None = None) -> None:
        self.backend = backend
        self.backend_name = backend_name
        self.on_graph = on_graph


def convert_frame(fn: types.FunctionType, args: tuple, options: Options, hooks: CompileHooks
                  ) -> CompiledFrame | None:
    """Trace `fn` called with `args`; None if the frame has nothing worth compiling (no graph ops)."""
    code = fn.__code__
    output = OutputGraph(fn.__globals__, options)
    graph_names: list[str] = []
    const_names: dict[int, str] = {}

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[Callable, str]:
        name = next_graph_name()
        if logs.enabled("graph", options.debug):
            print(f"TRACED GRAPH\n {name}")
            gm.print_readable()
        try:
            compiled = hooks.backend(gm, example_inputs)
        except Exception as e:
            raise BackendCompilerFailed(hooks.backend_name, e) from e
        if compiled is None or not callable(compiled):
            raise BackendCompilerFailed(hooks.backend_name,
                                        RuntimeError(f"the backend returned {compiled!r}, not a callable"))
        graph_names.append(name)
        const_names[id(compiled)] = name
        if hooks.on_graph is not None:
            hooks.on_graph(gm, compiled)
        return compiled, name

    try:
        tx = root_translator(output, fn, args)
        finished = output.finish(tx, tx.run(), compile_graph)
    finally:
        output.restore_global_state()
    if finished is None:
        return None
    argnames = arg_slot_names(code)
    new_code = build_function_code(code, finished.instructions, extra_varnames=finished.temps)
    guard_fn, guard_source = compile_guard_fn(output.guards, code, argnames)
    guards = tuple(output.guards.ordered())
    if logs.enabled("bytecode", options.debug):
        print(f"ORIGINAL BYTECODE {code.co_name} {code.co_filename} line {code.co_firstlineno}\n"
              f"{format_code(code)}\n\nMODIFIED BYTECODE {code.co_name} {code.co_filename} "
              f"line {code.co_firstlineno}\n{format_code(new_code, const_names=const_names)}\n")
    if logs.enabled("guards", options.debug):
        print("GUARDS:\n" + "\n".join(f" - {g}" for g in guards) + "\n")
    return CompiledFrame(code=new_code, guard_fn=guard_fn, guards=guards, check_fn_source=guard_source,
                         graph_names=tuple(graph_names), constants=dict(output.guards.constants),
                         watched=tuple(output.guards.watched))
