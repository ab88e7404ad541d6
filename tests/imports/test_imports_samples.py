"""`harness import` with the other harnesses' per-sample files (issue 50): lm-eval's --log_samples
files, RULER's prediction jsonl, HELMET's output json. Their scores are aggregated our way (intervals,
samples blocks, prompt lengths, degenerate answers); lm-eval's stderr gives an interval where only the
aggregate exists; the row's provenance is the other harness's.

The files are written by tests/imports/sampled_formats.py in each harness's own format.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest

from harness.cli import main
from harness.imports import import_files

from . import sampled_formats as sf

Z95 = 1.959963984540054


def _import(capsys, files, out, *extra) -> dict:
    assert main(["import", *map(str, files), "--out", str(out), *extra]) == 0, capsys.readouterr().err
    return json.loads((out / "results.json").read_text())


def _error(capsys, files, out, *extra) -> str:
    assert main(["import", *map(str, files), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (out / "results.json").exists()
    return err


def _samples(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lm_eval_samples_files_are_scored_and_bootstrapped_our_way(tmp_path, capsys):
    results = sf.write_lm_eval(tmp_path / "lm")
    data = _import(capsys, [results], tmp_path / "imp")
    assert "per-sample scores: every cell" in capsys.readouterr().out
    ruler = data["suites"]["ruler"]
    assert ruler["evaluated"] == ["niah_single_1", "niah_multikey_1", "vt"] and ruler["lengths"] == [1024, 2048]
    for lm_task, ours in (
        ("niah_single_1", "niah_single_1"),
        ("niah_multikey_1", "niah_multikey_1"),
        ("ruler_vt", "vt"),
    ):
        lines = _samples(next(results.parent.glob(f"samples_{lm_task}_*.jsonl")))
        for L in (1024, 2048):
            mine = [x for x in lines if x["doc"]["max_length"] == L]
            scores = [x[str(L)] for x in mine]
            cell = ruler["per_task"][ours][str(L)]
            assert cell["mean"] == pytest.approx(100 * statistics.fmean(scores)) and cell["num_samples"] == 25
            # the mean prompt: lm-eval's doc length less the task's answer budget (128 niah, 30 vt)
            budget = 30 if lm_task == "ruler_vt" else 128
            assert cell["prompt_tokens"] == pytest.approx(
                statistics.fmean(x["doc"]["length"] - budget for x in mine), abs=0.05
            )
            # our bootstrap (not lm-eval's stderr): about the binomial interval's width, around the mean
            p = statistics.fmean(scores)
            half = Z95 * math.sqrt(p * (1 - p) / 25) * 100
            assert "ci_from" not in cell and cell["ci_low"] <= cell["mean"] <= cell["ci_high"]
            assert (cell["ci_high"] - cell["ci_low"]) / 2 == pytest.approx(half, abs=6.5)
            block = ruler["samples"][ours][str(L)]
            assert block["index"] == sorted(x["doc_id"] for x in mine)  # lm-eval's doc ids
            assert [100 * s for s in next(iter(block["scores"].values()))] == [100 * s for s in scores]
            assert block["task_version"] == f"lm-eval {lm_task} v1.0" and len(block["dataset_hash"]) == 16
    src = data["provenance"]["source"]
    assert src["per_sample"] == "every cell" and len(src["files"]) == 4  # results + 3 samples files
    assert "per-sample scores imported" in data["provenance"]["imported"]
    assert data["intervals"]["level"] == 0.95


def test_lm_eval_provenance_is_lm_evals_never_ours(tmp_path, capsys):
    data = _import(capsys, [sf.write_lm_eval(tmp_path / "lm")], tmp_path / "imp")
    prov = data["provenance"]
    assert prov["package_version"] is None and prov["git_hash"] == "4e7e0d4"  # lm-eval's commit, not ours
    assert prov["backend"] == "hf" and prov["dtype"] == "float32" and prov["lm_eval_version"] == "0.4.9.1"
    assert prov["model_args"] == f"pretrained={sf.MODEL},dtype=float32" and prov["max_model_len"] == "8192"
    assert prov["transformers_version"] == "4.57.1" and prov["template"] == "none" and prov["seed"] == 0
    assert prov["created"] == "2025-11-20T10:11:12+00:00"  # lm-eval's "date", not the import's
    from harness.core.provenance import package_version

    assert prov["imported_by"]["package_version"] == package_version()


def test_lm_eval_protocol_note_is_its_ports_rule(tmp_path, capsys):
    data = _import(capsys, [sf.write_lm_eval(tmp_path / "lm")], tmp_path / "imp")
    proto = data["provenance"]["source"]["protocol"]["ruler"]
    assert "steps" in proto["length rule"] and "gen_prefix" in proto["length rule"]
    assert "not counted" in proto["length rule"] and "fit L" not in proto["length rule"]
    assert "assgined" in proto["scoring"] and "share of the references" in proto["scoring"]


def test_lm_eval_without_samples_takes_its_stderr(tmp_path, capsys):
    results = sf.write_lm_eval(tmp_path / "lm")
    for p in results.parent.glob("samples_*.jsonl"):
        p.unlink()
    data = _import(capsys, [results], tmp_path / "imp")
    assert "per-sample scores: none" in capsys.readouterr().out
    raw = json.loads(results.read_text())["results"]
    ruler = data["suites"]["ruler"]
    assert "samples" not in ruler and data["provenance"]["source"]["per_sample"] == "none"
    cell = ruler["per_task"]["niah_multikey_1"]["2048"]
    se = 100 * raw["niah_multikey_1"]["2048_stderr,none"]
    assert cell["ci_from"] == "stderr" and cell["stderr"] == pytest.approx(se)
    assert cell["ci_low"] == pytest.approx(max(0, cell["mean"] - Z95 * se))
    assert cell["ci_high"] == pytest.approx(min(100, cell["mean"] + Z95 * se))
    # the average over the three tasks: independent samples, se = sqrt(sum se^2) / 3
    ses = [100 * raw[t]["2048_stderr,none"] for t in sf.LM_EVAL]
    assert ruler["per_length"]["2048"]["stderr"] == pytest.approx(math.sqrt(sum(s * s for s in ses)) / 3)
    assert "no per-sample data" in data["provenance"]["imported"]


def test_samples_given_on_the_command_line_from_elsewhere(tmp_path, capsys):
    results = sf.write_lm_eval(tmp_path / "lm")
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for p in results.parent.glob("samples_*.jsonl"):
        p.rename(moved / p.name)
    given = sorted(moved.glob("samples_*.jsonl"))
    data = _import(capsys, [results, *given], tmp_path / "imp")
    assert data["provenance"]["source"]["per_sample"] == "every cell"
    assert {f["file"] for f in data["provenance"]["source"]["files"]} == {str(results), *map(str, given)}


def test_wrong_samples_files_are_one_line(tmp_path, capsys):
    results = sf.write_lm_eval(tmp_path / "lm")
    path = next(results.parent.glob("samples_ruler_vt_*.jsonl"))
    lines = _samples(path)
    lines[0]["1024"] = 1.0 - lines[0]["1024"]  # another run's answer: the mean no longer matches
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert "pass the samples file of the same run" in _error(capsys, [results], tmp_path / "a")
    lines[0]["1024"] = 7  # not a per-sample score
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert "outside 0..1" in _error(capsys, [results], tmp_path / "b")
    path.write_text("{not json\n")
    assert "line 1 is not JSON" in _error(capsys, [results], tmp_path / "c")
    stray = tmp_path / "samples_mmlu_2026-01-01.jsonl"
    stray.write_text('{"doc_id": 0}\n')
    path.unlink()
    assert "belongs to no task" in _error(capsys, [results, stray], tmp_path / "d")


def test_ruler_predictions_are_scored_by_rulers_metric(tmp_path, capsys):
    paths = sf.write_ruler(tmp_path / "ruler")
    data = _import(capsys, paths, tmp_path / "imp")
    ruler = data["suites"]["ruler"]
    for L, summary in zip(sf.LENGTHS, paths):
        for task, by_len in sf.RULER.items():
            rows = _samples(summary.parent / f"{task}.jsonl")
            k, prompt = by_len[L]
            cell = ruler["per_task"][task][str(L)]
            assert cell["mean"] == pytest.approx(100 * k / sf.N) and cell["num_samples"] == sf.N
            assert cell["prompt_tokens"] == pytest.approx(prompt)  # "length" less tokens_to_generate
            block = ruler["samples"][task][str(L)]
            assert block["index"] == list(range(sf.N))  # the line, not niah.py's needle position
            assert [r["index"] for r in rows] != block["index"]
            assert cell["ci_low"] <= cell["mean"] <= cell["ci_high"]
    assert data["provenance"]["source"]["per_sample"] == "every cell"


def test_ruler_predictions_that_are_not_the_summarys(tmp_path, capsys):
    paths = sf.write_ruler(tmp_path / "ruler")
    pred = paths[0].parent / "vt.jsonl"
    rows = _samples(pred)
    rows[0]["pred"] = rows[0]["outputs"][0] if rows[0]["outputs"][0] not in rows[0]["pred"] else "nothing"
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "pass the summary.csv made from these predictions" in _error(capsys, paths, tmp_path / "imp")


def test_helmet_output_beside_its_score_gives_samples_lengths_and_degenerate_answers(tmp_path, capsys):
    paths = sf.write_helmet(tmp_path / "helmet")
    data = _import(capsys, paths, tmp_path / "imp")
    ruler = data["suites"]["ruler"]
    vt = ruler["per_task"]["vt"]["1024"]
    full = json.loads(paths[4].with_name(paths[4].name.removesuffix(".score")).read_text())
    assert full["args"]["dataset"] == "ruler_vt" and full["args"]["input_max_length"] == 1024
    assert vt["mean"] == pytest.approx(full["averaged_metrics"]["ruler_recall"])
    assert vt["prompt_tokens"] == pytest.approx(full["averaged_metrics"]["input_len"], abs=0.05)
    # 23 of 25 answers ran to generation_max_length (50) repeating one phrase: named, as for our runs
    assert vt["degenerate"]["at_max"] == pytest.approx(23 / 25) and vt["degenerate"]["repeat"] == pytest.approx(23 / 25)
    prov = data["provenance"]
    assert prov["backend"] == "hf" and prov["dtype"] == "float32" and prov["seed"] == 42  # --no_bf16
    assert prov["package_version"] is None and prov["template"] == "none"
    assert len(prov["source"]["files"]) == 12  # six .score files and the six outputs beside them


def test_import_files_agrees_with_the_cli(tmp_path, capsys):
    results = sf.write_lm_eval(tmp_path / "lm")
    a = import_files([results])
    b = _import(capsys, [results], tmp_path / "imp")
    assert a["suites"] == b["suites"]


def test_a_samples_file_is_matched_to_its_own_task():
    """longbench_trec's samples are not longbench_trec_e's (a task whose name extends another's)."""
    from pathlib import Path

    from harness.imports.lm_eval_samples import samples_file

    given = [Path("x/samples_longbench_trec_e_2026-01-01T10-00-00.1.jsonl")]
    assert samples_file(Path("x/results_2026-01-01T10-00-00.1.json"), "longbench_trec", given) is None
    assert samples_file(Path("x/results_2026-01-01T10-00-00.1.json"), "longbench_trec_e", given) == given[0]


def test_a_suite_with_samples_for_some_cells_only(tmp_path, capsys):
    """HELMET's .score files, one without its output json beside it: the cells with samples get our
    intervals and samples blocks, the other its aggregate alone, and the averages stay the aggregates'."""
    paths = sf.write_helmet(tmp_path / "helmet")
    lone = next(p for p in paths if p.name.startswith("ruler_vt_") and "_in1024_" in p.name)
    lone.with_name(lone.name.removesuffix(".score")).unlink()
    data = _import(capsys, paths, tmp_path / "imp")
    assert data["provenance"]["source"]["per_sample"] == "5 of 6 cells"
    ruler = data["suites"]["ruler"]
    vt = ruler["per_task"]["vt"]["1024"]
    assert "ci_low" not in vt and "1024" not in ruler["samples"].get("vt", {})
    assert vt["prompt_tokens"] == pytest.approx(json.loads(lone.read_text())["input_len"], abs=0.05)
    niah = ruler["per_task"]["niah_single_1"]["1024"]
    assert niah["ci_low"] <= niah["mean"] <= niah["ci_high"] and "1024" in ruler["samples"]["niah_single_1"]
    means = [ruler["per_task"][t]["1024"]["mean"] for t in ("niah_single_1", "niah_multikey_1", "vt")]
    assert ruler["per_length"]["1024"]["mean"] == pytest.approx(statistics.fmean(means))
    assert "ci_low" not in ruler["per_length"]["1024"]  # an interval over tasks needs every task's samples
    assert "per-sample scores for 5 of 6 cells" in data["provenance"]["imported"]
