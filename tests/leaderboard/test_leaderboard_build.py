"""The leaderboard model: cells checked against a brute-force recomputation from raw per-step scores."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from harness.core.errors import UserError
from leaderboards.build import build, load_runs
from leaderboards.cells import effective_length

from .conftest import LENGTHS, RULER_TASKS, STEPS, XSS


def _row(board, name):
    return next(r for r in board["rows"] if r["run"] == name)


def _col(board, suite, key):
    return next(c["id"] for c in board["columns"] if c["suite"] == suite and c["key"] == key)


def test_length_cells_are_mean_over_checkpoints_of_task_means(board, runs_data):
    for name in ("full", "anchor", "anchor-11of13"):
        _, raw = runs_data[name]
        evaluated = runs_data[name][0]["suites"]["ruler"]["evaluated"]
        row = _row(board, name)
        for L in LENGTHS:
            per_step = [sum(raw["ruler"][t][L][s] for t in evaluated) / len(evaluated) for s in STEPS]
            cell = row["cells"][_col(board, "ruler", f"len:{L}")]
            assert cell["value"] == pytest.approx(sum(per_step) / len(per_step))
            assert cell["std"] == pytest.approx(statistics.stdev(per_step))
            assert cell["steps"] == STEPS and cell["n"] == 5
            assert cell["num_samples"] == 100 * len(evaluated)  # summed over the tasks at that length
            assert "± " in cell["title"] and "1960, 1970, 1980, 1990, 2000" in cell["title"]


def test_missing_lengths_show_dash_with_reason_never_zero(board):
    row = _row(board, "intra-doc-short")
    for L in (65536, 131072):
        cell = row["cells"][_col(board, "ruler", f"len:{L}")]
        assert cell["value"] is None and cell["text"] == "—"
        assert "not evaluated at" in cell["reason"] and "4K, 8K, 16K, 32K" in cell["reason"]
    lb = row["cells"][_col(board, "longbench", "avg")]
    assert lb["value"] is None and "no LongBench results" in lb["reason"]


def test_task_counts_and_flags_for_different_task_sets(board):
    partial = _row(board, "anchor-11of13")
    tasks = partial["cells"][_col(board, "ruler", "tasks")]
    assert tasks["text"] == "11/13"
    assert "qa_1 unavailable: SQuAD v2 dev not found" in tasks["title"]
    assert any("lacks qa_1, qa_2" in f for f in partial["flags"])
    assert any("lengths differ (lacks 64K, 128K)" in f for f in _row(board, "intra-doc-short")["flags"])
    assert _row(board, "full")["flags"] == [] and _row(board, "anchor")["flags"] == []
    # A flagged row is never "best" in that suite, even with the highest number.
    best = [r["run"] for r in board["rows"] if r["cells"][_col(board, "ruler", "avg")].get("best")]
    assert best == ["anchor"]


def test_effective_length_only_for_full_suites_unless_threshold(results_dir, runs_data):
    runs = load_runs(list(results_dir.values()))
    board = build(runs)
    eff = _col(board, "ruler", "eff")
    assert _row(board, "anchor-11of13")["cells"][eff]["value"] is None
    assert "full suites only" in _row(board, "anchor-11of13")["cells"][eff]["reason"]
    assert (
        _row(board, "anchor")["cells"][eff]["text"]
        == runs_data["anchor"][0]["suites"]["ruler"]["summary"]["effective_length"]["label"]
    )
    # With --threshold every row shows it, recomputed from the per-length means at that threshold.
    board = build(runs, threshold=70.0)
    for row in board["rows"]:
        means = {L: row["cells"][_col(board, "ruler", f"len:{L}")]["value"] for L in LENGTHS}
        means = {L: v for L, v in means.items() if v is not None}
        ok = [L for L in sorted(means) if all(means[M] > 70.0 for M in means if M <= L)]
        expect = f"{max(ok) // 1024}K" if ok else "< 4K"
        assert row["cells"][eff]["text"] == expect
    assert _row(board, "anchor-11of13")["cells"][eff]["partial"] is True
    # The threshold also decides the "above" marks.
    cell = _row(board, "full")["cells"][_col(board, "ruler", "len:32768")]
    assert cell["above"] == (cell["value"] > 70.0)


def test_effective_length_matches_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        lengths = sorted(rng.sample([2**k for k in range(10, 21)], rng.randint(1, 6)))
        means = {L: rng.choice([85.6, rng.uniform(60, 100)]) for L in lengths}
        thr = 85.6
        brute = None
        for L in lengths:  # every length up to L must be strictly above
            if all(means[M] > thr for M in lengths if M <= L):
                brute = L
        value, label = effective_length(means, thr)
        assert value == brute
        assert (label == "below the first length") == (brute is None)


def test_delta_is_row_minus_baseline(board):
    base, anchor = _row(board, "full"), _row(board, "anchor")
    for c in board["columns"]:
        if not c["numeric"]:
            continue
        a, b = anchor["cells"][c["id"]]["value"], base["cells"][c["id"]]["value"]
        d = anchor["delta"][c["id"]]
        if a is None or b is None:
            assert d["value"] is None and d["reason"]
        else:
            assert d["value"] == pytest.approx(a - b)
            assert d["text"].lstrip("+−").replace(".", "").isdigit()
    assert base["delta"][_col(board, "ruler", "avg")]["text"] == "base"
    # Against the baseline only the partial/short runs differ in task or length set.
    assert _row(board, "anchor")["delta_flags"] == []
    assert _row(board, "anchor-11of13")["delta_flags"]


def test_columns_follow_the_suites_present(board, results_dir):
    groups = [g["label"] for g in board["groups"]]
    assert groups == ["RULER", "LongBench", "Short context"]
    labels = {c["suite"]: [] for c in board["columns"]}
    for c in board["columns"]:
        labels[c["suite"]].append(c["label"])
    assert labels["ruler"] == [
        "Tasks",
        "4K",
        "8K",
        "16K",
        "32K",
        "64K",
        "128K",
        "Avg",
        "wAvg (inc)",
        "wAvg (dec)",
        "Eff. length",
    ]
    assert labels["longbench"] == ["Tasks", "ICL", "Code Completion", "Avg"]  # the results file's category order
    assert labels["short"] == ["MMLU", "HellaSwag"]
    only_ruler = build(load_runs([results_dir["intra-doc-short"]]))
    assert [g["label"] for g in only_ruler["groups"]] == ["RULER"]


def test_load_runs_errors(tmp_path, results_dir, runs_data):
    with pytest.raises(UserError, match="no results file at"):
        load_runs([tmp_path / "nope"])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON|corrupt"):
        load_runs([bad])
    data = json.loads(json.dumps(runs_data["full"][0]))
    data["schema_version"] = 3
    (tmp_path / "v3.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="schema_version 3"):
        load_runs([tmp_path / "v3.json"])
    data["schema_version"] = 1
    data["suites"]["ruler"]["per_length"]["4096"]["mean"] = "high"
    (tmp_path / "str.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"per_length\.4096\.mean.*valid number"):
        load_runs([tmp_path / "str.json"])
    with pytest.raises(UserError, match="in both"):
        load_runs([results_dir["full"], results_dir["full"] / "results.json"])
    runs = load_runs([results_dir["full"], results_dir[XSS], results_dir["anchor"]])
    with pytest.raises(UserError, match="--baseline 'nope' is not one of the runs"):
        build(runs, baseline="nope")
    with pytest.raises(UserError, match="outside 0..100"):
        build(runs, threshold=856)


def test_same_run_in_two_files_merges_disjoint_suites(tmp_path, runs_data):
    data = runs_data["full"][0]
    a = {**data, "suites": {"ruler": data["suites"]["ruler"]}}
    b = {**data, "suites": {"short": data["suites"]["short"]}}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    runs = load_runs([tmp_path / "a.json", tmp_path / "b.json"])
    assert len(runs) == 1 and set(runs[0]["suites"]) == {"ruler", "short"}
    assert len(RULER_TASKS) == 13
