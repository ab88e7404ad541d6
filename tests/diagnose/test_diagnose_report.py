"""The report files: JSON schema, HTML tables, PNGs only when asked."""

from __future__ import annotations

import json

from harness.diagnose.report import JSON_NAME, write_report


def _run(ckpt, dtype, scale):
    shifts = [0, 16, 100]
    return {
        "checkpoint": ckpt,
        "dtype": dtype,
        "product": dtype,
        "model": {},
        "num_samples": 2,
        "D": {
            "shifts": shifts,
            "delta2": 16,
            "mean": [scale, 0.0, 2 * scale],
            "std": [0.0] * 3,
            "per_sample": [[scale, 0.0, 2 * scale]] * 2,
            "per_layer_mean": [[scale], [0.0], [2 * scale]],
        },
        "per_token": {"delta1": 0, "delta2": 16, "mean": [scale / 2, scale / 2]},
        "D_logit": {"delta1": 0, "delta2": 16, "lengths": [64, 128], "mean": [scale, 3 * scale], "std": [0, 0]},
    }


def test_report_without_plots(tmp_path):
    result = {"settings": {"seq_len": 2}, "runs": [_run("a/ckpt-1", "bf16", 1.5e-3), _run("b/ckpt-1", "fp32", 2.5e-7)]}
    paths = write_report(result, tmp_path, plots=False)
    data = json.loads((tmp_path / JSON_NAME).read_text())
    assert data["schema_version"] == 1 and data["runs"][1]["D"]["mean"][2] == 5e-7
    assert "Eq. 4" in data["definitions"]["D"] and data["provenance"]["package_version"]
    page = paths["html"].read_text()
    # two checkpoints with the same name are told apart by their paths
    assert "a/ckpt-1 bf16" in page and "b/ckpt-1 fp32" in page
    assert "1.500e-03 ± 0.000e+00" in page and "7.500e-07" in page  # D and D_logit tables
    assert "<img" not in page and not (tmp_path / "figure1.png").exists()


def test_report_with_plots(tmp_path):
    result = {"settings": {}, "runs": [_run("x/m", "bf16", 1e-3)]}
    paths = write_report(result, tmp_path)
    assert paths["figure1"].read_bytes()[:4] == b"\x89PNG" and "sources" not in paths
    assert paths["html"].read_text().count("<img") == 1
