"""What each row and group of the page says it is (issue 25 §5), and the RoPE diagnostic section.

The demo's page: a base model evaluated as-is plus two runs continued from it. The base row is
named by the model (not its parent folder), its mode is `—` (it was not trained in the comparison),
the run rows show their folders relative to the page's root, a suite made of listed tasks is named
by them (not "custom"), and the RoPE diagnostic shows each checkpoint's D and first-token share.
"""

from __future__ import annotations

import json

import pytest

from harness.core.errors import UserError
from leaderboards.build import build
from leaderboards.diagnostic import deviation, first_token_share, load_rope_diagnostic, rope_section
from leaderboards.labels import path_label, suite_label
from leaderboards.rows import row_identity

from .conftest import STEPS, make_run, suite_from_raw

DEMO_TASKS = ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt"]


def _custom(seed: int, tasks=DEMO_TASKS, lengths=(1024, 2048), steps=STEPS) -> dict:
    import random

    rng = random.Random(seed)
    raw = {t: {L: {s: rng.uniform(0, 100) for s in steps} for L in lengths} for t in tasks}
    return suite_from_raw(raw, list(tasks), list(tasks), list(lengths), list(steps))


@pytest.fixture
def demo_runs(tmp_path):
    """base (assets/demo-base evaluated as-is) and full/anchor continued from it under tmp/out/runs."""
    base_path = str(tmp_path / "repo" / "assets" / "demo-base")
    out = tmp_path / "out"
    runs = []
    data, _ = make_run("base", 1, 50.0, longbench=False, short=False)
    data["run"] = {
        "name": "base",
        "model": str(tmp_path / "repo" / "assets"),  # what `harness eval` records today: the parent folder
        "mode": "intradoc",  # the base's own pretraining record
        "checkpoints": [
            {"path": base_path, "step": None, "fingerprint": "fpb", "training": {"mode": "intradoc", "job": {}}}
        ],
    }
    data["suites"] = {"custom": _custom(1, steps=[0])}
    runs.append(data)
    for i, mode in enumerate(("full", "anchor"), start=2):
        data, _ = make_run(mode, i, 60.0, mode=mode, longbench=False, short=False)
        folder = out / "runs" / mode
        data["run"]["model"] = str(folder)
        data["run"]["checkpoints"] = [
            {
                "path": str(folder / f"ckpt-{s}"),
                "step": s,
                "fingerprint": f"fp{i}-{s}",
                "training": {"mode": mode, "job": {"model": {"path": base_path}}},
            }
            for s in STEPS
        ]
        data["suites"] = {"custom": _custom(i)}
        runs.append(data)
    for r in runs:
        r["sources"] = ["x"]
    return runs, out


def _row(board, name):
    return next(r for r in board["rows"] if r["run"] == name)


def test_base_row_is_named_by_the_model_with_mode_dash(demo_runs):
    runs, out = demo_runs
    board = build(runs, baseline="full", root=out)
    base = _row(board, "base")
    assert base["model"] == "demo-base" and base["mode"] == "—"
    assert "not trained in this comparison" in base["mode_title"] and "intradoc" in base["mode_title"]
    assert base["model_title"].endswith("assets/demo-base")


def test_run_rows_show_paths_relative_to_the_root(demo_runs):
    runs, out = demo_runs
    board = build(runs, baseline="full", root=out)
    assert [(_row(board, m)["model"], _row(board, m)["mode"]) for m in ("full", "anchor")] == [
        ("runs/full", "full"),
        ("runs/anchor", "anchor"),
    ]
    details = {d["run"]: d for d in board["provenance"]["details"]}
    assert [c["path"] for c in details["full"]["checkpoints"]] == [f"runs/full/ckpt-{s}" for s in STEPS]
    # Without a root every path is shown as recorded.
    plain = build(runs, baseline="full")
    assert _row(plain, "full")["model"] == str(out / "runs" / "full")


def test_a_lone_model_not_continued_by_the_others_keeps_its_mode(demo_runs):
    runs, out = demo_runs
    alone = [runs[0]]  # the base without the runs continued from it: nothing says it is their base
    row = build(alone, root=out)["rows"][0]
    assert row["model"] == "demo-base" and row["mode"] == "intradoc"
    assert row_identity(runs[1], runs, out)["is_base"] is False


def test_path_label_relative_only_under_root(tmp_path):
    assert path_label(str(tmp_path / "a" / "b"), tmp_path) == "a/b"
    assert path_label(str(tmp_path / "a"), tmp_path / "elsewhere") == str(tmp_path / "a")
    assert path_label("meta-llama/Llama-2-7b-hf", None) == "meta-llama/Llama-2-7b-hf"


