"""`harness eval --against RUN` / `--until-width W` end to end on tiny checkpoints: rounds, pairing,
the other arm's missing samples, resumption, reuse by a later fixed run, a read-only arm, errors."""

from __future__ import annotations

import json

import pytest

from harness.cli import main

POOL = 20


def _eval(ckpts, out, *extra):
    return main(
        [
            "eval",
            "--ckpts",
            ckpts,
            "--suite",
            "toy",
            "--lengths",
            "1k",
            "--samples",
            str(POOL),
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ]
    )


def _records(out):
    lines = (out / "samples.jsonl").read_text().splitlines()[1:]
    return [json.loads(x) for x in lines]


def _indices(out, task):
    return {(r["checkpoint"]["step"], r["index"]) for r in _records(out) if r["task"] == task}


@pytest.fixture
def arms(ckpt_series, tmp_path):
    """B: ckpt-30 evaluated on 5 samples (a fixed run); A's spec: ckpt-10 and ckpt-20."""
    b = tmp_path / "B"
    assert main(["eval", "--ckpts", f"{ckpt_series}/ckpt-<30..30>", "--suite", "toy", "--lengths", "1k",
                 "--samples", "5", "--out", str(b), "--no-progress"]) == 0  # fmt: skip
    return f"{ckpt_series}/ckpt-<10..20>", b


def test_paired_rounds_evaluate_both_arms_on_the_same_samples(arms, tmp_path, capsys):
    a_spec, b = arms
    a = tmp_path / "A"
    assert _eval(a_spec, a, "--against", str(b), "--round-size", "5", "--equivalence-margin", "60") == 0
    err = capsys.readouterr().err
    assert "sequential: 3 cells" in err and "round 1:" in err
    res = json.loads((a / "results.json").read_text())
    seq = res["sequential"]
    assert seq["mode"] == "paired" and seq["against"]["evaluated"] is True
    assert seq["alpha_per_cell"] == pytest.approx(0.05 / 3)
    cells = seq["cells"]
    assert set(cells) == {"toy_digits", "toy_words", "average"}
    for task in ("toy_digits", "toy_words"):
        cell = cells[task]["1024"]
        assert cell["pool"] == POOL and cell["fixed_n"] == POOL
        assert cell["verdict"] in ("better", "worse", "equivalent", "undecided")
        # every drawn sample was evaluated on both checkpoints of A and on B's checkpoint
        drawn = {i for _, i in _indices(a, task)}
        assert len(drawn) == cell["n"] and cell["seen"] == cell["n"]
        assert _indices(a, task) == {(s, i) for s in (10, 20) for i in drawn}
        assert drawn <= {i for _, i in _indices(b, task)}  # B's missing samples were evaluated in B's store
        assert cell["n"] % 5 == 0 or cell["n"] == POOL  # whole rounds
    assert seq["samples"]["used"] == sum(cells[t]["1024"]["n"] for t in ("toy_digits", "toy_words"))
    assert seq["samples"]["fixed"] == 2 * POOL
    assert seq["averages"] == "through tasks"  # the default: a decided task is not drawn for the average
    # the table says the verdicts, and results.json's scores are of the drawn samples only
    block = res["suites"]["toy"]["samples"]["toy_digits"]["1024"]
    assert len(block["index"]) == cells["toy_digits"]["1024"]["n"]


def test_same_command_resumes_and_a_later_fixed_run_reuses_every_sample(arms, tmp_path):
    a_spec, b = arms
    a = tmp_path / "A"
    args = ("--against", str(b), "--round-size", "5", "--equivalence-margin", "60")
    assert _eval(a_spec, a, *args) == 0
    first = json.loads((a / "results.json").read_text())["sequential"]
    n_a, n_b = len(_records(a)), len(_records(b))
    assert _eval(a_spec, a, *args) == 0  # everything stored: no new record, the same verdicts
    again = json.loads((a / "results.json").read_text())["sequential"]
    assert (len(_records(a)), len(_records(b))) == (n_a, n_b)
    assert again["cells"] == first["cells"] and again["rounds"] == first["rounds"]
    # the other rule for averages, on the same store: what it records says so (and draws no fewer)
    assert _eval(a_spec, a, *args, "--hold-averages") == 0
    held = json.loads((a / "results.json").read_text())["sequential"]
    assert held["averages"] == "held" and first["averages"] == "through tasks"
    assert held["samples"]["used"] >= first["samples"]["used"]
    n_a, n_b = len(_records(a)), len(_records(b))
    assert _eval(a_spec, a) == 0  # the fixed protocol on the same --out: only the rest is computed
    assert len(_records(a)) == 2 * 2 * POOL  # 2 tasks x 2 checkpoints x POOL, none twice
    keys = [(r["task"], r["checkpoint"]["step"], r["index"]) for r in _records(a)]
    assert len(keys) == len(set(keys))
    assert "sequential" not in json.loads((a / "results.json").read_text())


