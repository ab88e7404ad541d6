"""`harness eval --embedded`: builds the tiny checkpoint series and runs the whole flow."""

from __future__ import annotations

import json

from harness.cli import main


def test_embedded_default_end_to_end(isolated_cwd, capsys):
    assert main(["eval", "--embedded", "--samples", "1", "--lengths", "1k", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "5 checkpoints (steps 10, 20, 30, 40, 50)" in out and "vt" in out and "fwe" in out
    for step in (10, 20, 30, 40, 50):
        assert (isolated_cwd / "runs" / "embedded" / f"ckpt-{step}" / "model.safetensors").exists()
    res = json.loads((isolated_cwd / "results" / "embedded" / "results.json").read_text())
    suite = res["suites"]["ruler"]
    assert suite["evaluated"] == ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt", "cwe", "fwe"]
    assert "qa_1" in suite["excluded"] and suite["summary"]["tasks_covered"] == 6
    assert suite["per_length"]["1024"]["n"] == 5
    fps = {c["fingerprint"] for c in res["run"]["checkpoints"]}
    assert len(fps) == 5  # different seeds, different weights

    # Second call: checkpoints reused (same fingerprints), nothing recomputed.
    store = (isolated_cwd / "results" / "embedded" / "samples.jsonl").read_bytes()
    assert main(["eval", "--embedded", "--samples", "1", "--lengths", "1k", "--no-progress"]) == 0
    assert (isolated_cwd / "results" / "embedded" / "samples.jsonl").read_bytes() == store