def test_custom_suite_group_is_named_by_its_tasks(demo_runs, tmp_path):
    runs, out = demo_runs
    board = build(runs, baseline="full", root=out)
    (group,) = board["groups"]
    assert group["label"] == "RULER: " + ", ".join(DEMO_TASKS) and group["by_tasks"]
    assert "custom" not in json.dumps([c["group"] for c in board["columns"]])
    assert suite_label("custom", ["niah_single_1", "mmlu"]) == "niah_single_1, MMLU"  # no one home suite
    assert suite_label("custom", ["mmlu", "hellaswag"]) == "Short context: MMLU, HellaSwag"
    assert suite_label("ruler", ["vt"]) == "RULER"  # a declared suite keeps its label
    many = ["niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "vt", "cwe"]
    assert suite_label("custom", many).endswith("niah_multikey_1, +2 more")
    from leaderboards.render import render_html

    html = render_html(board)
    assert 'class="g g-tasks"' in html and "RULER: niah_single_1, niah_multikey_2" in html


# ---------------------------------------------------------------------------------------- RoPE section


def _diag_run(name, checkpoint, dtype, d0, per_token):
    return {
        "name": name,
        "checkpoint": checkpoint,
        "dtype": dtype,
        "num_samples": 2,
        "D": {"shifts": [0], "delta2": 16, "mean": [d0], "std": [0.0], "per_sample": [[d0]]},
        "per_token": {"delta1": 0, "delta2": 16, "mean": per_token},
    }


@pytest.fixture
def diag_file(tmp_path, demo_runs):
    from harness.diagnose.report import write_report

    _, out = demo_runs
    runs = [
        _diag_run("base", str(out.parent / "repo" / "assets" / "demo-base"), "bf16", 0.8, [0.4, 0.3, 0.1]),
        _diag_run("base", str(out.parent / "repo" / "assets" / "demo-base"), "fp32", 2e-4, [1e-4, 5e-5, 5e-5]),
        _diag_run("full", str(out / "runs" / "full" / "ckpt-2000"), "bf16", 0.5, [0.05, 0.2, 0.25]),
        _diag_run("full", str(out / "runs" / "full" / "ckpt-2000"), "fp32", 1e-4, [0.0, 5e-5, 5e-5]),
    ]
    settings = {"seq_len": 512, "num_samples": 2}
    paths = write_report({"settings": settings, "runs": runs}, tmp_path / "diag", plots=False)
    return paths["json"]


def test_rope_section_rows_from_the_diagnostic(diag_file, demo_runs):
    _, out = demo_runs
    data = load_rope_diagnostic(diag_file)
    assert [deviation(r) for r in data["runs"]] == [0.8, 2e-4, 0.5, 1e-4]
    assert first_token_share(data["runs"][0]) == pytest.approx(0.4 / 0.8)
    section = rope_section(data, out, ["base", "full", "anchor"])
    base, full = section["rows"]
    assert (base["label"], base["checkpoint"]) == ("base", "demo-base")  # outside the root: the model's name
    assert (full["label"], full["checkpoint"]) == ("full", "runs/full/ckpt-2000")
    assert base["cells"]["bf16"]["D_text"] == "8.00e-01" and base["cells"]["bf16"]["share_text"] == "50%"
    assert full["cells"]["bf16"]["share_text"] == "10%" and base["ratio_text"] == "4,000×"
    assert "Δ1 = 0 vs Δ2 = 16" in section["what"] and "2 text windows of 512 tokens" in section["what"]


def test_rope_section_on_the_page(diag_file, demo_runs, tmp_path):
    from harness.cli import main

    runs, out = demo_runs
    dirs = []
    for r in runs:
        d = tmp_path / "results" / r["run"]["name"]
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({k: v for k, v in r.items() if k != "sources"}))
        dirs.append(str(d))
    page = out / "leaderboard"
    argv = ["leaderboard", *dirs, "--out", str(page), "--baseline", "full", "--rope-diagnostic", str(diag_file)]
    assert main(argv) == 0
    html = (page / "index.html").read_text()
    assert 'id="lb-rope"' in html and "8.00e-01" in html and "runs/full/ckpt-2000" in html
    assert ">runs/full<" in html and ">demo-base<" in html and ">—<" in html


def _one_run(d: dict) -> str:
    run = {"checkpoint": "c", "dtype": "bf16", "D": d}
    return json.dumps({"kind": "rope_diagnostic", "schema_version": 1, "runs": [run]})


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "is not readable JSON"),
        ('{"kind": "other", "schema_version": 1, "runs": []}', "is not a RoPE diagnostic"),
        ('{"kind": "rope_diagnostic", "schema_version": 1, "runs": []}', "has no runs"),
        (_one_run({"shifts": [0], "delta2": 16, "mean": ["x"]}), "D.mean is not a list of finite numbers"),
        (_one_run({"shifts": [0], "delta2": 16, "mean": [float("nan")]}), "D.mean is not a list of finite numbers"),
        (_one_run({"shifts": [0, 2], "delta2": 16, "mean": [1.0]}), "differ in length"),
    ],
)
def test_bad_diagnostic_is_one_line_and_writes_nothing(tmp_path, capsys, demo_runs, content, message):
    from harness.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(UserError, match=message):
        load_rope_diagnostic(bad)
    runs, _ = demo_runs
    d = tmp_path / "r"
    d.mkdir()
    (d / "results.json").write_text(json.dumps({k: v for k, v in runs[1].items() if k != "sources"}))
    assert main(["leaderboard", str(d), "--out", str(tmp_path / "page"), "--rope-diagnostic", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "page").exists()
