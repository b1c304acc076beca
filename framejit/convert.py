"""Converting one frame: trace its bytecode, compile the graph, build the replacement code and guards."""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, Callable

import torch

from framejit import fate, logs, tracebacks
from framejit.distributed import ddp_split
from framejit._C import _hook
from framejit.backends.common import check_outputs
from framejit.codeobj import (
    arg_slot_names,
    build_function_code,
    code_label,
    compiled_fn_name,
    format_code,
    is_continuation,
    passed_cells,
)
from framejit.config import Options
from framejit.contracts import CompiledFrame, GuardKind
from framejit.exc import BackendCompilerFailed, BreakCode, Unsupported, UserError, format_user_stack
from framejit.break_resume import finish_at_break
from framejit.guard_program import compile_guard_fn
from framejit.op_effects import shared_storage, storage_of
from framejit.output_graph import OutputGraph
from framejit.shapes import TraceShapes, is_symbolic, symbolic_sizes, symbolic_strides
from framejit.trace.translator import root_translator


@dataclasses.dataclass(frozen=True)
class GraphCompiler:
    """What compiles the graphs of one optimize() context: the backend, the name errors give it, and the
    callbacks told of each compiled graph and each graph break (explain() and export() listen there)."""

    backend: Callable
    backend_name: str
    on_graph: Callable[[torch.fx.GraphModule, Callable, fate.GraphFate], None] | None = None
    on_break: Callable[[Unsupported], None] | None = None
    dynamic: bool | None = None  # as asked of compile(): None follows config (shapes.py)


def convert_frame_with_breaks(
    fn: types.FunctionType, args: tuple, options: Options, compiler: GraphCompiler, *, nopython: bool
) -> CompiledFrame | None:
    """Trace the whole frame; if it fails at an instruction of this frame, trace again and break there.

    The first trace may have changed its Variables while failing inside that instruction
    (an inlined call, say), so the break is made by a fresh trace that stops before it.

    A continuation whose trace ran past the instruction budget runs as Python instead (the error reaches the
    caller): it is a long Python loop, and breaking in it would trace the rest of the loop again in the next
    continuation, twice per budget's worth, at every call whose guards fail (a list that grows). The functions
    the loop calls are still captured, each in its own frame.
    """
    code = fn.__code__
    logs.log.debug(
        "compiling %s (%s:%d) with backend %s",
        code.co_name,
        code.co_filename,
        code.co_firstlineno,
        compiler.backend_name,
    )
    unreadable: dict[str, Unsupported] = {}
    while True:
        try:
            return convert_frame(fn, args, options, compiler, nopython=nopython, unreadable=unreadable)
        except Unsupported as e:
            if nopython:
                raise
            # kept without its traceback: that holds this frame (a cycle) and, through it, the frames that called
            # it, whose locals (a C++ guard of the caller: torch's repr disables functorch) would live until the
            # garbage collector runs
            if e.unreadable_arg is None or e.unreadable_arg in unreadable:
                break_at = e.with_traceback(None)
                break
            unreadable[e.unreadable_arg] = e.with_traceback(None)  # again, with that argument unread
    if break_at.break_index is None or (break_at.code == BreakCode.BUDGET and is_continuation(fn.__code__)):
        _report_break(break_at, compiler, options)  # the whole frame runs as Python: said like any break
        raise break_at
    try:
        return convert_frame(fn, args, options, compiler, break_at=break_at, nopython=nopython, unreadable=unreadable)
    except Unsupported as again:
        whole = Unsupported(
            f"{break_at.msg} (the frame runs as Python: {again.msg})",
            code=break_at.code,
            user_stack=break_at.user_stack,
        )
        _report_break(whole, compiler, options)
        raise whole from None


def _report_break(reason: Unsupported, compiler: GraphCompiler, options: Options) -> None:
    where = reason.user_stack[-1] if reason.user_stack else None
    place = f"{where.filename}:{where.lineno} in {where.name}" if where else "?"
    logs.log.info("graph break at %s: %s", place, reason.msg)
    if logs.enabled("breaks", options.debug):
        print(f"GRAPH BREAK at {place}: {reason.msg}\n" + format_user_stack(reason.user_stack))
    if compiler.on_break is not None:
        compiler.on_break(reason)


def _compile_graph_or_pieces(
    gm: torch.fx.GraphModule, example_inputs: list[Any], backend: Any, output: OutputGraph, record: fate.GraphFate
) -> Any:
    """The backend's compile of the graph; inside DDP's forward (config.optimize_ddp), of its pieces, one per
    gradient bucket, run in order by one callable."""
    if not output.options.optimize_ddp or not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return backend(gm, example_inputs)
    output.guards.add_query(ddp_split.active_bucket_caps, (), ddp_split.active_bucket_caps())
    ddp = ddp_split.active_ddp_module()
    if ddp is not None:  # (optimize_ddp as the options say: the same as config's, read when the compile began)
        pieces, buckets = ddp_split.compile_split(gm, example_inputs, backend, ddp)
        if pieces is not None:
            record.pieces = [f"{len(b.params)} parameters, {b.size / 1024:.1f} KiB" for b in buckets]
            return pieces
    return backend(gm, example_inputs)


