"""`harness import`: lm-eval, NVIDIA RULER and HELMET result files as rows of our leaderboard.

The input files are written by tests/imports/formats.py in each harness's own format (each writer
names the file and commit of the harness it follows); our run is an aggregate of synthetic records
(harness.pipeline.aggregate, as tests/leaderboard/test_leaderboard_e2e.py builds one).
"""

from __future__ import annotations

import json
import random

import pytest

import harness.pipeline.aggregate as aggregate_mod
from harness.cli import main
from harness.core.results_file import write_results
from harness.imports import import_files
from leaderboards.build import build, load_runs

from .formats import LM_EVAL_RULER, RULER_SCORES, write_helmet, write_lm_eval, write_ruler

OURS_TASKS = ["niah_single_1", "niah_single_2", "vt"]


def _our_run(tmp_path):
    """A run of ours with per-sample blocks (schema 2): 2 checkpoints, RULER at 4K and 8K."""
    rng = random.Random(0)
    ckpts = [{"path": f"runs/anchor/ckpt-{s}", "step": s, "fingerprint": f"fp{s}", "training": None} for s in (10, 20)]
    recs = [
        {
            "type": "sample",
            "run": "anchor",
            "checkpoint": c,
            "task": t,
            "task_version": 1,
            "length": L,
            "index": i,
            "seed": 0,
            "score": rng.choice([0.0, 1.0, 1.0]),
            "metric": "m",
        }
        for c in ckpts
        for t in OURS_TASKS
        for L in (4096, 8192)
        for i in range(6)
    ]
    suites = {"ruler": {"tasks": OURS_TASKS, "excluded": [], "unavailable": {}, "lengths": [4096, 8192]}}
    run = {"name": "anchor", "model": "runs/anchor", "mode": "anchor", "checkpoints": ckpts}
    results = aggregate_mod.aggregate(recs, suites, run, {"package_version": "0.1.0", "backend": "hf"})
    path = tmp_path / "ours" / "results.json"
    write_results(path, results)
    return path


def _import(capsys, files, out, *extra) -> dict:
    assert main(["import", *map(str, files), "--out", str(out), *extra]) == 0, capsys.readouterr().err
    return json.loads((out / "results.json").read_text())


def test_lm_eval_results_file(tmp_path, capsys):
    data = _import(capsys, [write_lm_eval(tmp_path / "lm")], tmp_path / "imp")
    src = data["provenance"]["source"]
    assert src["harness"] == "lm-eval" and src["version"] == "0.4.8" and src["model"] == "meta-llama/Llama-3.1-8B"
    assert set(src["protocol"]) == {"ruler", "babilong", "longbench"}
    assert "left" in src["protocol"]["longbench"]["truncation"] and "16384" in src["protocol"]["ruler"]["truncation"]
    assert src["not_imported"] == ["mmlu"]
    ruler = data["suites"]["ruler"]
    assert ruler["lengths"] == [4096, 8192]  # 16384 holds -1: no samples there
    assert ruler["per_task"]["vt"]["4096"]["mean"] == pytest.approx(90.0)  # ruler_vt, x100
    assert ruler["per_task"]["qa_1"]["8192"]["mean"] == pytest.approx(62.0)  # ruler_qa_squad
    assert ruler["per_task"]["vt"]["4096"]["num_samples"] == 500  # 1000 over two lengths
    mean4k = sum(100 * v[4096] for v in LM_EVAL_RULER.values()) / len(LM_EVAL_RULER)
    assert ruler["per_length"]["4096"]["mean"] == pytest.approx(mean4k)
    assert ruler["per_length"]["4096"]["n"] == 1 and "samples" not in ruler
    assert data["suites"]["babilong"]["per_task"]["babilong_qa1"]["4096"]["mean"] == pytest.approx(81.0)
    lb = data["suites"]["longbench"]
    assert lb["lengths"] == [0] and lb["length_controlled"] is False
    assert lb["per_task"]["narrativeqa"]["0"]["mean"] == pytest.approx(24.12)
    assert lb["categories"]["Single-Doc QA"]["0"]["mean"] == pytest.approx(24.12)
    assert data["run"]["name"] == "Llama-3.1-8B-lm-eval"
    assert "imported from lm-eval 0.4.8" in data["provenance"]["imported"]


def test_ruler_summary_csv(tmp_path, capsys):
    data = _import(capsys, write_ruler(tmp_path / "ruler"), tmp_path / "imp", "--name", "llama-ruler")
    ruler = data["suites"]["ruler"]
    assert data["run"]["name"] == "llama-ruler" and data["run"]["model"] == "llama3.1-8b-chat"
    assert ruler["lengths"] == [4096, 8192]
    assert ruler["per_task"]["vt"]["4096"] == {
        "mean": 97.12, "std": 0.0, "min": 97.12, "max": 97.12, "n": 1, "num_samples": 500
    }  # fmt: skip
    assert ruler["per_length"]["8192"]["mean"] == pytest.approx(sum(s for s, _ in RULER_SCORES[8192].values()) / 3)
    assert ruler["summary"]["effective_length"]["value"] == 8192  # above 85.6 at both lengths
    assert data["provenance"]["source"]["protocol"]["ruler"]["length rule"].startswith("max_seq_length L")


