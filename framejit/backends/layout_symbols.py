"""The symbols of the inputs' sizes, strides and storage offsets, passed to AOTAutograd as inputs of their own where
it needs them: when inputs share memory and one is written, it merges them into one base and makes each input
again from it (`as_strided` with the input's symbolic layout), in a graph where nothing else binds those symbols
("s0 is not tracked with proxy"). TorchDynamo's graphs take every such symbol as an input; here only those graphs
do."""

from __future__ import annotations

from typing import Any, Callable

import torch

from framejit.op_effects import inputs_share_storage
from framejit.shapes import is_symbolic

Compile = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]
# where a symbol is read in a call: (input position, "size" / "stride" / "offset", dim)
Reader = tuple[int, str, int]


def binding_layout_symbols(compile_one: Compile) -> Compile:
    """`compile_one`, given the graph with the layout symbols of its tensor inputs as leading SymInt inputs where
    inputs share memory; the callable it returns reads them from the tensors at each call."""

    def compile_binding(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        lifted = _lift(gm, example_inputs) if inputs_share_storage(example_inputs) else None
        if lifted is None:
            return compile_one(gm, example_inputs)
        gm2, examples, readers = lifted
        compiled = compile_one(gm2, examples)

        def run(*args: Any) -> Any:
            return compiled(*(_read(args[i], what, d) for i, what, d in readers), *args)

        return run

    return compile_binding


def _read(t: torch.Tensor, what: str, d: int) -> int:
    return t.size(d) if what == "size" else t.stride(d) if what == "stride" else t.storage_offset()


def _lift(
    gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> tuple[torch.fx.GraphModule, list[Any], list[Reader]] | None:
    """A copy of `gm` with a leading SymInt input for each symbol of its inputs' layouts, the examples for them,
    and where each is read; None where there is none, or one that no size, stride or offset is by itself."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    found: dict[Any, tuple[torch.SymInt, Reader]] = {}
    wanted: set[Any] = set()
    for i, node in enumerate(placeholders):
        fake = node.meta.get("example_value")
        if isinstance(fake, torch.SymInt) and is_symbolic(fake):  # an int input binds its own symbol
            found.setdefault(fake.node.expr, (fake, (-1, "", -1)))
        if not isinstance(fake, torch.Tensor):
            continue
        layout = [
            *((n, (i, "size", d)) for d, n in enumerate(fake.shape)),
            *((n, (i, "stride", d)) for d, n in enumerate(fake.stride())),
            (fake.storage_offset(), (i, "offset", 0)),
        ]
        for n, reader in layout:
            if is_symbolic(n):
                wanted |= n.node.expr.free_symbols
                if n.node.expr.is_Symbol:
                    found.setdefault(n.node.expr, (n, reader))
    lifted = [(sym, reader) for sym, reader in found.values() if reader[0] >= 0]
    if not lifted or not wanted <= set(found):
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for k, (sym, _) in enumerate(lifted):
        node = graph.placeholder(f"layout_symbol_{k}")
        node.meta["example_value"] = sym
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, env.__getitem__)
    copy = torch.fx.GraphModule(gm, graph)
    copy.meta.update(gm.meta)
    return copy, [sym for sym, _ in lifted] + list(example_inputs), [reader for _, reader in lifted]
