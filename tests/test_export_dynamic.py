"""Export with dynamic dims: `dynamic_shapes` with framejit.Dim, the constraints returned with the
guards, stack traces on nodes, and saved programs (ONNX, TorchScript) that run in a fresh process without
framejit, with the dynamic dims still dynamic."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import framejit


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, bias):
        b, t, d = x.shape
        h = self.proj(x).view(b, t, 2, d // 2).transpose(1, 2)  # heads
        scores = (h @ h.transpose(-1, -2)).softmax(-1)
        return (scores @ h).transpose(1, 2).reshape(b, t, d) + bias


BATCH, SEQ = framejit.Dim("batch", min=1, max=32), framejit.Dim("seq", min=2, max=128)


def example():
    torch.manual_seed(1)
    return torch.randn(2, 5, 8), torch.randn(8)


def export_encoder():
    model = Encoder()
    gm, guards = framejit.export(model, *example(), dynamic_shapes={"x": {0: BATCH, 1: SEQ}})
    return model, gm, guards


SIZES = [(1, 3), (4, 7), (3, 16)]


def test_exported_graph_has_symbolic_sizes_and_runs_for_other_sizes():
    model, gm, guards = export_encoder()
    for b, t in SIZES:
        x, bias = torch.randn(b, t, 8), torch.randn(8)
        torch.testing.assert_close(gm(x, bias), model(x, bias))
    (shape_guard,) = [g for g in guards if g.kind == "SHAPE_ENV"]
    text = " and ".join(shape_guard.code_list)
    assert "L['x'].size()[1] <= 128" in text and "L['x'].size()[0] <= 32" in text, text


def test_nodes_carry_the_user_stack_trace():
    _, gm, _ = export_encoder()
    traced = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    assert traced and all("stack_trace" in n.meta for n in traced)
    assert any("scores = (h @ h.transpose(-1, -2)).softmax(-1)" in n.meta["stack_trace"] for n in traced)


def test_a_dim_the_code_forces_to_a_value_is_an_error_naming_it():
    def needs_the_size(x):
        return x * len([0] * x.shape[0])

    with pytest.raises(
        framejit.exc.Unsupported,
        match=r"mark_dynamic\(L\['x'\], 0, min=1, max=32\) asked for a "
        r"symbolic size, but the code needs it to be 4",
    ):
        framejit.export(needs_the_size, torch.randn(4), dynamic_shapes={"x": {0: BATCH}})


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"z": {0: BATCH}}, "names \\['z'\\], which are not arguments"),
        ({"x": {0: 3}}, "is 3, not a framejit.Dim or None"),
    ],
)
def test_bad_dynamic_shapes_are_clear_errors(spec, message):
    with pytest.raises(framejit.exc.UserError, match=message):
        framejit.export(lambda x: x * 2, torch.randn(4), dynamic_shapes=spec)


def test_export_leaves_no_marks_on_the_arguments():
    x, bias = example()
    framejit.export(Encoder(), x, bias, dynamic_shapes={"x": {0: BATCH}})
    assert not [a for a in vars(x) if a.startswith("_framejit")]


RUN_SAVED = textwrap.dedent("""
    import sys
    import torch
    kind, path, data = sys.argv[1:]
    inputs, expected = torch.load(data)
    if kind == "onnx":
        import onnxruntime
        session = onnxruntime.InferenceSession(path)
        names = [i.name for i in session.get_inputs()]
        run = lambda *a: torch.from_numpy(session.run(None, dict(zip(names, (t.numpy() for t in a))))[0])
    else:
        run = torch.jit.load(path)
    for args, want in zip(inputs, expected):
        torch.testing.assert_close(run(*args), want, rtol=1e-4, atol=1e-5)
    assert not any(m.startswith("framejit") for m in sys.modules), "framejit was imported"
    print("ran", len(inputs), "sizes")
""")


@pytest.mark.parametrize("kind", ["torchscript", pytest.param("onnx", marks=pytest.mark.slow)])
def test_saved_program_runs_in_a_fresh_process_without_framejit(kind, tmp_path):
    model, gm, _ = export_encoder()
    path = str(tmp_path / ("m.onnx" if kind == "onnx" else "m.pt"))
    (framejit.save_onnx if kind == "onnx" else framejit.save_torchscript)(gm, path, *example())
    inputs = [(torch.randn(b, t, 8), torch.randn(8)) for b, t in SIZES]
    with torch.no_grad():
        expected = [model(*args) for args in inputs]
    torch.save((inputs, expected), tmp_path / "data.pt")
    (tmp_path / "run_saved.py").write_text(RUN_SAVED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run_saved.py"), kind, path, str(tmp_path / "data.pt")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ran {len(SIZES)} sizes" in done.stdout


def test_data_dependent_ops_stay_in_the_exported_graph():
    # nonzero, boolean masks, unique and .item() feeding a size: unbacked sizes, computed by the graph on each call
    from tests.test_dynamic_shapes import DATA, data_dependent_sizes, item_feeds_a_size

    gm, _ = framejit.export(data_dependent_sizes, DATA[0])
    for x in DATA[:2]:
        assert all(torch.equal(g, w) for g, w in zip(gm(x), data_dependent_sizes(x), strict=True))
    gm, _ = framejit.export(item_feeds_a_size, torch.tensor([1, 2]))
    for x in (torch.tensor([1, 2]), torch.tensor([3, 4])):
        assert all(torch.equal(g, w) for g, w in zip(gm(x), item_feeds_a_size(x), strict=True))
