"""`harness diagnose rope` end to end on the tiny local Llama: files, schema, user errors."""

from __future__ import annotations

import json

import pytest

from harness.cli import main


def test_diagnose_rope_writes_json_plots_and_html(tiny_llama_dir, tmp_path, capsys):
    out = tmp_path / "diag"
    rc = main(
        [
            "diagnose",
            "rope",
            "--ckpt",
            str(tiny_llama_dir),
            "--dtypes",
            "bf16,fp64",
            "--shifts",
            "0,16,500",
            "--seq-len",
            "128",
            "--num-samples",
            "2",
            "--logit-lengths",
            "64-128",
            "--kernel",
            "sdpa",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    data = json.loads((out / "rope_diagnostic.json").read_text())
    assert data["schema_version"] == 1 and data["kind"] == "rope_diagnostic"
    assert data["settings"]["shifts"] == [0, 16, 500] and data["settings"]["seq_len"] == 128
    bf16, fp64 = data["runs"]
    assert (bf16["dtype"], fp64["dtype"]) == ("bf16", "fp64") and bf16["product"] == "fp32"
    assert len(bf16["per_token"]["mean"]) == 128 and bf16["D_logit"]["lengths"] == [64, 128]
    assert bf16["D"]["mean"][1] == 0.0 and bf16["D"]["mean"][0] > 1e3 * fp64["D"]["mean"][0] > 0
    assert set(bf16["sources"]) >= {"baseline", "angles", "rotated", "product", "all_low", "interaction"}
    for name in ("figure1.png", "sources.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page and "Error sources" in page and "Eq. 4" in page
    assert "max D" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--kernel", "varlen", "--device", "cpu"], "varlen kernel"),
        (["--dtypes", "bf16,fp8"], "unknown dtype"),
        (["--shifts", "0,x"], "bad --shifts value"),
        (["--logit-lengths", "64-100"], "does not reach 100"),
        (["--text", "/nonexistent/file.txt", "--no-plots"], "neither corpus, essays nor an existing text file"),
    ],
)
def test_user_errors_exit_2(tiny_llama_dir, tmp_path, capsys, extra, message):
    rc = main(
        [
            "diagnose",
            "rope",
            "--ckpt",
            str(tiny_llama_dir),
            "--seq-len",
            "64",
            "--num-samples",
            "1",
            "--out",
            str(tmp_path / "o"),
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1


def test_missing_checkpoint_exit_2(tmp_path, capsys):
    assert main(["diagnose", "rope", "--ckpt", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "not a directory" in capsys.readouterr().err
