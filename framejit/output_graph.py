"""The graph being captured: FX nodes with fake-tensor examples, graph inputs, and the final compile.

`finish` turns a completed trace into a compiled graph plus the bytecode that
calls it, rebuilds the frame's return value and replays side effects.
"""

from __future__ import annotations

import contextlib
import operator
import re
import traceback
import warnings
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from framejit._C import _hook
from framejit.as_eager import behaving_as_eager
from framejit.as_eager.output_views import requiring_grad
from framejit.as_eager.rerun import checking_writes, inputs_written, restoring_grad_mode, unversioned_inputs
from framejit.as_eager.saved_versions import saves_behind_copy_slices
from framejit.codegen import PyCodegen, emit_rerun_on_error
from framejit.codeobj import GRAPH_OUT, own_cells
from framejit.config import Options
from framejit.contracts import MODULE_STATE_META, GuardKind
from framejit.exc import BreakCode, Unsupported, unsupported
from framejit.guards import GuardSet
from framejit.logs import quiet_fake_kernel_errors
from framejit.op_effects import (
    AUTOCAST_STATE_TARGETS,
    grad_fn_of,
    in_place_name,
    op_name,
    reenter_autocast,
    writes_first_argument,
)
from framejit.shapes import SYMBOLIC_TYPES, TraceShapes, is_symbolic, symbolic_strides
from framejit.side_effects import TENSOR_WRITE, SideEffects
from framejit.sources import IndexSource, Source, graph_input_name
from framejit.trace.translator import Translator
from framejit.variables.aliased_writes import check_aliased_write
from framejit.variables.base import Variable
from framejit.variables.builder import wrap_constant_result
from framejit.variables.callables import NestedFunctionVariable
from framejit.variables.containers import ListVariable, TupleVariable
from framejit.variables.kernel_refusals import check_eager_accepts_dtypes
from framejit.variables.symbolic import SymbolicVariable, plain_number
from framejit.variables import wrapper_subclass
from framejit.variables.tensor import TensorVariable
from framejit.variables.torch_special import check_op_before_run, keeps_non_tensor_result

CompileGraph = Callable[[torch.fx.GraphModule, list[torch.Tensor]], tuple[Callable, str]]


class GraphInput:
    __slots__ = ("source", "value", "node", "example")

    def __init__(self, source: Source, value: Any, node: torch.fx.Node, example: Any = None) -> None:
        self.source, self.value, self.node = source, value, node
        self.example = value if example is None else example  # what the backend gets as this input's example


# autograd's refusals of an in-place write, and of a use of a view whose base was written (torch/csrc/autograd:
# check_inplace, handle_view_on_rebase)
# ("Output 0 of UnbindBackward0 is a view and ...", or "A view was created in no_grad mode and ..." where the view
# has no history: a row of a tensor without grad)
_AUTOGRAD_VIEW_ERROR = re.compile(
    r"(is a view|A view was created in [\w ]+ mode) and (is being|its base or another "
    r"view of its base has been) modified inplace|is being used in an in-place operation"
)


def _views_all_inputs(fake_args: list[Any], args: Sequence[Variable]) -> bool:
    """Whether every view among an op's tensor arguments is an input of the graph, not made in it."""
    return all(
        isinstance(a, TensorVariable) and a.node.op == "placeholder"
        for f, a in zip(fake_args, args)
        if isinstance(f, torch.Tensor) and f._is_view()
    )


def _holds_raw_symbol(value: Any) -> bool:
    """Whether a node's arguments hold a SymInt/SymFloat/SymBool that is a symbol, not a node computing it."""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_raw_symbol, value))
    if isinstance(value, dict):
        return any(map(_holds_raw_symbol, value.values()))
    if isinstance(value, slice):
        return any(map(_holds_raw_symbol, (value.start, value.stop, value.step)))
    return is_symbolic(value)