def test_helmet_outputs(tmp_path, capsys):
    data = _import(capsys, write_helmet(tmp_path / "helmet"), tmp_path / "imp")
    helmet = data["suites"]["helmet"]
    assert helmet["lengths"] == [131072]
    assert helmet["per_task"]["helmet_json_kv"]["131072"]["mean"] == 88.0
    assert helmet["per_task"]["helmet_niah_mk_2"]["131072"]["mean"] == 97.0
    assert helmet["per_task"]["helmet_icl_trec_coarse"]["131072"]["num_samples"] == 4
    assert helmet["categories"]["Recall"]["131072"]["mean"] == pytest.approx(92.5)
    assert data["suites"]["ruler"]["per_task"]["niah_multikey_2"]["131072"]["mean"] == 97.0
    assert "Llama-2" in data["provenance"]["source"]["protocol"]["helmet"]["length rule"]
    assert data["run"]["model"] == "Llama-3.1-8B"


def test_three_imports_are_rows_beside_ours(tmp_path, capsys):
    ours = _our_run(tmp_path)
    lm = tmp_path / "lm-import"
    _import(capsys, [write_lm_eval(tmp_path / "lm")], lm)
    rl = tmp_path / "ruler-import"
    _import(capsys, write_ruler(tmp_path / "ruler"), rl)
    hm = tmp_path / "helmet-import"
    _import(capsys, write_helmet(tmp_path / "helmet"), hm)
    site = tmp_path / "site"
    assert main(["leaderboard", str(ours), str(lm), str(rl), str(hm), "--out", str(site), "--baseline", "anchor"]) == 0

    runs = load_runs([ours, lm, rl, hm])
    board = build(runs, baseline="anchor")
    rows = {r["run"]: r for r in board["rows"]}
    assert set(rows) == {"anchor", "Llama-3.1-8B-lm-eval", "llama3.1-8b-chat-ruler", "Llama-3.1-8B-helmet"}
    assert "imported" not in rows["anchor"]
    for name, harness in (
        ("Llama-3.1-8B-lm-eval", "lm-eval 0.4.8"),
        ("llama3.1-8b-chat-ruler", "RULER"),
        ("Llama-3.1-8B-helmet", "HELMET tag v1"),
    ):
        row = rows[name]
        assert row["imported"].startswith(f"imported from {harness} (protocol: ")
        assert row["flags"][0] == row["imported"] and row["delta_flags"][0] == row["imported"]
        # never in a paired test: no interval on any delta cell of an imported row
        assert not any(c.get("ci") or c.get("sig") is not None for c in row["delta"].values())
    # our run and the imports share the RULER 4K column
    col = next(c for c in board["columns"] if c["id"] == "ruler/len:4096")
    assert rows["anchor"]["cells"][col["id"]]["value"] is not None
    assert rows["llama3.1-8b-chat-ruler"]["cells"][col["id"]]["value"] == pytest.approx(
        sum(s for s, _ in RULER_SCORES[4096].values()) / 3
    )
    assert rows["Llama-3.1-8B-lm-eval"]["cells"][col["id"]]["value"] is not None

    page = (site / "index.html").read_text()
    assert "imported from lm-eval 0.4.8" in page and "imported from RULER" in page and "imported from HELMET" in page
    csv_text = (site / "leaderboard.csv").read_text()
    assert "imported from lm-eval 0.4.8 (protocol:" in csv_text


@pytest.mark.parametrize(
    "name, content, phrase",
    [
        ("results_x.json", "{not json", "is not valid JSON"),
        ("results_x.json", json.dumps({"results": []}), "neither an lm-eval"),
        ("results_x.json", json.dumps({"results": {"niah_single_1": {"4096,none": "high"}}}), "not a number"),
        ("results_x.json", json.dumps({"results": {"niah_single_1": {"4096,none": 3.0}}}), "outside 0..100"),
        ("results_x.json", json.dumps({"results": {"mmlu": {"acc,none": 0.5}}}), "holds no score"),
        ("summary.csv", "0,1\nTasks,niah_single_1\n", '"Tasks" and "Score" rows'),
        ("summary.csv", "0,1\nTasks,niah_single_1\nScore,abc\n", "not a number"),
        ("summary.csv", "0,1\nTasks,niah_single_1\nScore,99\n", "no length in its path"),
        ("x.json.score", json.dumps([1, 2]), "not a JSON object"),
        ("json_kv_v1_t_in4096_size1_shots2_sampFalsemax1min0t0.0p1.0_chatFalse_42.json.score", "{}", 'no "substring'),
        ("mystery.json", json.dumps({"a": 1}), "neither an lm-eval"),
        ("results_x.json", "\xff\xfe", "is not UTF-8"),
    ],
)
def test_bad_files_are_one_line_exit_2(tmp_path, capsys, name, content, phrase):
    path = tmp_path / name
    if content == "\xff\xfe":
        path.write_bytes(b"\xff\xfe\x00{")
    else:
        path.write_text(content)
    out = tmp_path / "out"
    assert main(["import", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and phrase in err, err
    assert not out.exists()


def test_mixed_harnesses_and_existing_run_are_refused(tmp_path, capsys):
    lm = write_lm_eval(tmp_path / "lm")
    rl = write_ruler(tmp_path / "ruler")[0]
    assert main(["import", str(lm), str(rl), "--out", str(tmp_path / "out")]) == 2
    assert "import each harness's files" in capsys.readouterr().err
    ours = _our_run(tmp_path)
    assert main(["import", str(lm), "--out", str(ours.parent)]) == 2
    assert "is not an imported results.json" in capsys.readouterr().err
    # an imported file may be replaced by a new import
    _import(capsys, [lm], tmp_path / "imp")
    _import(capsys, [lm], tmp_path / "imp", "--name", "again")


def test_import_files_validates_with_the_one_schema(tmp_path):
    from harness.core.results_schema import validate_results

    data = import_files(write_ruler(tmp_path), length=None)
    assert validate_results(data, "x") is data
    assert data["run"]["checkpoints"][0]["step"] is None
    assert data["run"]["checkpoints"][0]["fingerprint"].startswith("imported:")
