"""benchmarks/graphwalks_realmodel_parity.py without a server, a model or lm-eval's checkout: its
arguments, the released-layout data it writes, and the report built from recorded requests.

    pytest -q tests/benchmarks/test_graphwalks_realmodel_parity.py

The run itself (vllm serve + SmolLM2 + lm-eval's local-chat-completions) is in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import graphwalks_realmodel_parity as gw


def test_arguments_and_run_folder():
    a = gw.parse_args(["--reference", "R", "--model", "M"])
    assert (a.max_gen_toks, a.over_window, a.own_budget_rows, a.max_model_len) == (512, 2, [2, 3], 8192)
    assert gw.run_tag(a) == "float32-8192-g512-o2"
    a = gw.parse_args(["--reference", "R", "--model", "M", "--samples", "4", "--own-budget-rows", ""])
    assert a.own_budget_rows == [] and gw.run_tag(a) == "float32-8192-g512-o2-s4"
    with pytest.raises(SystemExit):
        gw.parse_args(["--reference", "R", "--model", "M", "--max-gen-toks", "0"])


def test_data_is_the_released_layout_plus_rows_over_the_window(tmp_path):
    import pyarrow.parquet as pq

    args = gw.parse_args(["--reference", "R", "--model", "M", "--samples", "3"])
    folder, rows = gw.prepare_data(args, tmp_path)
    written = pq.read_table(folder / gw.SET_FILE)
    released = pq.read_table(gw.DATA / gw.SET_FILE)
    assert written.schema == released.schema
    assert written.to_pylist()[:3] == released.to_pylist()[:3]
    assert [r["origin"] for r in rows] == ["fixture"] * 3 + ["over-window"] * 2
    assert [r["problem_type"] for r in rows[3:]] == ["bfs", "parents"]
    assert all(len(r["prompt"]) > 16000 for r in rows[3:])  # ~12.8K SmolLM2 tokens: over 8192
    assert [gw.row_of(r["prompt"], rows) for r in rows] == [0, 1, 2, 3, 4]
    assert gw.row_of(rows[1]["prompt"].strip() + "\n\n", rows) == 1  # outer whitespace aside
    assert gw.row_of("no row's prompt", rows) is None and gw.row_of(None, rows) is None
    args = gw.parse_args(["--reference", "R", "--model", "M", "--data", str(tmp_path / "none")])
    with pytest.raises(gw.BenchError, match="does not exist"):
        gw.prepare_data(args, tmp_path)


def _record(side, prompt, status, text=None, max_tokens=512):
    reply = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9}}
    request = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    return {"side": side, "path": "/v1/chat/completions", "request": request, "status": status, "reply": reply}


def _canned():
    """Three rows: the same answer on both sides, a differing answer, one over the window that the
    server refuses three times (lm-eval's run ends; ours leaves the row out)."""
    rows = [
        {"row": 0, "origin": "fixture", "problem_type": "bfs", "prompt": "P0", "answer_nodes": ["a", "b"]},
        {"row": 1, "origin": "fixture", "problem_type": "parents", "prompt": "P1", "answer_nodes": ["c"]},
        {"row": 2, "origin": "over-window", "problem_type": "bfs", "prompt": "P2", "answer_nodes": ["d"]},
    ]
    good, half = "Final Answer: [a, b]", "Final Answer: [a]\nthat is all"
    records = [_record("reference", "P0", 200, good), _record("reference", "P1", 200, "Final Answer: [c]")]
    records += [_record("reference-over-2", "P2", 400) for _ in range(3)]
    records += [_record("ours", "P0", 200, good), _record("ours", "P1", 200, half)]
    records += [_record("reference-own-budget", "P0", 200, good, 16384)]
    ref = {
        "runs": {
            "reference": {"docs": [0, 1], "error": None, "samples": []},
            "reference-over-2": {"docs": [2], "error": "HTTPError: 400", "samples": []},
            "reference-own-budget": {"docs": [0], "error": None, "samples": []},
        }
    }
    for p, f1 in (("P0", 1.0), ("P1", 1.0)):
        ref["runs"]["reference"]["samples"].append({"doc_prompt": p, "f1": f1, "flexible_f1": f1, "response": ""})
    ref["runs"]["reference-own-budget"]["samples"].append({"doc_prompt": "P0", "f1": 1.0})
    ours = {
        "records": {
            0: {"prediction": good, "f1": 1.0, "flexible_f1": 1.0},
            1: {"prediction": half, "f1": 0.0, "flexible_f1": 0.0},  # parents row: "a" is not a parent
        }
    }
    return rows, ref, ours, records


def test_report_from_recorded_requests():
    rows, ref, ours, records = _canned()
    seen = []

    def process_results(doc, results):
        seen.append((doc["row"], results[0]))
        return {"f1": 0.5, "flexible_f1": 0.25}

    by_row = gw.per_row(rows, ref, ours, records, process_results)
    for r in by_row:
        r["same_ids"] = r["ref_msgs"] is not None and r["ref_msgs"] == r["our_msgs"]  # as vLLM's /tokenize would
    assert [r["ref_requests"] for r in by_row] == [1, 1, 3] and by_row[2]["ref_refused"] == 3
    assert by_row[2]["ref_run_error"] == "HTTPError: 400" and by_row[2]["ref_f1"] is None
    assert by_row[2]["our_requests"] == 0 and by_row[2]["our_f1"] is None
    assert seen == [(0, "Final Answer: [a, b]"), (1, "Final Answer: [a]\nthat is all")]
    assert by_row[0]["lm_eval_on_ours"] == {"f1": 0.5, "flexible_f1": 0.25} and by_row[2]["lm_eval_on_ours"] is None
    cells = {c["cell"]: c for c in gw.summarize(by_row, "f1")}
    bfs, parents, total = cells["bfs"], cells["parents"], cells["**all**"]
    assert (bfs["n"], bfs["ref_scored"], bfs["our_scored"], bfs["ref"], bfs["ours"]) == (2, 1, 1, 100.0, 100.0)
    assert (bfs["same_prompt"], bfs["same_text"], bfs["diff"]) == (1, 1, 0.0)
    assert (parents["diff"], parents["low"], parents["high"], parents["same_text"]) == (-100.0, -100.0, -100.0, 0)
    assert (total["both"], total["diff"], total["same_prompt"], total["same_ids"]) == (2, -50.0, 2, 2)
    (own,) = gw.own_budget_rows(ref, records, rows, by_row)
    assert own == {
        "row": 0,
        "max_tokens": 16384,
        "status": 200,
        "prompt_tokens": 9,
        "finish": "stop",
        "same_as_low_budget": True,
        "f1": 1.0,
    }
