"""Our `--tasks` run beside an lm-eval, RULER or HELMET import of the same tasks (issue 50): shared task
columns, intervals on both rows, delta cells paired by task and length, the real prompt lengths,
the other harness's provenance, and exports that say what the page says."""

from __future__ import annotations

import csv
import io
import json
import statistics

import pytest

from harness.cli import main
from leaderboards.build import build, load_runs
from leaderboards.export import to_csv, to_markdown
from leaderboards.latex import to_latex
from leaderboards.shared import SHARED
from tests.imports import sampled_formats as sf

from .import_fixtures import IMPORTED, OURS, TASKS, comparison

KINDS = ["lm-eval", "ruler", "helmet"]


def _board(tmp_path, kind: str, **kw) -> tuple[dict, list]:
    _, dirs = comparison(tmp_path, kind, **kw)
    runs = load_runs(dirs)
    return build(runs, baseline=kw.get("baseline", OURS)), runs


def _rows(board: dict) -> dict[str, dict]:
    return {r["run"]: r for r in board["rows"]}


@pytest.mark.parametrize("kind", KINDS)
def test_both_rows_in_the_same_task_columns_with_intervals_and_deltas(tmp_path, kind):
    board, _ = _board(tmp_path, kind)
    shared = [c for c in board["columns"] if c["suite"] == SHARED]
    assert [(c["task"], c["length"]) for c in shared] == [(t, L) for t in TASKS for L in sf.LENGTHS]
    assert [g["label"] for g in board["groups"]][:3] == TASKS  # a header group per task, lengths under it
    # our selection's own per-task columns would repeat them: gone; the import's suite subset stays
    assert not any(c["suite"] == "custom" for c in board["columns"])
    ruler_group = next(g for g in board["groups"] if g["suite"] == "ruler")
    assert ruler_group["note"] == "3 of 13 tasks"
    rows = _rows(board)
    ours, imp = rows[OURS], rows[IMPORTED[kind]]
    truth = {"lm-eval": sf.LM_EVAL, "ruler": sf.RULER, "helmet": sf.RULER}[kind]
    for c in shared:
        lm_task = "ruler_vt" if kind == "lm-eval" and c["task"] == "vt" else c["task"]
        k, prompt = truth[lm_task][c["length"]]
        got = imp["cells"][c["id"]]
        assert got["value"] == pytest.approx(100 * k / sf.N)
        assert got["ci"] and got["ci"][0] <= got["value"] <= got["ci"][1] and got["pm"].startswith("±")
        assert got["prompt"] == f"{round(statistics.fmean(_prompts(kind, lm_task, c['length'], prompt))):,} tok"
        mine = ours["cells"][c["id"]]
        k_ours, prompt_ours = sf.OURS[c["task"]][c["length"]]
        assert mine["value"] == pytest.approx(100 * k_ours / sf.N) and mine["prompt"] == f"{prompt_ours:,} tok"
        delta = imp["delta"][c["id"]]
        assert delta["value"] == pytest.approx(got["value"] - mine["value"])
        assert delta["ci"][0] <= delta["value"] <= delta["ci"][1]
        # different documents (each harness generates its own): an unpaired bootstrap, said so
        assert "unpaired bootstrap" in delta["title"]
        assert ours["delta"][c["id"]]["text"] == "base"
    assert board["any_delta_intervals"]


def _prompts(kind: str, task: str, L: int, prompt: int) -> list[int]:
    """The prompt lengths the fixture wrote for one cell, as each harness counts them."""
    if kind == "lm-eval":
        return [prompt + (i % 5) - 2 for i in range(sf.N)]
    if kind == "helmet":
        return [prompt - 3 + (i % 3) for i in range(sf.N)]
    return [prompt] * sf.N


def test_two_imports_of_the_same_documents_pair(tmp_path, capsys):
    """Two lm-eval runs on the same documents (the same doc hashes): the delta is paired over them."""
    files = [sf.write_lm_eval(tmp_path / "lm")]
    for name in ("lm-a", "lm-b"):
        assert main(["import", *map(str, files), "--out", str(tmp_path / name), "--name", name]) == 0
    ours = sf.write_our_run(tmp_path / "ours").parent
    board = build(load_runs([ours, tmp_path / "lm-a", tmp_path / "lm-b"]), baseline="lm-a")
    cid = f"{SHARED}/niah_multikey_1:2048"
    delta = _rows(board)["lm-b"]["delta"][cid]
    assert delta["value"] == 0 and delta["ci"] == [0.0, 0.0]
    assert "paired bootstrap over 25 shared samples" in delta["title"]
    assert "unpaired" in _rows(board)[OURS]["delta"][cid]["title"]


def test_an_import_without_samples_is_drawn_from_its_stderr(tmp_path):
    results = sf.write_lm_eval(tmp_path / "lm")
    for p in results.parent.glob("samples_*.jsonl"):
        p.unlink()
    assert main(["import", str(results), "--out", str(tmp_path / "imp")]) == 0
    ours = sf.write_our_run(tmp_path / "ours").parent
    board = build(load_runs([ours, tmp_path / "imp"]), baseline=OURS)
    imp = _rows(board)[IMPORTED["lm-eval"]]
    cid = f"{SHARED}/vt:1024"
    assert imp["cells"][cid]["ci"] and "standard error, normal approximation" in imp["cells"][cid]["title"]
    assert "prompt" not in imp["cells"][cid] or imp["cells"][cid]["prompt"] is None  # no per-sample lengths
    delta = imp["delta"][cid]
    assert delta["ci"] and "drawn from its harness's standard error" in delta["title"]


