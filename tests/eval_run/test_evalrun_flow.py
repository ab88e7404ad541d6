"""`harness eval` end to end on tiny local checkpoints, checked against a bare transformers loop."""

from __future__ import annotations

import json
import statistics

import pytest

from harness.cli import main

SPEC = "ckpt-<10..20>"


def _eval(root, out, *extra):
    return main(
        [
            "eval",
            "--ckpts",
            f"{root}/{SPEC}",
            "--suite",
            "toy",
            "--lengths",
            "1k",
            "--samples",
            "3",
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ]
    )


def _reference_scores(ckpt_dir, task_name, n, tokenizer):
    """Per-sample scores from model.generate one prompt at a time (no harness runner, no store)."""
    import torch
    from transformers import AutoModelForCausalLM

    from tasks.generate import generate_samples
    from tasks.registry import get_task

    task = get_task(task_name)
    model = AutoModelForCausalLM.from_pretrained(str(ckpt_dir), dtype=torch.float32)
    scores = []
    for s in generate_samples(task, 1024, range(n), tokenizer, seed=42, cache_dir=False):
        ids = torch.tensor([tokenizer(s.prompt)["input_ids"]])
        out = model.generate(ids, do_sample=False, max_new_tokens=s.max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        scores.append(task.score(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True), s))
    return scores


def test_eval_end_to_end_matches_bare_loop_and_resumes_as_noop(ckpt_series, bpe_tokenizer, tmp_path, capsys):
    out = tmp_path / "out"
    assert _eval(ckpt_series, out) == 0
    printed = capsys.readouterr().out
    assert "toy_digits" in printed and "Average (2/2)" in printed

    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(records) == 2 * 2 * 3  # checkpoints x tasks x samples
    assert {r["checkpoint"]["step"] for r in records} == {10, 20}
    r0 = records[0]
    assert r0["settings"]["max_model_len"] == 2048 and r0["settings"]["template"] == "none"
    assert r0["run"] == ckpt_series.name  # default name: the checkpoints' parent folder

    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["toy"]
    per_length = {}
    for task in ("toy_digits", "toy_words"):
        for step in (10, 20):
            expected = 100 * statistics.mean(_reference_scores(ckpt_series / f"ckpt-{step}", task, 3, bpe_tokenizer))
            assert suite["per_task"][task]["1024"]["per_step"][str(step)] == pytest.approx(expected)
            per_length.setdefault(step, []).append(expected)
    avgs = [statistics.mean(v) for v in per_length.values()]
    assert suite["per_length"]["1024"]["mean"] == pytest.approx(statistics.mean(avgs))
    assert suite["per_length"]["1024"]["std"] == pytest.approx(statistics.stdev(avgs))
    assert results["provenance"]["backend"] == "hf" and results["provenance"]["checkpoint_steps"] == [10, 20]

    # The same command again: nothing recomputed, store unchanged, same results.
    before = (out / "samples.jsonl").read_bytes()
    assert _eval(ckpt_series, out) == 0
    assert (out / "samples.jsonl").read_bytes() == before
    again = json.loads((out / "results.json").read_text())
    assert again["suites"] == results["suites"]


def test_more_samples_extend_store_and_fewer_report_subset(ckpt_series, tmp_path):
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-20",
                "--tasks",
                "toy_words",
                "--lengths",
                "1k",
                "--samples",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    first = (out / "samples.jsonl").read_text().splitlines()
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-20",
                "--tasks",
                "toy_words",
                "--lengths",
                "1k",
                "--samples",
                "4",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    second = (out / "samples.jsonl").read_text().splitlines()
    assert second[: len(first)] == first and len(second) == len(first) + 2  # only indices 2, 3 were run
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-20",
                "--tasks",
                "toy_words",
                "--lengths",
                "1k",
                "--samples",
                "1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    res = json.loads((out / "results.json").read_text())
    cell = res["suites"]["custom"]["per_task"]["toy_words"]["1024"]
    rec = next(json.loads(x) for x in second[1:] if json.loads(x)["index"] == 0)
    assert cell["mean"] == pytest.approx(100 * rec["score"]) and cell["num_samples"] == 1


