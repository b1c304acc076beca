"""`framejit bench`: the suite runs in-process, writes CSV/JSON/Markdown, isolates failures, compares torch.compile."""

import csv
import json

import pytest
import torch
from torch import nn

import framejit
from framejit.__main__ import main
from framejit.bench import models
from framejit.bench.report import COLUMNS


def _rows(out_dir):
    with open(out_dir / "bench.csv", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        return list(reader)


def test_quick_suite_writes_table_csv_json(tmp_path, capsys):
    assert main(["bench", "--quick", "--models", "mlp,cnn", "--backend", "eager", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    for header in (
        "model",
        "mode",
        "backend",
        "graphs",
        "breaks",
        "first call s",
        "eager ms",
        "compiled ms",
        "speedup",
        "max error",
    ):
        assert header in out
    assert "done" in err  # the progress bar
    rows = _rows(tmp_path)
    assert sorted((r["model"], r["mode"], r["backend"], r["jit"]) for r in rows) == sorted(
        (m, mode, "eager", "framejit") for m in ("mlp", "cnn") for mode in ("infer", "train")
    )
    assert all(r["status"] != "error" for r in rows), rows
    assert all(float(r["eager_ms"]) > 0 and float(r["compiled_ms"]) > 0 for r in rows)
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["columns"] == list(COLUMNS) and len(data["rows"]) == 4
    assert all("notes" in r for r in data["rows"])
    assert (tmp_path / "bench.md").read_text().startswith("| model")
    mlp_infer = next(r for r in rows if r["model"] == "mlp" and r["mode"] == "infer")
    assert int(mlp_infer["graphs"]) >= 1 and float(mlp_infer["max_error"]) <= 1e-5


class Boom(nn.Module):
    def forward(self, x):
        raise RuntimeError("this model is broken")


def test_a_failing_model_is_an_error_row_and_the_run_continues(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(
        models.SUITE, "boom", lambda quick: models.Case(Boom(), torch.randn(2, 2), torch.randn(2), models.mse_loss)
    )
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "boom,mlp",
                "--modes",
                "infer",
                "--backend",
                "eager",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = {r["model"]: r for r in _rows(tmp_path)}
    assert rows["boom"]["status"] == "error" and "this model is broken" in rows["boom"]["error"]
    assert rows["mlp"]["status"] == "ok"
    assert "this model is broken" in capsys.readouterr().out


def test_a_backend_with_wrong_results_is_reported_as_mismatch(tmp_path, monkeypatch):
    def off_by_one(gm, example_inputs):
        return lambda *args: [t + 1 for t in gm(*args)]

    monkeypatch.setitem(framejit.backends.BACKENDS, "off_by_one_test", off_by_one)
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "mlp",
                "--backend",
                "off_by_one_test",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = _rows(tmp_path)
    assert [r["status"] for r in rows] == ["mismatch", "mismatch"]
    assert all(float(r["max_error"]) > 0.5 for r in rows)


@pytest.mark.slow
def test_compare_torch_adds_torch_compile_rows(tmp_path):
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "mlp",
                "--backend",
                "eager",
                "--compare-torch",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = _rows(tmp_path)
    assert sorted((r["mode"], r["jit"]) for r in rows) == [
        ("infer", "framejit"),
        ("infer", "torch.compile"),
        ("train", "framejit"),
        ("train", "torch.compile"),
    ]
    torch_rows = [r for r in rows if r["jit"] == "torch.compile"]
    assert all(r["status"] == "ok" and int(r["graphs"]) >= 1 and r["breaks"] == "0" for r in torch_rows), torch_rows


def test_backends_repeatable_and_comma_separated(tmp_path):
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "rnn",
                "--modes",
                "infer",
                "--backend",
                "eager,aot_eager",
                "--backend",
                "eager",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert [r["backend"] for r in _rows(tmp_path)] == ["eager", "aot_eager"]


def test_unknown_model_is_a_usage_error():
    with pytest.raises(SystemExit, match="unknown model"):
        main(["bench", "--models", "nope"])


def test_autotune_rows_say_what_was_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMEJIT_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
    monkeypatch.setenv("FRAMEJIT_AUTOTUNE_CANDIDATES", "eager,aot_eager")
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "mlp",
                "--modes",
                "infer",
                "--backend",
                "autotune",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert row["status"] == "ok" and any(n.startswith("autotune: ") for n in row["notes"]), row


@pytest.mark.slow
def test_jits_take_turns_going_first_and_reports_keep_suite_order(tmp_path):
    from framejit.bench.runner import BenchOptions, jobs

    opts = BenchOptions(models=["mlp", "cnn"], compare_torch=True)
    firsts = [row[3] for i, row in enumerate(jobs(opts)) if i % 2 == 0]
    assert firsts == ["framejit", "torch.compile", "framejit", "torch.compile"]
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                "mlp",
                "--backend",
                "eager",
                "--compare-torch",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert [(r["mode"], r["jit"]) for r in _rows(tmp_path)] == [
        ("infer", "framejit"),
        ("infer", "torch.compile"),
        ("train", "framejit"),
        ("train", "torch.compile"),
    ]
    summary = (tmp_path / "bench.md").read_text()
    assert "first calls framejit eager infer:" in summary and "first calls torch.compile eager train:" in summary


def test_cold_rows_start_without_memos_of_an_earlier_compile():
    import sympy
    from torch._inductor import sizevars
    from torch._subclasses.fake_tensor import FakeTensorMode

    from framejit.bench.runner import _compile_caches

    x = sympy.Symbol("x")
    sizevars.stride_at(3 * x, x)  # as inductor's index simplification leaves behind
    assert sizevars.stride_at.cache_info().currsize > 0
    with _compile_caches("inductor", cold=True):
        assert sizevars.stride_at.cache_info().currsize == 0
        assert FakeTensorMode.cache_info().size == 0


@pytest.mark.slow  # (30 s: the fast tier has the HF zoo's own tests)
def test_hf_suite_runs_transformers_models_in_one_graph(tmp_path):
    assert (
        main(
            [
                "bench",
                "--suite",
                "hf",
                "--quick",
                "--models",
                "bert,t5,resnet",
                "--backend",
                "eager",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = _rows(tmp_path)
    assert [(r["model"], r["mode"]) for r in rows] == [
        (m, mode) for m in ("bert", "t5", "resnet") for mode in ("infer", "train")
    ]
    assert all(r["status"] == "ok" and r["graphs"] == "1" and r["breaks"] == "0" for r in rows), rows


def test_unknown_model_of_the_hf_suite_names_the_choices():
    with pytest.raises(SystemExit, match="choose from bert, roberta"):
        main(["bench", "--suite", "hf", "--models", "mlp"])


def _hf_sweep():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "hf_sweep.py"
    spec = importlib.util.spec_from_file_location("hf_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_hf_sweep_builds_tiny_models_with_inputs_and_runs_both_jits():
    pytest.importorskip("transformers")
    sweep = _hf_sweep()
    bert, vit = sweep.build_model("bert"), sweep.build_model("vit")
    assert (
        bert.config.hidden_size,
        bert.config.num_hidden_layers,
        bert.config.num_attention_heads,
        bert.config.intermediate_size,
        bert.config.vocab_size,
    ) == (32, 2, 2, 37, 99)
    assert (vit.config.image_size, vit.config.patch_size) == (32, 8)
    assert set(sweep.candidate_inputs(bert)[0]) == {"input_ids", "attention_mask"}
    assert sweep.candidate_inputs(vit)[0]["pixel_values"].shape == (2, 3, 32, 32)
    row = sweep.run_model("bert")
    assert row["status"] == "built" and row["inputs"] == "input_ids[2, 8],attention_mask[2, 8]"
    assert (row["fj_status"], row["fj_graphs"], row["fj_breaks"]) == ("ok", 1, 0), row
    assert (row["tc_status"], row["tc_graphs"]) == ("ok", 1), row
    from benchmarks.hf_sweep_report import normalise

    assert normalise("call to <function f at 0x7f00> line 12") == "call to <function f at <addr>> line N"
    assert sweep.compare((torch.ones(2),), (torch.ones(2) + 1e-6,))[0]
    assert not sweep.compare((torch.ones(2),), (torch.ones(2) + 1,))[0]
    init = torch.nn.Module.__init__
    sweep.TRAIN = True  # --train: a step under aot_eager, the gradients compared too
    row = sweep.run_model("bert")
    assert (row["fj_status"], row["fj_graphs"], row["tc_status"]) == ("ok", 1, "ok"), row
    assert torch.nn.Module.__init__ is init  # torch.compile's wrapping of it is undone
    expected, grads = sweep.step(sweep.build_model("bert"), lambda **kw: None, {})
    assert expected is None and grads and all(g is None for g in grads)


@pytest.mark.slow
@pytest.mark.parametrize("model", list(models.SUITE))
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_backend_compiles_every_graph_of_every_bench_model(tmp_path, backend, model):
    """No silent slow path. Every framejit graph of the suite is compiled whole by the backend asked
    for, in inference and training, and inductor generates kernels for each model."""
    from torch._inductor import metrics

    metrics.reset()
    assert (
        main(
            [
                "bench",
                "--quick",
                "--models",
                model,
                "--backend",
                backend,
                "--iters",
                "1",
                "--warmup",
                "0",
                "--no-progress",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = _rows(tmp_path)
    assert [r["mode"] for r in rows] == ["infer", "train"]
    for r in rows:
        assert r["status"] == "ok", r
        assert int(r["graphs"]) >= 1 and r["compiled"] == f"{r['graphs']}/{r['graphs']}", r
    if backend == "inductor":
        assert metrics.generated_kernel_count > 0


@pytest.mark.slow
@pytest.mark.parametrize("backend,names", [("aot_eager", None), ("inductor", "bert,gpt2,vit")])
def test_the_backend_compiles_every_graph_of_the_hf_suite(tmp_path, backend, names):
    from framejit.bench import hf_models

    args = [
        "bench",
        "--suite",
        "hf",
        "--quick",
        "--backend",
        backend,
        "--iters",
        "1",
        "--warmup",
        "0",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(args + (["--models", names] if names else [])) == 0
    rows = _rows(tmp_path)
    assert len(rows) == 2 * (len(names.split(",")) if names else len(hf_models.HF_SUITE))
    for r in rows:
        assert r["status"] == "ok", r
        assert int(r["graphs"]) >= 1 and r["compiled"] == f"{r['graphs']}/{r['graphs']}", r
