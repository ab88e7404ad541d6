"""Input protocols and published headlines through `harness eval` (tasks/base.py Task.protocols,
tasks/registry.py Headline): the protocol is part of record identity, a reference protocol brings
its own lengths, sample count, chat policy and system turn, and the headline is the mean of
category means computed from the records by hand."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest

from harness.cli import main

SPEC = "ckpt-<10..20>"
CHAT = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _eval(root, out, *extra):
    return main(["eval", "--ckpts", f"{root}/{SPEC}", "--out", str(out), "--no-progress", *extra])


def _records(out):
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()[1:]]


def test_reference_protocol_defaults_identity_and_headline(ckpt_series, tmp_path, capsys):
    out = tmp_path / "out"
    assert _eval(ckpt_series, out, "--suite", "toy-ref", "--lengths", "1k", "--samples", "2") == 0
    printed = capsys.readouterr().out
    records = _records(out)
    ref = [r for r in records if r["task"] == "toy_ref"]
    toys = [r for r in records if r["task"] != "toy_ref"]
    # the protocol joins the identity of the tasks that have one, and only theirs
    assert ref and all(r["settings"]["protocol"] == "reference" for r in ref)
    assert toys and all("protocol" not in r["settings"] for r in toys)
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["toy-ref"]
    assert results["provenance"]["protocol"] == "reference" and suite["protocol"] == "reference"

    # headline G = mean over categories of the category means, per checkpoint, by hand
    def cell(task, step):
        rs = [r for r in records if r["task"] == task and r["checkpoint"]["step"] == step]
        return 100 * statistics.mean(r["score"] for r in rs)

    group = suite["headline"]["groups"]["G"]["per_length"]["1024"]
    for step in (10, 20):
        want = (cell("toy_ref", step) + (cell("toy_digits", step) + cell("toy_words", step)) / 2) / 2
        assert group["per_step"][str(step)] == pytest.approx(want)
    assert (group["categories_covered"], group["categories_total"]) == (2, 2)
    assert suite["headline"]["label"] == "mean of the two category means"
    assert "‹G›" in printed and "headline (mean of the two category means)" in printed
    # the leaderboard shows the headline first, with how it is averaged
    from leaderboards.build import build, load_runs

    board = build(load_runs([str(out / "results.json")]))
    col = next(c for c in board["columns"] if c["key"] == "hl:G:1024")
    cell = board["rows"][0]["cells"][col["id"]]
    assert cell["value"] == pytest.approx(group["mean"]) and "mean of the two category means" in cell["title"]

    # the other protocol re-computes the protocol's task, and only it
    before = len(records)
    assert (
        _eval(ckpt_series, out, "--suite", "toy-ref", "--lengths", "1k", "--samples", "2", "--protocol", "exact-length")
        == 0
    )
    again = _records(out)
    added = again[before:]
    assert {r["task"] for r in added} == {"toy_ref"}
    assert all(r["settings"]["protocol"] == "exact-length" for r in added)


def test_reference_grid_and_sample_count_when_no_lengths_given(ckpt_series, tmp_path):
    out = tmp_path / "out"
    assert _eval(ckpt_series, out, "--tasks", "toy_ref") == 0
    records = _records(out)
    # the reference's own length grid (1000) and sample count (2) without --lengths / --samples
    assert {r["length"] for r in records} == {1000}
    assert len(records) == 2 * 2  # checkpoints x samples


def test_unknown_protocol_is_one_line(ckpt_series, tmp_path, capsys):
    from harness.core.errors import UserError
    from harness.pipeline.evaluate import EvalConfig, plan_eval

    with pytest.raises(UserError, match="unknown protocol 'bogus'"):
        plan_eval(
            EvalConfig(ckpts=f"{ckpt_series}/{SPEC}", tasks=["toy_ref"], protocol="bogus", out=str(tmp_path / "o"))
        )
    with pytest.raises(SystemExit) as exc:
        _eval(ckpt_series, tmp_path / "o2", "--tasks", "toy_ref", "--protocol", "bogus")
    assert exc.value.code == 2 and not (tmp_path / "o2").exists()


def test_chat_policy_and_reference_system_turn_per_task(ckpt_series, tmp_path):
    """Under --chat the reference protocol's task stays plain while the others are wrapped; under
    exact-length it is wrapped with no system turn of its own."""
    from harness.pipeline.evaluate import EvalConfig, plan_eval

    root = tmp_path / "chat"
    for step in (10, 20):
        shutil.copytree(ckpt_series / f"ckpt-{step}", root / f"ckpt-{step}")
        cfg_path = root / f"ckpt-{step}" / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["chat_template"] = CHAT
        cfg_path.write_text(json.dumps(cfg))

    def prompts(protocol):
        plan = plan_eval(
            EvalConfig(
                ckpts=f"{root}/{SPEC}",
                suite="toy-ref",
                lengths="1k",
                samples=1,
                chat_template=True,
                protocol=protocol,
                out=str(tmp_path / f"out-{protocol}"),
            )
        )
        return {it.task.name: it for it in plan.jobs[0].items}

    ref = prompts("reference")
    assert "<|user|>" not in ref["toy_ref"].prompt and ref["toy_ref"].sample.metadata["chat"] is False
    assert ref["toy_digits"].prompt.startswith("<|user|>") and ref["toy_digits"].sample.metadata["chat"] is True
    exact = prompts("exact-length")
    assert exact["toy_ref"].prompt.startswith("<|user|>")  # no system turn: the reference's is not used
    # a reference task that is wrapped gets its reference's system turn unless --system-prompt says
    from harness.pipeline.sample_plan import _system_prompt
    from tasks.registry import get_task

    task = get_task("toy_ref")
    task.set_protocol("reference")

    assert _system_prompt(EvalConfig(ckpts="x"), task) == "You are a toy."
    assert _system_prompt(EvalConfig(ckpts="x", system_prompt="mine"), task) == "mine"
    task.set_protocol("exact-length")
    assert _system_prompt(EvalConfig(ckpts="x"), task) is None