def convert_frame(
    fn: types.FunctionType,
    args: tuple,
    options: Options,
    compiler: GraphCompiler,
    break_at: Unsupported | None = None,
    nopython: bool = False,
    unreadable: dict[str, Unsupported] | None = None,
) -> CompiledFrame | None:
    """Trace `fn` called with `args`; None if the frame has nothing worth compiling (no graph ops).
    With `break_at` (how a first trace failed), the trace stops before that instruction: a graph break."""
    code = fn.__code__
    output = OutputGraph(
        fn.__globals__,
        options,
        TraceShapes(
            options.dynamic(compiler.dynamic),
            code,
            scalar_outputs=nopython or options.capture_scalar_outputs,
            dynamic_output_shapes=nopython or options.capture_dynamic_output_shape_ops,
        ),
    )
    graph_names: list[str] = []
    graph_fates: list[fate.GraphFate] = []
    graphs: list[torch.fx.GraphModule] = []
    const_names: dict[int, str] = {}

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> tuple[Callable, str]:
        name = compiled_fn_name()
        if logs.enabled("graph", options.debug):
            print(f"TRACED GRAPH\n {name}")
            gm.print_readable()
        try:
            with logs.output_code(name, gm, options.output_code), fate.recording(compiler.backend_name) as record:
                compiled = _compile_graph_or_pieces(gm, example_inputs, compiler.backend, output, record)
        except Exception as e:
            raise BackendCompilerFailed(compiler.backend_name, e) from e
        if compiled is None:  # the backend declined this graph (a composing backend would try the next)
            record.torch_ops.append("the backend declined it (returned None)")
            compiled = gm.forward
        elif not record.compiled_by and not record.torch_ops:  # a backend that reports nothing compiled it whole
            record.compiled_by.append(compiler.backend_name)
        if logs.enabled("graph", options.debug):
            print(f" {name}: {record}")
        if not callable(compiled):
            message = (
                f"backend {compiler.backend_name!r} returned {compiled!r} (type {type(compiled).__name__}) for "
                f"{name}, not a callable; a backend returns a function that runs the graph "
                f"(gm.forward, say), or None to decline it"
            )
            raise BackendCompilerFailed(compiler.backend_name, TypeError(message), message)
        compiled = check_outputs(compiled, gm, compiler.backend, compiler.backend_name, name)
        graph_names.append(name)
        graph_fates.append(record)
        graphs.append(gm)
        const_names[id(compiled)] = name
        if compiler.on_graph is not None:
            compiler.on_graph(gm, compiled, record)
        return compiled, name

    try:
        break_point = break_at.break_point() if break_at is not None else None
        tx = root_translator(output, fn, args, break_point, unreadable)
        result = tx.run()
        if result is None:
            assert break_point is not None
            finished = finish_at_break(output, tx, tx.instructions[tx.ip], compile_graph, break_point.raise_instead)
            _report_break(break_at, compiler, options)
        else:
            finished = output.finish(tx, result, compile_graph)
    finally:
        output.restore_global_state()
    argnames = arg_slot_names(code)
    if finished is None:  # this path does no tensor op: an entry that runs the original body
        new_code = passthrough_code(code)
    else:
        new_code = build_function_code(
            code, finished.instructions, extra_varnames=finished.temps, passed_cells=passed_cells(code)
        )
    for broken in output.shapes.broken_marks():  # a promise the code can't keep: an error where the graph is whole
        if nopython:
            raise UserError(broken, code=BreakCode.DYNAMIC_CONSTRAINT)
        logs.log.info(
            "%s (%s:%d): %s; that size is specialised", code.co_name, code.co_filename, code.co_firstlineno, broken
        )
    shared = shared_storage([i.value for i in output.inputs])
    for source, base, fake in output.shapes.view_bases(lambda t: storage_of(t) in shared):  # (a backend read them)
        dims, strides, offset = symbolic_sizes(fake), symbolic_strides(fake), is_symbolic(fake.storage_offset())
        output.guards.add(source, GuardKind.TENSOR_MATCH, base, dims, strides, offset)
    output.guards.settle_dynamic_dims(output.shapes.symbolic_dims(), output.shapes.specialised_ints())
    output.guards.add_shape_guards(output.shapes.guards(), output.shapes.tokens)
    output.guards.add_storage_sharing()
    tracebacks.remember_graph_lines(new_code, graphs)
    guard_fn, guard_source = compile_guard_fn(output.guards, code, argnames)
    guards = tuple(output.guards.ordered())
    for instr in finished.instructions if finished else ():  # continuations show by name in the listing
        if getattr(instr, "name", None) == "LOAD_CONST" and isinstance(instr.arg, types.CodeType):
            const_names[id(instr.arg)] = code_label(instr.arg)
        elif getattr(instr, "name", None) == "LOAD_CONST" and instr.arg is _hook.call_with_callback:
            const_names[id(instr.arg)] = "call_with_capture_off"
    if logs.enabled("bytecode", options.debug) and finished is not None:
        print(
            f"ORIGINAL BYTECODE {code.co_name} {code.co_filename} line {code.co_firstlineno}\n"
            f"{format_code(code)}\n\nMODIFIED BYTECODE {code.co_name} {code.co_filename} "
            f"line {code.co_firstlineno}\n{format_code(new_code, const_names=const_names)}\n"
        )
    if logs.enabled("guards", options.debug):
        print("GUARDS:\n" + "\n".join(f" - {g}" for g in guards) + "\n")
    return CompiledFrame(
        code=new_code,
        guard_fn=guard_fn,
        guards=guards,
        check_fn_source=guard_source,
        graph_names=tuple(graph_names),
        graph_fates=tuple(graph_fates),
        constants=dict(output.guards.constants),
        watched=tuple(output.guards.watched),
        passthrough=finished is None,
        reads_tensors=any(g.kind == GuardKind.TENSOR_MATCH for g in guards),
        identity=output.guards.identity(),
    )


def passthrough_code(code: types.CodeType) -> types.CodeType:
    """`code` itself as a replacement: its argument slots taken positionally (the localsplus layout is
    the same), so a cache entry can run the original body for inputs that compile to nothing."""
    return code.replace(
        co_argcount=len(arg_slot_names(code)),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS),
    )
