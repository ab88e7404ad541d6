"""One reading rule for stored records, shared by `harness eval` and `harness report` (issue 49):
a record whose metric is not its task's (a hand-edited store) was reused by eval and published
(50.0) while report, on the same store, left it out with a warning (0.0). Now eval leaves it out
and reports it by reason, as report does, and both print the same cell."""

from __future__ import annotations

import json

from harness.cli import main


def _eval(model, out):
    return main(["eval", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k", "--samples", "2", "--out",
                 str(out), "--no-progress"])  # fmt: skip


def _edit_first_record(store, **fields):
    lines = store.read_text().splitlines()
    first = json.loads(lines[1])
    first.update(fields)
    lines[1] = json.dumps(first)
    store.write_text("\n".join(lines) + "\n")


def test_eval_and_report_read_a_contradicting_record_alike(tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert _eval(tiny_llama_dir, out) == 0
    before = json.loads((out / "results.json").read_text())
    assert "inconsistent_records" not in before
    # the record says another metric, and a full score under it
    _edit_first_record(out / "samples.jsonl", metric="exact_match", score=1.0)
    capsys.readouterr()
    assert _eval(tiny_llama_dir, out) == 0
    eval_out = capsys.readouterr().out
    after = json.loads((out / "results.json").read_text())
    cell = after["suites"]["custom"]["per_task"]["vt"]["1024"]
    assert after["inconsistent_records"]["count"] == 1
    assert "metric 'exact_match' is not vt's" in next(iter(after["inconsistent_records"]["reasons"]))
    assert cell["num_samples"] == 1 and cell["mean"] == 0.0  # the other sample alone: the edited one is no score
    assert "contradict themselves" in eval_out

    assert main(["report", str(out / "samples.jsonl")]) == 0
    report_out = capsys.readouterr().out
    reported = [line for line in report_out.splitlines() if line.startswith("vt ")]
    evaluated = [line for line in eval_out.splitlines() if line.startswith("vt ")]
    assert reported and reported[0] == evaluated[0]  # one rule: the same cell
    assert "contradict themselves" in report_out