class OutputGraph:
    def __init__(self, f_globals: dict[str, Any], options: Options, shapes: TraceShapes) -> None:
        self.f_globals = f_globals
        self.options = options
        self.graph = torch.fx.Graph()
        self.shapes = shapes
        self.fake_mode = shapes.fake_mode
        self.guards = GuardSet()
        self.guards.add_global_state()
        self.side_effects = SideEffects(f_globals)
        self.wrapped: dict[str, Variable] = {}
        self.wrapped_by_id: dict[int, Variable] = {}  # tensors and mutable objects, by identity
        # id(real cell of the captured function's closure, or of a function the trace called) -> its one Cell
        self.real_cells: dict[int, Any] = {}
        self.inputs: list[GraphInput] = []
        self.root = torch.nn.Module()  # holds the graph's constant tensors (get_attr)
        self.n_constants = 0
        self.initial_grad_mode = torch.is_grad_enabled()
        self.initial_autocast: dict[str, tuple[bool, torch.dtype]] = {}  # devices whose state the trace changed
        self.initial_autocast_cache = torch.is_autocast_cache_enabled()
        self.autocast_left: list[tuple[Source, tuple]] = []  # blocks entered outside the trace that it left
        self.budget = options.instruction_budget
        self._used_names: set[str] = set()

    # -- building the graph -------------------------------------------------------------------
    def _placeholder(self, source: Source) -> torch.fx.Node:
        """A new graph input after the others, named after its source."""
        name = graph_input_name(source)
        base, n = name, 1
        while name in self._used_names:
            name, n = f"{base}_{n}", n + 1
        self._used_names.add(name)
        anchor = self.inputs[-1].node if self.inputs else None
        if anchor is None:
            first = next(iter(self.graph.nodes), None)
            ctx = self.graph.inserting_before(first) if first is not None else self.graph.inserting_after(None)
        else:
            ctx = self.graph.inserting_after(anchor)
        with ctx:
            return self.graph.placeholder(name)

    def add_int_input(self, source: Source, value: Any, automatic_only: bool = False) -> Variable | None:
        """A Python int argument made symbolic by the dynamic policy (a `seq_len` that varies), or a numpy integer
        (np.int64): a graph input whose value is passed in at each call, the numpy one as the Python int it holds.
        None when the policy keeps it a constant."""
        numpy_type = None if type(value) is int else type(value)
        symbol = self.shapes.symbolic_int(int(value), source, automatic_only, numpy=numpy_type is not None)
        if symbol is None:
            return None
        node = self._placeholder(source)
        node.meta["example_value"] = symbol
        node.meta["framejit_source"] = source.name()
        # backends get the symbol as the example (as torch.compile passes every symbolic int): AOTAutograd makes an
        # example int of 0 or 1 a constant (a numpy integer's symbol may be either), and gives two example ints
        # of one value one symbol (duck sizing), where the trace has two: the graph then read one for both
        # (fuzz 8655 of seed 2000000: a counter and a loop index, both 3 when compiled)
        self.inputs.append(
            GraphInput(source if numpy_type is None else IndexSource(source), int(value), node, example=symbol)
        )
        self.guards.add(source, GuardKind.TYPE_MATCH, value)
        return SymbolicVariable(node, symbol, source, numpy_type)

    def add_float_input(self, source: Source, value: float) -> Variable | None:
        """A Python float argument made symbolic once it changed between compiles: a graph input whose value is
        passed in at each call. None while it stays a constant."""
        symbol = self.shapes.symbolic_float(value, source)
        if symbol is None:
            return None
        node = self._placeholder(source)
        node.meta["example_value"] = symbol
        node.meta["framejit_source"] = source.name()
        self.inputs.append(GraphInput(source, value, node, example=symbol))
        self.guards.add(source, GuardKind.TYPE_MATCH, value)
        return SymbolicVariable(node, symbol, source)

    def add_graph_input(self, source: Source, value: torch.Tensor) -> TensorVariable:
        subclass = is_traceable_wrapper_subclass(value)  # its ops dispatch in Python (to its inner tensors)
        refusal = wrapper_subclass.input_refusal(value) if subclass else None
        if refusal is not None:
            unsupported(
                f"{source.name()} is a {wrapper_subclass.subclass_name(type(value))}, a tensor subclass with its own "
                f"dispatch, which framejit does not trace ({refusal}): the code that uses it runs as Python",
                BreakCode.TENSOR_SUBCLASS,
            )
        node = self._placeholder(source)
        with warnings.catch_warnings():
            # describing a non-leaf tensor reads its .grad; torch hides that warning itself, except from
            # users who turn warnings into errors (pytest -W error), where it would abort the trace
            warnings.filterwarnings("ignore", message="The .grad attribute of a Tensor that is not a leaf")
            module_state = _is_module_state(value, source)
            try:
                fake, dynamic_dims = self.shapes.fake_input(value, source, module_state)
            except (RuntimeError, AssertionError) as e:
                # its autograd state refuses to be read (a view whose base changed in place); or it is a view of an
                # input the graph has written, whose fake (requires_grad after the write) no longer matches it
                unsupported(f"{source.name()} cannot be described: {type(e).__name__}: {e}", BreakCode.GRAPH_ARG)
        node.meta["example_value"] = fake
        node.meta["framejit_source"] = source.name()  # where the value is loaded from (export reads it)
        node.meta[MODULE_STATE_META] = module_state
        self.inputs.append(GraphInput(source, value, node))
        self.guards.add(
            source,
            GuardKind.TENSOR_MATCH,
            value,
            dynamic_dims,
            symbolic_strides(fake),
            is_symbolic(fake.storage_offset()),
        )
        if subclass:
            wrapper_subclass.guard_input(self.guards, source, value)
        return TensorVariable(node, fake, source, type(value))

    def add_constant_tensor(self, tx: Translator, value: torch.Tensor) -> TensorVariable:
        """A tensor fixed at trace time (an assume_constant_result answer), held by the graph module."""
        name = f"_constant_{self.n_constants}"
        self.n_constants += 1
        setattr(self.root, name, value.detach())
        node = self.create_node(tx, "get_attr", name, (), {})
        node.meta["example_value"] = fake = self.fake_mode.from_tensor(value.detach(), static_shapes=True)
        return TensorVariable(node, fake)

    def real_value(self, node: torch.fx.Node) -> Any:
        """What `node` computes in this call: the ops it depends on run on copies of the real inputs (a write
        into one must not reach the caller's tensor)."""
        needed, pending = set(), [node]
        while pending:
            n = pending.pop()
            if n not in needed:
                needed.add(n)
                pending.extend(n.all_input_nodes)
        real = {i.node: i.value for i in self.inputs}
        env: dict[torch.fx.Node, Any] = {}
        with torch.no_grad():
            for n in self.graph.nodes:
                if n not in needed:
                    continue
                if n.op == "placeholder":
                    value = real[n]
                    env[n] = value.clone() if isinstance(value, torch.Tensor) else value
                    continue
                args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), env.__getitem__)
                if n.op == "call_function":
                    env[n] = n.target(*args, **kwargs)
                elif n.op == "call_method":
                    env[n] = getattr(args[0], n.target)(*args[1:], **kwargs)
                else:
                    env[n] = getattr(self.root, n.target)
        return env[node]

    def create_node(self, tx: Translator, op: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        if _holds_raw_symbol((args, kwargs)):  # the graph's code could not name it (`s0` undefined when run)
            unsupported(
                f"a symbolic size reached {op_name(target)}() as a value, not from the graph", BreakCode.UNSUPPORTED
            )
        node = self.graph.create_node(op, target, args, kwargs)
        summary = tx.frame_summary()
        node.meta["stack_trace"] = "".join(traceback.format_list([summary]))
        return node

    def call_graph_op(
        self, tx: Translator, op: str, target: Any, args: Sequence[Variable], kwargs: dict[str, Variable]
    ) -> Variable:
        """Run target on fake values for its result's metadata, then add a node if the result has tensors."""
        fake_args = [a.as_fake() for a in args]
        fake_kwargs = {k: v.as_fake() for k, v in kwargs.items()}
        name = target if isinstance(target, str) else getattr(target, "__qualname__", repr(target))
        leaves = pytree.tree_leaves((fake_args, fake_kwargs))
        # arithmetic on symbolic sizes: a result known at trace time (s0 - s0) is a constant; so is arithmetic on a
        # size that a guard has since fixed (`h != 32` made s0 = 32: the square image's width, the same symbol, is 32)
        numbers_only = any(isinstance(x, SYMBOLIC_TYPES) for x in leaves) and not any(
            isinstance(x, torch.Tensor) for x in leaves
        )
        check_op_before_run(target, numbers_only or any(isinstance(x, torch.Tensor) for x in leaves))
        check_aliased_write(op_name(target), target, fake_args, fake_kwargs)
        try:
            # symbolic sizes reach some kernels (constant_pad_nd's) only through the Python dispatcher's meta
            # functions; the C++ ones want concrete sizes (TorchDynamo runs fake ops under it too)
            symbolic = self.shapes.env.backed_var_to_val or self.shapes.has_unbacked
            with (
                self.fake_mode,
                enable_python_dispatcher() if symbolic else contextlib.nullcontext(),
                quiet_fake_kernel_errors(),
            ):
                if op == "call_method":
                    result = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    result = target(*fake_args, **fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as e:
            unsupported(f"{name} has a data-dependent output ({type(e).__name__})", BreakCode.DATA_DEPENDENT)
        except NotImplementedError as e:
            unsupported(f"{name} cannot run on fake tensors: {e}", BreakCode.FAKE_ERROR)
        except Exception as e:  # the same call would raise in eager mode: let eager raise it
            error = Unsupported(f"{name} raised {type(e).__name__}: {e}", code=BreakCode.OP_ERROR)
            if _AUTOGRAD_VIEW_ERROR.search(str(e)) and not _views_all_inputs(fake_args, args):
                # autograd refuses a write into a view made here (a row of unbind, a view made under no_grad), or a
                # use of one after its base was written. The graph before the break returns that view rebuilt from
                # its base, without the history autograd checks, so the op would run at the break: the break
                # raises eager's error instead. (Views the frame was given are the program's own: the op runs at
                # the break and raises eager's very error, where the fake's names the view's `as_strided` remake,
                # fuzz 3083 of seed 2200000.)
                error.raise_instead = e
            raise error
        check_eager_accepts_dtypes(name, op, target, fake_args, fake_kwargs, leaves)
        behind_copy_slices = None
        if (
            writes_first_argument(target, op_name(target), fake_kwargs)
            and isinstance(result, torch.Tensor)
            and result.requires_grad
            and result._is_view()
        ):

            def run_again(again: list[Any]) -> Any:
                return (
                    getattr(again[0], target)(*again[1:], **fake_kwargs)
                    if op == "call_method"
                    else target(*again, **fake_kwargs)
                )

            with (
                self.fake_mode,
                enable_python_dispatcher() if symbolic else contextlib.nullcontext(),
                quiet_fake_kernel_errors(),
            ):
                behind_copy_slices = saves_behind_copy_slices(run_again, fake_args, result)
        unbacked = self.shapes.unbacked_bindings(result)
        has_tensor = any(isinstance(x, torch.Tensor) or is_symbolic(x) for x in pytree.tree_leaves(result))
        if not has_tensor and (numbers_only or not keeps_non_tensor_result(target, kwargs)):
            return wrap_constant_result(pytree.tree_map(plain_number, result))
        node = self.create_node(
            tx, op, target, tuple(a.as_node_arg() for a in args), {k: v.as_node_arg() for k, v in kwargs.items()}
        )
        if unbacked:
            node.meta["unbacked_bindings"] = unbacked
        if behind_copy_slices is not None:
            node.meta["saves_behind_copy_slices"] = behind_copy_slices
        if not has_tensor or in_place_name(target, op_name(target)):
            self.side_effects.note_write(TENSOR_WRITE)
        return self.wrap_result(tx, node, result)

    def wrap_result(self, tx: Translator, node: torch.fx.Node, result: Any) -> Variable:
        node.meta["example_value"] = result
        if isinstance(result, torch.Tensor):
            # the op's own autograd node: a later in-place op gives the fake another one (saved_versions reads it)
            node.meta["grad_fn"] = grad_fn_of(result)
            return TensorVariable(
                node, result, py_type=type(result) if is_traceable_wrapper_subclass(result) else torch.Tensor
            )
        if is_symbolic(result):
            return SymbolicVariable(node, result)
        if isinstance(result, (tuple, list)):
            items: list[Variable] = []
            for i, item in enumerate(result):
                if isinstance(item, torch.Tensor) or is_symbolic(item):
                    getitem = self.create_node(tx, "call_function", operator.getitem, (node, i), {})
                    items.append(self.wrap_result(tx, getitem, item))
                else:
                    items.append(wrap_constant_result(plain_number(item)))
            return ListVariable(items) if isinstance(result, list) else TupleVariable(items, py_type=type(result))
        if result is None:
            return wrap_constant_result(None)
        unsupported(f"a graph op returned {type(result).__name__}", BreakCode.OP_RESULT)

    def set_grad_mode(self, mode: bool) -> None:
        """Switch grad mode for the rest of the trace and, at the same point, in the graph."""
        if torch.is_grad_enabled() != mode:
            torch._C._set_grad_enabled(mode)
        node = self.graph.create_node("call_function", torch._C._set_grad_enabled, (mode,), {})
        node.meta["example_value"] = None

    def set_autocast_state(self, device: str, enabled: bool, dtype: torch.dtype, cache_enabled: bool) -> None:
        """Autocast for `device` as the rest of the trace runs its fake ops (the graph has its own nodes)."""
        self.initial_autocast.setdefault(device, (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)))
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
        torch.set_autocast_cache_enabled(cache_enabled)

    def leave_after_graph(self, exit_source: Source, reenter_args: tuple) -> None:
        """A block entered before the frame was left in the graph: the graph ends back inside it (no net change,
        which AOTAutograd could not keep) and the block's real `__exit__` runs right after the graph."""
        self.autocast_left.append((exit_source, reenter_args))

    def restore_global_state(self) -> None:
        """Grad mode and autocast as they were when the trace started (a backend compiles under them too)."""
        torch._C._set_grad_enabled(self.initial_grad_mode)
        for device, (enabled, dtype) in self.initial_autocast.items():
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        torch.set_autocast_cache_enabled(self.initial_autocast_cache)
        if self.initial_autocast or torch._C._is_any_autocast_enabled():
            torch.clear_autocast_cache()  # it may hold casts of the trace's fake parameters

    def count_ops(self) -> int:
        return sum(
            1
            for n in self.graph.nodes
            if n.op in ("call_function", "call_method", "call_module")
            and n.target is not torch._C._set_grad_enabled
            and n.target not in AUTOCAST_STATE_TARGETS
        )

    def count_all_calls(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    # -- finishing ---------------------------------------------------------------------------
    def emit_graph_call(
        self,
        tx: Translator,
        roots: list[Variable],
        compile_graph: CompileGraph,
        read_only: frozenset[int] = frozenset(),
    ) -> PyCodegen:
        """Compile the graph with outputs for every tensor in `roots` and start the replacement code
        with its call; the returned codegen loads any of those values afterwards. Tensors whose fakes' ids are
        in `read_only` come back detached: the code after the graph only reads their data. Each is a leaf that
        requires grad, as eager's tensor requires it: `float()` warns on such a tensor."""
        outputs, output_index = self._collect_outputs(roots)
        self._remove_unused_sizes(outputs)
        self._remove_unused_inputs()
        for _, reenter_args in reversed(self.autocast_left):
            self.graph.create_node("call_function", reenter_autocast, reenter_args, {}).meta["example_value"] = None
        detached = [i for i, v in enumerate(outputs) if isinstance(v, TensorVariable) and id(v.example) in read_only]
        self.graph.output(tuple(self._detached(v.node) if i in detached else v.node for i, v in enumerate(outputs)))
        root_cells = {id(cell): name for name, cell in tx.cells.items()}
        cg = PyCodegen(output_index, frozenset(tx.code.co_cellvars), root_cells)
        # a graph that only switches grad mode or autocast (a `with` block left in the trace) still runs: the
        # code after it expects the state it leaves
        grad_switches = [n for n in self.graph.nodes if n.target is torch._C._set_grad_enabled]
        switches = bool(grad_switches) or any(n.target in AUTOCAST_STATE_TARGETS for n in self.graph.nodes)
        if not self.count_ops() and not outputs and switches and len(grad_switches) == self.count_all_calls():
            # only grad mode switched: no graph to compile, the code sets the mode the trace left
            cg.emit("PUSH_NULL")
            cg.emit_const(torch._C._set_grad_enabled)
            cg.emit_const(grad_switches[-1].args[0])
            cg.call(1)
            cg.emit("POP_TOP")
        elif self.count_ops() or outputs or switches:
            entry_mode = self._entry_grad_mode()
            gm = torch.fx.GraphModule(self.root, self.graph)
            self.restore_global_state()  # the graph starts under the state the trace started in
            if entry_mode is not None:
                torch._C._set_grad_enabled(entry_mode)
            example_inputs = [i.example for i in self.inputs]
            with self.shapes.backend_context():
                graph_fn, _ = compile_graph(gm, example_inputs)
            unversioned = unversioned_inputs(self.graph)
            # in the mode the graph starts in (compiling may have run the graph, and left the mode it ends in)
            with torch.set_grad_enabled(self.initial_grad_mode if entry_mode is None else entry_mode):
                graph_fn = behaving_as_eager(graph_fn, gm, example_inputs, unversioned)
            if switches:
                graph_fn = restoring_grad_mode(graph_fn, self.initial_grad_mode, entry_mode)
            if detached:
                graph_fn = requiring_grad(graph_fn, detached)
            written = inputs_written(self.graph, unversioned)
            if written:
                numel = sum(self.inputs[i].value.numel() for i in written)
                graph_fn = checking_writes(graph_fn, written, unversioned, numel)
            # the graph runs with capture off: what it calls (allow_in_graph functions) is not compiled again
            start = len(cg.instructions)
            cg.emit("PUSH_NULL")
            cg.emit_const(_hook.call_with_callback)
            cg.emit_const(None)
            cg.emit_const(graph_fn)
            with cg.sharing_loads():
                for graph_input in self.inputs:
                    graph_input.source.reconstruct(cg)
            cg.call(len(self.inputs) + 2)
            cg.emit("STORE_FAST", GRAPH_OUT)
            if written is not None:
                emit_rerun_on_error(cg, tx.code, start)
        for exit_source, _ in self.autocast_left:
            cg.emit("PUSH_NULL")
            exit_source.reconstruct(cg)
            for _ in range(3):
                cg.emit_const(None)
            cg.call(3)
            cg.emit("POP_TOP")
        return cg

    def finish(self, tx: Translator, return_value: Variable, compile_graph: CompileGraph) -> "FinishedTrace | None":
        """The frame returned: compile and generate the replacement body; None if nothing is worth compiling."""
        self.side_effects.drop_unreachable_objects([return_value])
        if self.count_ops() == 0 and self.side_effects.is_empty():
            return None
        roots = [return_value, *self.side_effects.values()]
        cg = self.emit_graph_call(tx, roots, compile_graph)
        result = cg.store_temp(lambda: cg.load(return_value))
        self.side_effects.codegen(cg)
        # a function made in the trace that outlives the frame closes over the frame's own cells: they must hold
        # what the trace stored in them (the trace kept those writes to itself)
        frame_cells = {id(cell): name for name, cell in tx.cells.items() if name in own_cells(tx.code)}
        made_here = [v for v in reachable(roots) if isinstance(v, NestedFunctionVariable) and v.closure]
        for fn in made_here:
            for cell in fn.closure:
                if id(cell) in frame_cells and cell.value is not None:
                    cg.load(cell.value)
                    cg.emit("STORE_DEREF", frame_cells.pop(id(cell)))
        cg.emit("LOAD_FAST", result)
        cg.emit("RETURN_VALUE")
        return FinishedTrace(instructions=cg.instructions, temps=(GRAPH_OUT, *cg.temps))

    def _detached(self, node: torch.fx.Node) -> torch.fx.Node:
        detached = self.graph.call_method("detach", (node,))
        with self.fake_mode:
            detached.meta["example_value"] = node.meta["example_value"].detach()
        return detached

    def _collect_outputs(self, roots: list[Variable]) -> tuple[list[TensorVariable | SymbolicVariable], dict[int, int]]:
        """Tensors and symbolic numbers the Python side needs from the graph (inputs are reloaded from their
        sources), and each one's output position by `id` of its Variable. Variables of one tensor (an in-place
        op's result is its input: `t = d['a']; t -= 1` leaves `t is d['a']`) share one output, so that the
        program gets one tensor back, as in eager (fuzz 8178 of seed 1700000: a backend returned two)."""
        inputs = {id(i.node.meta["example_value"]): i for i in self.inputs}
        outputs: list[TensorVariable | SymbolicVariable] = []
        index: dict[int, int] = {}
        by_tensor: dict[int, int] = {}  # id of a tensor's fake -> its output position
        for v in reachable(roots):
            if not isinstance(v, (TensorVariable, SymbolicVariable)) or v.node.op == "placeholder":
                continue
            same = inputs.get(id(v.example)) if isinstance(v, TensorVariable) else None
            if same is not None and v.source is None:
                # an in-place op's result is its input (`self.total += x` stores the buffer itself): reload it
                # from there rather than return an alias of an input, which AOTAutograd got wrong (it returned
                # the wrong outputs when an input that requires grad was also mutated)
                v.source = same.source
                continue
            if isinstance(v, TensorVariable):
                index[id(v)] = by_tensor.setdefault(id(v.example), len(outputs))
                if index[id(v)] < len(outputs):
                    continue
            index[id(v)] = len(outputs)
            outputs.append(v)
        return outputs, index

    def _entry_grad_mode(self) -> bool | None:
        """True when the trace started without grad but the graph turns it on (a continuation that starts inside
        a `with no_grad()` block it then leaves): the graph is compiled, and run, with grad on, its first ops
        under an explicit switch off. A backend decides at compile time whether a graph is for training
        (AOTAutograd by the grad mode then) and would otherwise compile this one without autograd. None: the
        graph compiles and runs in the mode the trace started in."""
        if self.initial_grad_mode or not any(
            n.target is torch._C._set_grad_enabled and n.args[0] is True for n in self.graph.nodes
        ):
            return None
        first = next(n for n in self.graph.nodes if n.op != "placeholder")
        with self.graph.inserting_before(first):
            self.graph.call_function(torch._C._set_grad_enabled, (False,)).meta["example_value"] = None
        return True

    def _remove_unused_sizes(self, outputs: list[Variable]) -> None:
        """Drop size reads and size arithmetic nothing uses (the trace decided a branch on them, or read a whole
        `x.shape` for one dim): they would make a graph of an otherwise empty trace."""
        kept = {id(v.node) for v in outputs}
        for node in reversed(list(self.graph.nodes)):
            value = node.meta.get("example_value")
            sizes = value if isinstance(value, torch.Size) else (value,)
            if (
                node.op in ("call_function", "call_method")
                and not node.users
                and id(node) not in kept
                and all(isinstance(v, SYMBOLIC_TYPES) or type(v) is int for v in sizes)
            ):
                self.graph.erase_node(node)

    def _remove_unused_inputs(self) -> None:
        for graph_input in list(self.inputs):
            if not graph_input.node.users:
                self.graph.erase_node(graph_input.node)
                self.inputs.remove(graph_input)


def _is_module_state(value: torch.Tensor, source: Source) -> bool:
    """A module's parameter or buffer: its shape stays static under every dynamic policy (as in torch.compile)."""
    return isinstance(value, torch.nn.Parameter) or "._buffers[" in source.name()


def reachable(roots: Iterable[Variable]) -> list[Variable]:
    """Every Variable the roots hold, directly or through containers, closures and methods; each once."""
    seen: dict[int, Variable] = {}
    pending = list(reversed(list(roots)))
    while pending:
        var = pending.pop()
        if id(var) not in seen:
            seen[id(var)] = var
            pending.extend(reversed(var.children()))
    return list(seen.values())


class FinishedTrace:
    """The body of a replacement function and the temporaries it uses."""

    __slots__ = ("instructions", "temps")

    def __init__(self, *, instructions: list, temps: tuple[str, ...]) -> None:
        self.instructions = instructions
        self.temps = temps