def test_longbench_trec_beside_lm_evals_and_its_budget_is_no_alarm(tmp_path):
    board, runs = _board(tmp_path, "lm-eval", trec=True)
    col = next(c for c in board["columns"] if c["suite"] == SHARED and c["task"] == "trec")
    assert col["length"] is None and col["label"] == "any length"  # a budget, not a context length
    rows = _rows(board)
    ours, imp = rows[OURS]["cells"][col["id"]], rows[IMPORTED["lm-eval"]]["cells"][col["id"]]
    assert ours["value"] == pytest.approx(64.0) and imp["value"] == pytest.approx(60.0)
    assert "budget 8K" in ours["title"] and "each document's own length" in imp["title"]
    assert rows[IMPORTED["lm-eval"]]["delta"][col["id"]]["value"] == pytest.approx(-4.0)
    # every trec answer ran to its 64 tokens, as under LongBench's pred.py: counted, not flagged
    shares = runs[0]["suites"]["custom"]["per_task"]["trec"]["8192"]["degenerate"]
    assert shares["at_max"] == 1.0 and shares["expected"] == ["at_max"]
    assert "max-len" not in (ours.get("marks") or "") and not ours["degenerate"]
    assert runs[0].get("degenerate", {}).get("at_max", 0) == 0  # nor in the run's last line


def test_a_task_that_should_stop_is_still_flagged(tmp_path):
    from harness.pipeline.aggregate import aggregate

    recs, suites, info = sf.our_records()
    for r in recs:
        r["compute"]["new_tokens"] = r["metadata"]["max_new_tokens"]  # every niah answer ran to its budget
    shares = aggregate(recs, suites, info, {})["suites"]["custom"]["per_task"]["niah_single_1"]["1024"]["degenerate"]
    from harness.core.degenerate import flags

    assert shares["at_max"] == 1.0 and "expected" not in shares and flags(shares) == ["max-len"]


def test_provenance_is_each_rows_own(tmp_path):
    board, _ = _board(tmp_path, "lm-eval")
    prov = board["provenance"]
    fields = {f["field"]: dict(zip(prov["runs"], f["cells"])) for f in prov["fields"]}
    imp = IMPORTED["lm-eval"]
    assert fields["harness"] == {OURS: "longctx-harness 0.1.0", imp: "lm-eval 0.4.9.1"}
    assert fields["package_version"][imp] == "—" and fields["git_hash"][imp] == "4e7e0d4"
    assert fields["backend"][imp] == "hf" and fields["dtype"][imp] == "float32"
    assert fields["lm_eval_version"][imp] == "0.4.9.1" and fields["lm_eval_version"][OURS] == "—"
    assert fields["model_args"][imp] == f"pretrained={sf.MODEL},dtype=float32"
    assert "source" not in fields and "imported" not in fields  # shown in the run's details instead
    details = {d["run"]: d for d in prov["details"]}
    ((suite, rules, summary),) = details[imp]["protocol"]
    assert suite == "ruler" and "coarse steps" in summary and dict(rules)["scoring"].startswith("string_match_all")
    assert any(f.endswith(".jsonl") for f in details[imp]["imported_files"])


def test_exports_say_the_pages_interval(tmp_path):
    board, _ = _board(tmp_path, "lm-eval")
    imp = _rows(board)[IMPORTED["lm-eval"]]
    cols = {c["id"]: c for c in board["columns"]}
    cid = f"{SHARED}/niah_single_1:1024"
    cell = imp["cells"][cid]
    md = to_markdown(board)
    line = next(x for x in md.splitlines() if x.startswith(f"| {IMPORTED['lm-eval']} "))
    assert f"| {cell['text']} ± {cell['pm'].removeprefix('±')} |" in line and "± 0.00" not in md
    assert "half-width of the 95% interval" in md
    rows = list(csv.reader(io.StringIO(to_csv(board))))
    rec = dict(zip(rows[0], next(r for r in rows[1:] if r[0] == IMPORTED["lm-eval"])))
    name = f"{cols[cid]['group']} {cols[cid]['label']}"
    assert float(rec[name + " 95% low"]) == pytest.approx(cell["ci"][0], abs=0.005)
    assert float(rec[name + " 95% high"]) == pytest.approx(cell["ci"][1], abs=0.005)
    assert rec[name + " std"] == ""  # one checkpoint: no spread, never "0.00"
    assert cell["pm"].removeprefix("±") in to_latex(board)
    data = json.loads(json.dumps(board))  # the model stays JSON
    assert data["columns"][0]["homes"]


def test_suite_columns_of_two_aggregate_imports_get_a_stderr_interval(tmp_path):
    """Two lm-eval imports without per-sample files, in the same RULER columns: the delta of their
    averages is drawn from their standard errors (independent normals), not left without an interval."""
    results = sf.write_lm_eval(tmp_path / "lm")
    for p in results.parent.glob("samples_*.jsonl"):
        p.unlink()
    for name in ("lm-a", "lm-b"):
        assert main(["import", str(results), "--out", str(tmp_path / name), "--name", name]) == 0
    board = build(load_runs([tmp_path / "lm-a", tmp_path / "lm-b"]), baseline="lm-a")
    delta = _rows(board)["lm-b"]["delta"]["ruler/len:2048"]
    se = _rows(board)["lm-b"]["cells"]["ruler/len:2048"]["ci"]
    assert delta["value"] == 0 and delta["ci"][0] < 0 < delta["ci"][1]
    # the difference of two independent normals of the same error: sqrt(2) times as wide
    assert (delta["ci"][1] - delta["ci"][0]) == pytest.approx(2**0.5 * (se[1] - se[0]), rel=0.1)
    assert "lm-a, lm-b drawn from its harness's standard error" in delta["title"]
