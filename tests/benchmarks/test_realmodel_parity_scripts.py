"""The served real-model parity scripts without a server or a model: their arguments, the item and
cell bookkeeping, the report arithmetic and the recording proxy (against a stub upstream).

    pytest -q tests/benchmarks/test_realmodel_parity_scripts.py

The runs themselves (vllm serve + SmolLM2 + the references' checkouts) are recorded in
benchmarks/RESULTS.md; docs/longbench-parity.md and docs/nolima-parity.md explain each difference.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import longbench_v2_realmodel_parity as lb2
import nolima_realmodel_parity as nl

FIXTURE = ROOT / "tests" / "longbench_v2" / "fixtures" / "data.json"


def test_arguments_and_run_folders():
    a = lb2.parse_args(["--reference", "R", "--model", "M"])
    assert (a.variant, a.decoding, a.dtype, a.max_model_len, a.over_context) == ("0shot", "greedy", "float32", 8192, 2)
    assert lb2.run_tag(a) == "0shot-greedy-float32-8192"
    a = lb2.parse_args(["--reference", "R", "--model", "M", "--variant", "cot", "--samples", "1"])
    assert lb2.run_tag(a) == "cot-greedy-float32-8192-s1"
    n = nl.parse_args(["--reference", "R", "--model", "M"])
    assert (n.lengths, n.books, n.tests_per_set) == ("250,500,1000", 1, 1)
    assert nl.run_tag(n) == "float32-8192-b1-t1-250_500_1000"
    assert nl.parse_lengths("250,1000") == [250, 1000]
    with pytest.raises(lb2.BenchError):
        nl.parse_lengths("768")  # not a length the reference has a run config for
    with pytest.raises(SystemExit):
        nl.parse_args(["--reference", "R", "--model", "M", "--books", "0"])


def test_items_are_found_from_the_prompts_pred_py_builds(tmp_path):
    items = json.loads(FIXTURE.read_text()) + lb2.over_context_items(2, 50)
    for it in items:  # the released layout: every field pred.py reads
        assert set(it) >= {"_id", "difficulty", "length", "question", "context", "answer"}
        assert {f"choice_{c}" for c in "ABCD"} <= set(it)
    template = "<text>\n$DOC$\n</text>\n$Q$\n(A) $C_A$"  # pred.py's fill order: document, question, choices
    for it in items:
        prompt = template.replace("$DOC$", it["context"].strip()).replace("$Q$", it["question"].strip())
        assert lb2.item_of(prompt.replace("$C_A$", it["choice_A"].strip()), items) == it["_id"]
    assert lb2.item_of("a prompt of no item", items) is None
    args = lb2.parse_args(["--reference", "R", "--model", "M", "--data", str(FIXTURE.parent), "--samples", "1"])
    folder, kept = lb2.prepare_data(args, tmp_path)
    cells = [(it["difficulty"], it["length"]) for it in kept[:-2]]
    assert len(cells) == len(set(cells)) == 6  # the first item of each cell, in file order
    assert json.loads((folder / "data.json").read_text()) == kept
    assert all(len(it["context"].split()) > args.max_model_len for it in kept[-2:])


def _rows():
    """Four items: equal, ours wins, dropped by pred.py, ours loses."""

    def row(i, cell, ref, ours):
        return {"id": i, "cell": cell, "ref_score": ref, "our_score": ours, "ref_msgs": [[{"content": i}]]}

    rows = [
        row("a", ("easy", "short"), 1.0, 1.0),
        row("b", ("easy", "short"), 0.0, 1.0),
        row("c", ("hard", "long"), None, 0.0),
        row("d", ("hard", "long"), 1.0, 0.0),
    ]
    for r in rows:
        r.update(our_msgs=r["ref_msgs"], same_ids=True, ref_texts=["x"], our_texts=["x"])
    return rows


def test_report_arithmetic():
    rows = _rows()
    assert lb2.pooled(rows, "ref") == {
        "Overall": 66.7,
        "Easy": 50.0,
        "Hard": 100.0,
        "Short": 50.0,
        "Medium": None,
        "Long": 100.0,
    }
    assert lb2.pooled(rows, "our")["Overall"] == 50.0
    assert lb2.pooled(rows, "our", {"a", "b", "d"})["Overall"] == 66.7
    summary = {c["cell"]: c for c in lb2.summarize(rows)}
    easy, hard, total = summary["easy/short"], summary["hard/long"], summary["**all**"]
    assert (easy["ref"], easy["ours"], easy["diff"], easy["dropped"]) == (50.0, 100.0, 50.0, 0)
    assert (hard["ref"], hard["ours"], hard["diff"], hard["dropped"], hard["both"]) == (100.0, 0.0, -100.0, 1, 1)
    assert (total["n"], total["both"], total["diff"]) == (4, 3, 0.0)
    assert hard["low"] == hard["high"] == -100.0  # one item: the interval is that item's difference
    assert total["low"] < 0 < total["high"]
    lo, hi = lb2.paired_interval([1, 0, 1], [1, 0, 1], "same")
    assert lo == hi == 0.0


def test_nolima_cells_and_summary(tmp_path):
    assert [nl.depth_no(d) for d in (0.0, 4.0, 20.0, 92.0, 100.0)] == [0, 1, 5, 23, 25]
    assert nl.task_of("0401_landmark_T01_direct") == "nolima_direct"
    assert nl.task_of("0401_landmark_T01_onehop") == "nolima"
    data = nl.write_data(tmp_path / "data", books=1, tests_per_set=1)
    sets = json.loads((data / "needlesets" / "needle_set.json").read_text())
    assert [list(s["tests"]) for s in sets] == [["T01"], ["T01"]]
    assert [p.name for p in (data / "haystack" / "rand_shuffle").iterdir()] == ["rand_book_1.txt"]
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    ref = {"cells": {("nolima", 250, "t", "b", 0): {"messages": msgs, "prediction": "Yuki", "score": 1}}}
    ref["cells"][("nolima", 250, "t", "b", 0)].update(gold="Yuki", prompt_tokens=40)
    ours = {"cells": {("nolima", 250, "t", "b", 0): {"prediction": "Yuki", "score": 1, "gold": "Yuki"}}}
    records = [
        {
            "side": "ours",
            "path": "/v1/chat/completions",
            "status": 200,
            "request": {"model": "m", "messages": msgs, "max_tokens": 192, "temperature": 0.0},
            "reply": {
                "choices": [{"message": {"content": "Yuki"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 40},
            },
        }
    ]
    rows = nl.compare(ref, ours, records)
    assert len(rows) == 1 and rows[0]["same_prompt"] and rows[0]["same_count"] and rows[0]["same_text"]
    assert nl.unmatched(ref, records) == 0
    (s,) = nl.summarize(rows)
    assert (s["ref"], s["ours"], s["diff"], s["low"], s["high"]) == (100.0, 100.0, 0.0, 0.0, 0.0)


def test_the_proxy_records_what_each_side_sent():
    class Upstream(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status = 400 if body.get("max_tokens", 0) > 100 else 200
            data = json.dumps({"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=up.serve_forever, daemon=True).start()
    proxy = lb2.RecordingProxy(f"http://127.0.0.1:{up.server_address[1]}")
    try:
        for side, max_tokens in (("reference", 8), ("ours", 8), ("ours", 500)):
            proxy.side = side
            body = {"model": "m", "messages": [{"role": "user", "content": side}], "max_tokens": max_tokens}
            req = urllib.request.Request(
                proxy.url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            try:
                urllib.request.urlopen(req, timeout=10).read()
            except urllib.error.HTTPError as exc:
                assert exc.code == 400  # the status is passed through
    finally:
        proxy.close()
        up.shutdown()
        up.server_close()
    ref = lb2.chat_records(proxy.records, "reference")
    ours = lb2.chat_records(proxy.records, "ours")
    assert [c["messages"][0]["content"] for c in ref] == ["reference"]
    assert ref[0]["text"] == "hi" and ref[0]["prompt_tokens"] == 3 and ref[0]["fields"] == {"max_tokens": 8}
    assert [c["status"] for c in ours] == [200, 400]
    assert ours[1]["text"] is None and ours[1]["error"]