def test_read_only_arm_bounds_the_pool_to_what_it_scored(arms, tmp_path, capsys):
    a_spec, b = arms
    res = json.loads((b / "results.json").read_text())
    del res["provenance"]["eval_config"]  # an older results.json: nothing says how to evaluate more of it
    (b / "results.json").write_text(json.dumps(res))
    n_b = len(_records(b))
    a = tmp_path / "A"
    assert _eval(a_spec, a, "--against", str(b), "--round-size", "2") == 0
    seq = json.loads((a / "results.json").read_text())["sequential"]
    assert seq["against"]["evaluated"] is False and "evaluation flags" in seq["against"]["read_only"]
    assert len(_records(b)) == n_b  # nothing added to the read-only run
    for task in ("toy_digits", "toy_words"):
        cell = seq["cells"][task]["1024"]
        assert cell["pool"] == 5 and cell["n"] <= 5 and cell["fixed_n"] == POOL
        assert {i for _, i in _indices(a, task)} <= set(range(5))
    assert "read-only" in capsys.readouterr().err


def test_until_width_sizes_one_run(ckpt_series, tmp_path):
    a = tmp_path / "A"
    assert _eval(f"{ckpt_series}/ckpt-<10..20>", a, "--until-width", "99", "--round-size", "10") == 0
    seq = json.loads((a / "results.json").read_text())["sequential"]
    assert seq["mode"] == "width" and seq["width"] == 99 and seq["equivalence_margin"] is None
    for task in ("toy_digits", "toy_words"):
        cell = seq["cells"][task]["1024"]
        lo, hi = cell["interval"]
        assert 0.0 <= lo <= cell["estimate"] <= hi <= 100.0
        assert cell["verdict"] == "within width" and hi - lo < 99 or cell["n"] == POOL


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--alpha", "0.05"], "--alpha belongs to a sequential evaluation"),
        (["--hold-averages"], "--hold-averages belongs to a sequential evaluation"),
        (["--against", "NOWHERE", "--alpha", "0"], "--alpha 0.0: pass a level between 0 and 0.5"),
        (["--against", "NOWHERE", "--alpha", "nan"], "--alpha: nan is not a finite number"),
        (["--against", "NOWHERE", "--equivalence-margin", "-1"], "--equivalence-margin -1.0"),
        (["--against", "NOWHERE", "--round-size", "0"], "--round-size 0 must be at least 1"),
        (["--against", "NOWHERE", "--until-width", "5"], "--against and --until-width are two rules"),
        (["--until-width", "0"], "--until-width 0.0"),
        (["--until-width", "5", "--equivalence-margin", "3"], "--equivalence-margin is for --against"),
        (["--against", ""], "--against is empty"),
        (["--against", "NOWHERE"], "--against NOWHERE: no such run folder, results.json or checkpoint"),
    ],
)
def test_bad_sequential_flags_are_one_line_errors(ckpt_series, tmp_path, capsys, extra, message):
    argv = ["eval", "--ckpts", f"{ckpt_series}/ckpt-<10..20>", "--suite", "toy", "--lengths", "1k",
            "--out", str(tmp_path / "A"), "--no-progress", *extra]  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own checks (a number that is not finite)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "A" / "samples.jsonl").exists()


def test_against_own_out_and_arm_without_samples_are_refused(arms, tmp_path, capsys):
    a_spec, b = arms
    assert _eval(a_spec, b, "--against", str(b)) == 2
    assert "this run's own --out" in capsys.readouterr().err
    res = json.loads((b / "results.json").read_text())
    for suite in res["suites"].values():
        suite.pop("samples", None)
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "results.json").write_text(json.dumps(res))
    assert _eval(a_spec, tmp_path / "A", "--against", str(flat)) == 2
    assert "no per-sample scores to pair with" in capsys.readouterr().err


def test_recorded_flags_of_another_arm_are_checked_at_the_boundary(arms, tmp_path, capsys):
    a_spec, b = arms
    res = json.loads((b / "results.json").read_text())
    for bad, message in (
        ({"batch_size": "8"}, "'batch_size' is '8', not a int"),
        ({"dtype": 3}, "'dtype' is 3"),
        ({"unheard_of": 1}, "'unheard_of', which this harness does not know"),
        ({"ckpts": ""}, "names no checkpoints"),
    ):
        edited = json.loads(json.dumps(res))
        edited["provenance"]["eval_config"].update(bad)
        (b / "results.json").write_text(json.dumps(edited))
        assert _eval(a_spec, tmp_path / "A", "--against", str(b)) == 2
        err = capsys.readouterr().err
        assert message in err, err


def test_against_checkpoints_evaluates_them_with_our_flags(ckpt_series, isolated_cwd):
    a = isolated_cwd / "A"
    spec = f"{ckpt_series}/ckpt-<30..30>"
    assert _eval(f"{ckpt_series}/ckpt-<10..20>", a, "--against", spec, "--round-size", "10") == 0
    seq = json.loads((a / "results.json").read_text())["sequential"]
    b = isolated_cwd / "results" / ckpt_series.name  # its default --out, as a plain eval would use
    assert seq["against"]["evaluated"] is True and (isolated_cwd / seq["against"]["path"]).resolve() == b.resolve()
    assert seq["against"]["name"] == ckpt_series.name
    for task in ("toy_digits", "toy_words"):
        drawn = {i for _, i in _indices(a, task)}
        assert drawn == {i for _, i in _indices(b, task)} and len(drawn) == seq["cells"][task]["1024"]["n"]
