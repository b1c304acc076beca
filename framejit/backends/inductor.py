"""TorchInductor: `torch._inductor.compile_fx.compile_fx`, with `mode`/`options` from `framejit.compile` as in
torch.compile (a mode is a preset of inductor config options; `options` override it)."""

from __future__ import annotations

import copy
import difflib
from typing import Any, Callable

import torch

from framejit import fate
from framejit.as_eager.autograd_parts import compile_per_autograd_part
from framejit.as_eager.input_writes import statistics_read_then_written, why_aot_cannot
from framejit.backends.aot import compiled_or_own_ops
from framejit.backends.layout_symbols import binding_layout_symbols
from framejit.backends.common import without_capture
from framejit.backends.registry import register_backend
from framejit.backends.static_inputs import inductor_partitioner, static_input_indices


def inductor_config_patches(mode: str | None = None, options: dict | None = None) -> dict[str, Any]:
    """The inductor config patches for `mode` plus `options` (options win), checked: an unknown mode or
    option name is a ValueError here rather than an AttributeError deep inside inductor."""
    import torch._inductor as ti

    patches: dict[str, Any] = {}
    if mode is not None:
        try:
            patches.update(ti.list_mode_options(mode))
        except RuntimeError as e:  # "Unrecognized mode=..., should be one of: ..."
            raise ValueError(f"inductor: {e}") from None
    if options:
        known = set(ti.list_options())
        unknown = [k for k in options if k not in known]
        if unknown:
            hints = {k: difflib.get_close_matches(k, known, n=3) for k in unknown}
            raise ValueError(
                "inductor: unknown option(s) "
                + ", ".join(
                    f"{k!r}" + (f" (did you mean {' or '.join(map(repr, h))}?)" if h else "") for k, h in hints.items()
                )
                + "; torch._inductor.list_options() lists them"
            )
        patches.update(options)
    return patches


def inductor(
    gm: torch.fx.GraphModule, example_inputs: list[Any], *, mode: str | None = None, options: dict | None = None
) -> Callable[..., Any]:
    """Compile with TorchInductor (C++/OpenMP on CPU, Triton on GPU); works for training (inductor runs
    AOTAutograd itself)."""
    from torch._inductor.compile_fx import compile_fx

    patches = inductor_config_patches(mode, options)
    if (why := why_aot_cannot(gm, example_inputs)) is not None:
        fate.ran_as_torch_ops(why)
        return gm
    if torch.is_grad_enabled() and statistics_read_then_written(gm.graph):
        fate.ran_as_torch_ops(
            "a batch norm in eval mode saves running statistics that a later train-mode batch "
            "norm writes: eager's backward reads the written values, inductor's the saved ones"
        )
        return gm
    # compile_fx takes ownership of the module and may rewrite its graph in place; a composing backend
    # (or autotune) may hand the same module to another backend afterwards, so it gets a copy.
    return compile_per_autograd_part(
        gm,
        example_inputs,
        binding_layout_symbols(
            lambda part, inputs: compiled_or_own_ops(
                lambda noting: compile_fx(
                    flat_index_reductions(torch.fx.GraphModule(part, copy.deepcopy(part.graph))),
                    inputs,
                    config_patches=_telling_static_inputs(patches, part, inputs),
                    inner_compile=noting(_compile_inner_without_capture),
                ),
                part,
                inputs,
                "inductor",
            )
        ),
        ops_when_nothing_saved=True,
    )


_INDEX_REDUCTIONS = (torch.argmax, torch.argmin, "argmax", "argmin")


def flat_index_reductions(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with each argmax/argmin over all elements taken of its input flattened (`t.reshape(-1)`), which is what
    the index counts in. Inductor (torch 2.13, CPU; torch.compile too) returns the element's place in memory
    instead, where the reduced tensor is laid out otherwise (`(x * x).argmax()` of a transposed `x`)."""
    graph, rewritten = gm.graph, False
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method") or node.target not in _INDEX_REDUCTIONS:
            continue
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        keepdim = node.kwargs.get("keepdim", node.args[2] if len(node.args) > 2 else False)
        value = node.meta.get("example_value")
        if (
            dim is not None
            or not isinstance(node.args[0], torch.fx.Node)
            or (keepdim is not False and not isinstance(value, torch.Tensor))
        ):
            continue
        with graph.inserting_before(node):
            flat = graph.call_method(
                node.target if node.op == "call_method" else node.target.__name__,
                (graph.call_method("reshape", (node.args[0], -1)),),
            )
        if keepdim is not False:  # (then the index has the input's number of dims, each of size 1)
            with graph.inserting_after(flat):
                flat = graph.call_method("reshape", (flat, [1] * value.dim()))
        node.replace_all_uses_with(flat)
        flat.meta.update(node.meta)
        graph.erase_node(node)
        rewritten = True
    if rewritten:
        gm.recompile()
    return gm


def _telling_static_inputs(
    patches: dict[str, Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> dict[str, Any]:
    """`patches`, with a partitioner told which inputs are the model's parameters and buffers (unless the user's
    options name a partitioner of their own)."""
    if patches.get("custom_partitioner_fn") is not None or not torch.is_grad_enabled():
        return patches  # (an inference graph is not partitioned)
    partitioner = inductor_partitioner(static_input_indices(gm, example_inputs))
    return patches if partitioner is None else {**patches, "custom_partitioner_fn": partitioner}


def _compile_inner_without_capture(gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
    """inductor's compile_fx_inner, run with capture off, returning code that runs with capture off.

    The backward graph is compiled lazily, inside the user's `loss.backward()`, and later runs there: framejit
    would otherwise capture inductor's helpers (filelock...) and its generated `call` as user code."""
    from torch._inductor.compile_fx import compile_fx_inner

    compiled = without_capture(compile_fx_inner, compiler=True)(gm, example_inputs, **kwargs)
    # Only the backward needs it: framejit already runs the forward (the graph it called the backend for) with
    # capture off, and the forward's per-call cost is what speedups are measured on.
    if kwargs.get("is_backward") and getattr(compiled, "current_callable", None) is not None:
        compiled.current_callable = without_capture(compiled.current_callable)  # what CompiledFxGraph calls
    return compiled


inductor.accepts_mode_and_options = True  # type: ignore[attr-defined]  (framejit.compile passes them)
inductor.check_mode_and_options = inductor_config_patches  # type: ignore[attr-defined]  (and checks them first)
register_backend(inductor, name="inductor")
