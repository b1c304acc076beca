"""PyTorch Geometric: the GCN, GAT and GraphSAGE models of torch_geometric.nn (2 layers, 16 -> 32 -> 4) on synthetic
graphs of 3 sizes (10, 17 and 29 nodes, 4 edges a node), without PyG's optional C extensions (torch_scatter,
torch_sparse, pyg_lib: scatter is torch's scatter_reduce).

GCN and GAT drop self-loops with a boolean mask (`edge_index[:, mask]`), whose size depends on the data: a graph
break under both compilers, so each model is several graphs. The first size compiles static graphs, the second
recompiles with symbolic sizes, the third compiles nothing. framejit makes one graph more per layer after the first
(LOOP_RESUMED): it resumes after the break inside BasicGNN.forward's loop over the layers, where torch.compile runs
that frame as Python; so framejit's extra graphs are code torch.compile leaves uncompiled (more ops in graphs)."""

from __future__ import annotations

import warnings

import pytest
import torch

import framejit
from framejit.testing import CompileCounter
from tests.reallibs.compare import (
    assert_not_more_graphs,
    import_or_skip,
    run_framejit,
    run_torch_compile,
)
from tests.reliability.many_calls import CALLS, one_thread  # noqa: F401 (a fixture)

torch_geometric = import_or_skip("torch_geometric")
pyg_models = import_or_skip("torch_geometric.nn.models")

SIZES = (10, 17, 29)
TOL = {"rtol": 1e-4, "atol": 1e-5}
MODELS = ("GCN", "GAT", "GraphSAGE")
# graphs after each size, as measured
GRAPHS = {
    "GCN": {"framejit": [6, 13, 13], "torch.compile": [5, 11, 11]},
    "GAT": {"framejit": [6, 12, 12], "torch.compile": [5, 10, 10]},
    "GraphSAGE": {"framejit": [1, 2, 2], "torch.compile": [1, 2, 2]},
}
BREAK = "getitem has a data-dependent output (DynamicOutputShapeException)"
# framejit resumes in the loop after the break in each conv layer and compiles the activation and dropout between
# the layers as a graph of their own; torch.compile runs a frame with a graph break in a loop as Python
LOOP_RESUMED = ("GCN", "GAT")


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(pyg_models, name)(16, 32, num_layers=2, out_channels=4).eval()


def graph(nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random node features (nodes, 16) and 4 * nodes random directed edges (self-loops among them)."""
    generator = torch.Generator().manual_seed(nodes)
    features = torch.randn(nodes, 16, generator=generator)
    return features, torch.randint(0, nodes, (2, 4 * nodes), generator=generator)


def steps(sizes=SIZES) -> list:
    def make_step(nodes):
        def step(fn):
            with torch.no_grad():
                return fn(*graph(nodes))

        return step

    return [make_step(nodes) for nodes in sizes]


def test_no_optional_c_extensions():
    """The tests run PyG's pure-PyTorch paths."""
    assert not torch_geometric.typing.WITH_TORCH_SCATTER
    assert not torch_geometric.typing.WITH_TORCH_SPARSE


@pytest.mark.parametrize("name", MODELS)
def test_matches_eager_over_three_sizes(name):
    gnn = model(name)
    want = [step(gnn) for step in steps()]
    run = run_framejit(gnn, steps())
    torch.testing.assert_close(run.results, want, **TOL)
    assert run.counts == GRAPHS[name]["framejit"]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_graphs_and_recompiles_against_torch_compile(name):
    gnn = model(name)
    want = [step(gnn) for step in steps()]
    theirs = run_torch_compile(gnn, steps())
    ours = run_framejit(gnn, steps())
    torch.testing.assert_close(theirs.results, want, **TOL)
    torch.testing.assert_close(ours.results, want, **TOL)
    assert theirs.counts == GRAPHS[name]["torch.compile"]
    if name not in LOOP_RESUMED:
        assert_not_more_graphs(ours.counts, theirs.counts)
        return
    # the same break, one graph more per layer after the first (2 layers), and more of the program in graphs
    framejit.reset()
    assert {reason.reason for reason in framejit.explain(gnn)(*graph(SIZES[0])).break_reasons} == {BREAK}
    assert ours.counts[0] == theirs.counts[0] + 1
    assert all(o > t for o, t in zip(ours.ops, theirs.ops, strict=True)), (ours.ops, theirs.ops)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name", MODELS)
def test_called_100_times_on_graphs_of_the_three_sizes(name):
    """Fresh graphs of the three sizes in turn: after the first round of sizes, nothing compiles."""
    gnn = model(name)
    counter = CompileCounter()
    compiled = framejit.optimize(counter)(gnn)
    with torch.no_grad():
        for call in range(CALLS):
            features, edges = graph(SIZES[call % len(SIZES)])
            features = features + call  # new values each call
            want = gnn(features, edges)
            torch.testing.assert_close(compiled(features, edges), want, **TOL, msg=lambda m: f"call {call}: {m}")
            if call == len(SIZES) - 1:
                warm = counter.frame_count
    assert counter.frame_count == warm == GRAPHS[name]["framejit"][-1]
