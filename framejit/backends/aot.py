"""AOTAutograd: backends whose compilers see canonical ATen graphs for forward and backward (for training)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from framejit import fate
from framejit.as_eager.autograd_parts import compile_per_autograd_part
from framejit.as_eager.input_writes import why_aot_cannot
from framejit.backends.common import without_capture
from framejit.backends.layout_symbols import binding_layout_symbols
from framejit.backends.registry import register_backend
from framejit.backends.static_inputs import static_input_indices, with_static_inputs
from framejit.contracts import Backend
from framejit.op_effects import inputs_share_storage

AOTCompiler = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def make_boxed_func(fn: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """functorch's make_boxed_func: `fn(*args)` as `g(args)` (AOTAutograd's "boxed" calling convention,
    which lets the runtime free inputs early)."""
    from torch._functorch.aot_autograd import make_boxed_func as functorch_make_boxed_func

    return functorch_make_boxed_func(fn)


def _boxed(compiler: AOTCompiler) -> AOTCompiler:
    """Box what a user's compiler returns if it did not (as the seeds' `gm.forward`), instead of letting
    AOTAutograd warn on every graph."""

    def compile_boxed(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled = compiler(gm, example_inputs)
        if compiled is None or getattr(compiled, "_boxed_call", False):
            return compiled
        return make_boxed_func(compiled)

    compile_boxed.__name__ = getattr(compiler, "__name__", "compiler")
    compile_boxed.__wrapped__ = compiler  # type: ignore[attr-defined]
    return compile_boxed


def _no_capture_bw(compiler: AOTCompiler) -> AOTCompiler:
    """The backward compiler, and the backward it returns, run with capture off: both run during the user's
    `loss.backward()`, possibly inside a framejit context, and are not user code to capture."""
    compile_quietly = without_capture(compiler, compiler=True)

    def compile_backward(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled = compile_quietly(gm, example_inputs)
        return None if compiled is None else without_capture(compiled)

    compile_backward.__name__ = getattr(compiler, "__name__", "bw_compiler")
    return compile_backward


def aot_autograd(
    fw_compiler: AOTCompiler, bw_compiler: AOTCompiler | None = None, decompositions: dict | None = None, **kwargs: Any
) -> Backend:
    """A backend that runs AOTAutograd on the captured graph and hands the ATen forward graph to
    `fw_compiler` and the backward graph to `bw_compiler` (default: `fw_compiler`).

    Graphs compiled without autograd (under `torch.no_grad()`) get one inference graph, compiled by
    `inference_compiler` if given, else `fw_compiler`. Other keyword arguments (`partition_fn`,
    `keep_inference_input_mutations`, ...) go to `torch._functorch.aot_autograd.aot_module_simplified`."""
    return _aot_backend(fw_compiler, bw_compiler, decompositions, ops_when_nothing_saved=False, **kwargs)


def _aot_backend(
    fw_compiler: AOTCompiler,
    bw_compiler: AOTCompiler | None,
    decompositions: dict | None,
    *,
    ops_when_nothing_saved: bool,
    name: str | None = None,
    **kwargs: Any,
) -> Backend:
    """aot_autograd's backend; with `ops_when_nothing_saved`, a training graph that saves no tensor for backward
    runs as its torch ops (a built-in backend's choice: a user's compiler expects to see every graph)."""
    if not callable(fw_compiler):
        raise TypeError(f"fw_compiler must be callable, got {type(fw_compiler).__name__}")
    fw = _boxed(fw_compiler)
    bw = _no_capture_bw(_boxed(bw_compiler if bw_compiler is not None else fw_compiler))
    if kwargs.get("inference_compiler") is not None:
        kwargs["inference_compiler"] = _boxed(kwargs["inference_compiler"])

    def compile_with_aot(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        if (why := why_aot_cannot(gm, example_inputs)) is not None:
            fate.ran_as_torch_ops(why)
            return gm
        return compile_per_autograd_part(
            gm, example_inputs, binding_layout_symbols(compile_one), ops_when_nothing_saved
        )

    def compile_one(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._functorch.aot_autograd import aot_module_simplified

        options = dict(kwargs)
        if "partition_fn" in options:
            options["partition_fn"] = with_static_inputs(
                options["partition_fn"], static_input_indices(gm, example_inputs)
            )
        # The returned callable takes the graph's inputs unboxed (`f(*args)`), as framejit calls graphs.
        return compiled_or_own_ops(
            lambda noting: aot_module_simplified(
                gm,
                example_inputs,
                fw_compiler=noting(fw),
                bw_compiler=noting(bw),
                decompositions=decompositions,
                **options,
            ),
            gm,
            example_inputs,
            name,
        )

    name = name or f"aot_autograd({getattr(fw_compiler, '__name__', 'compiler')})"
    compile_with_aot.__name__ = name
    return compile_with_aot


def compiled_or_own_ops(
    compile: Callable[[Callable[[AOTCompiler], AOTCompiler]], Callable[..., Any]],
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    name: str,
) -> Callable[..., Any]:
    """What `compile(noting)` returns (it runs AOTAutograd, with each compiler it hands it wrapped by `noting`), or
    `gm` itself, run as its torch ops, where AOTAutograd refused the graph but its forward runs.

    In training, only the backward can't be derived then (an input of a differentiated op modified in place, an op
    without a derivative): eager raises that in `backward()`, if the program ever calls it. Without grad,
    AOTAutograd's own checks refused the inputs (aliased inputs it cannot classify). Either way the graph's torch
    ops, run as they are, do exactly what eager does, and autograd records them. Once AOTAutograd reached a
    compiler, the graph was accepted: any failure from then on (the compiler's, or a call of it that does not fit)
    is raised, never taken for the graph's."""
    entered: list[AOTCompiler] = []

    def noting(compiler: AOTCompiler) -> AOTCompiler:
        # (*args, **kwargs: AOTAutograd and inductor pass keywords of their own, which vary between torch releases)
        def compile_noting(*args: Any, **kwargs: Any) -> Callable[..., Any]:
            entered.append(compiler)
            return compiler(*args, **kwargs)

        compile_noting.__name__ = getattr(compiler, "__name__", "compiler")
        return compile_noting

    training = torch.is_grad_enabled()
    try:
        with _no_autograd_cache_if_inputs_share_storage(example_inputs), _no_donated_buffers():
            compiled = compile(noting)
    except Exception as e:
        # a graph that switches grad mode leaves it switched where AOTAutograd's tracing stopped
        torch._C._set_grad_enabled(training)
        if entered or not _forward_alone_runs(gm, example_inputs):
            raise
        fate.ran_as_torch_ops(
            f"AOTAutograd cannot compile it{'s backward' if training else ''} ({type(e).__name__}: {e})"
        )
        return gm
    fate.compiled_by(name)
    return compiled


def _no_autograd_cache_if_inputs_share_storage(example_inputs: list[Any]) -> Any:
    """AOTAutograd's cache off for a graph whose inputs share storage: its key leaves out where in the storage
    each input starts, while the compiled code it stores writes and views the inputs at the offsets of the first
    compile (a graph for `x[3]` and `x` would write `x[2]`)."""
    if not inputs_share_storage(example_inputs):
        return contextlib.nullcontext()
    import torch._functorch.config

    return torch._functorch.config.patch(enable_autograd_cache=False)


@contextlib.contextmanager
def _no_donated_buffers() -> Any:
    """AOTAutograd gives the backward no saved tensor to reuse as scratch (a "donated buffer"). One that does
    destroys what it saved, and AOTAutograd then refuses every later `backward(retain_graph=True)` of the graph
    ("compiled with non-empty donated buffers"), where eager runs it. The donated positions come from one
    function; with none, the backward keeps its saved tensors and the refusal does not fire. (Turning
    `config.donated_buffer` off does not do it: the check at run time reads that global flag.)"""
    from torch._functorch._aot_autograd import graph_compile

    collect = graph_compile.collect_bw_donated_buffer_idxs
    graph_compile.collect_bw_donated_buffer_idxs = lambda *args, **kwargs: []
    try:
        yield
    finally:
        graph_compile.collect_bw_donated_buffer_idxs = collect


def _forward_alone_runs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Whether `gm`'s forward runs (on fake copies of the inputs, without autograd): if so, what failed was
    deriving its backward."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        fakes = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in example_inputs]
        with mode, torch.no_grad():
            gm(*fakes)
    except Exception:  # noqa: BLE001 - any failure: the forward fails too, so the first error stands
        return False
    return True


def boxed_nop(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[[list[Any]], Any]:
    """An ATen-graph compiler that compiles nothing: the graph's Python forward, boxed."""
    return make_boxed_func(gm.forward)


@register_backend(name="aot_eager")
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOTAutograd with eager forward and backward: checks that a graph survives AOTAutograd (functionalization,
    the ATen decomposition of autograd, the partition into forward and backward) without a compiler."""
    # Input mutations (BatchNorm's running stats) stay in the inference graph as in-place ops, as TorchDynamo's
    # aot_eager does, rather than becoming a copy after the graph. The min-cut partitioner (TorchDynamo's choice
    # too) decides what the backward saves; the default one refuses a random op's (tuple) result it would save.
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return _aot_backend(
        boxed_nop,
        None,
        None,
        ops_when_nothing_saved=True,
        keep_inference_input_mutations=True,
        partition_fn=min_cut_rematerialization_partition,
        name="aot_eager",
    )(gm, example_inputs)