def test_excluded_task_is_listed_not_averaged(ckpt_series, tmp_path):
    out = tmp_path / "out"
    assert _eval(ckpt_series, out, "--exclude", "toy_words", "--last", "1") == 0
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["toy"]
    assert suite["excluded"] == ["toy_words"] and suite["evaluated"] == ["toy_digits"]
    assert suite["per_length"]["1024"]["tasks_covered"] == 1 and suite["per_length"]["1024"]["tasks_total"] == 2
    # --last 1 of ckpt-<10..20>: only ckpt-20 was evaluated and averaged
    assert [c["step"] for c in results["run"]["checkpoints"]] == [20] and results["provenance"]["checkpoint_steps"] == [
        20
    ]
    assert suite["per_length"]["1024"]["n"] == 1 and suite["per_length"]["1024"]["steps"] == [20]
    records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert {r["checkpoint"]["step"] for r in records} == {20} and {r["task"] for r in records} == {"toy_digits"}


def test_loglikelihood_task_goes_through_evaluate_with_runner(ckpt_series, tmp_path):
    from toytasks import NOISE, ToyChoice

    from harness.models.runners.base import LoglikelihoodRequest, RunnerSettings
    from harness.models.runners.hf import HFRunner

    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-10",
                "--tasks",
                "toy_choice,toy_digits",
                "--lengths",
                "1k",
                "--samples",
                "10",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    choice = sorted((r for r in recs if r["task"] == "toy_choice"), key=lambda r: r["index"])
    assert [r["index"] for r in choice] == [0, 1, 2, 3] and all(r["length"] == 0 for r in choice)  # capped at 4
    runner = HFRunner(str(ckpt_series / "ckpt-10"), RunnerSettings(backend="hf", batch_size=1))
    for r in choice:
        ctx = NOISE * (r["index"] + 1) + "The colour is"
        lls = [runner.loglikelihood([LoglikelihoodRequest(ctx, c)])[0][0] for c in ToyChoice.CHOICES]
        assert r["metadata"]["logprobs"] == pytest.approx(lls, abs=1e-4)
        assert r["prediction"] == ToyChoice.CHOICES[int(lls[1] > lls[0])]
    runner.close()
    res = json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]
    assert res["toy_choice"]["0"]["mean"] == pytest.approx(100 * sum(r["score"] for r in choice) / 4)


def test_data_source_flags_set_env(monkeypatch, tmp_path):
    from harness.cli import build_parser
    from harness.commands.eval import config_from_args

    for var in ("HARNESS_ESSAYS", "HARNESS_SQUAD", "HARNESS_HOTPOTQA"):
        # setenv first so monkeypatch restores the variables config_from_args sets (delenv of an
        # unset variable records nothing, and the leaked path breaks every later essay task).
        monkeypatch.setenv(var, "unset")
        monkeypatch.delenv(var)
    args = build_parser().parse_args(
        [
            "eval",
            "--ckpts",
            "x",
            "--essays",
            str(tmp_path / "e"),
            "--squad",
            str(tmp_path / "s.json"),
            "--hotpotqa",
            str(tmp_path / "h.json"),
        ]
    )
    cfg = config_from_args(args)
    # --samples not given: None, i.e. 500 per length-controlled task and length, every item otherwise
    # --lengths not given: None, i.e. 4k-128k for RULER-style tasks and a reference's own grid otherwise
    assert cfg.samples is None and cfg.lengths is None and cfg.backend == "hf" and not cfg.chat_template
    assert cfg.protocol == "reference"
    import os

    assert os.environ["HARNESS_ESSAYS"] == str(tmp_path / "e")
    assert os.environ["HARNESS_SQUAD"] == str(tmp_path / "s.json")
    assert os.environ["HARNESS_HOTPOTQA"] == str(tmp_path / "h.json")


def test_training_settings_reach_results(ckpt_series, tmp_path):
    """harness_training.json beside config.json (harness/models/checkpoints.py TRAINING_FILE) is copied into
    results.json run.checkpoints[].training, and its mode becomes run.mode."""
    from ckpt_copy import copy_ckpt

    from harness.models.checkpoints import TRAINING_FILE

    training = {"mode": "anchor", "window": 512, "rope_theta": 5e6}
    ckpt = copy_ckpt(ckpt_series / "ckpt-10", tmp_path / "anchor" / "ckpt-10")
    (ckpt / TRAINING_FILE).write_text(json.dumps(training))
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--ckpts",
                str(ckpt),
                "--tasks",
                "toy_digits",
                "--lengths",
                "1k",
                "--samples",
                "1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    run = json.loads((out / "results.json").read_text())["run"]
    assert run["mode"] == "anchor" and run["name"] == "anchor"
    assert [(c["step"], c["training"]) for c in run["checkpoints"]] == [(10, training)]
