"""`harness eval` end to end (harness.cli main) with the tiny Llama on local fixture data for the
suites that are not RULER: longbench-icl (middle truncation), short (lm-eval) and ppl (corpus
perplexity); plus provenance, the --samples default and the training settings of a checkpoint."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from harness.cli import main
from harness.core.errors import UserError
from tasks import ppl

from .helpers import _icl_files
from .test_ppl import DOC

TRAINING = {"schema_version": 1, "mode": "anchor", "window": 512, "rope_theta": 5e6, "step": 100}


@pytest.fixture(scope="module")
def run_dir(tiny_llama_dir, tmp_path_factory):
    """<run>/ckpt-100: the tiny Llama with harness_training.json beside config.json (as `harness train` writes it)."""
    root = tmp_path_factory.mktemp("anchor-run")
    ckpt = root / "ckpt-100"
    shutil.copytree(tiny_llama_dir, ckpt)
    (ckpt / "harness_training.json").write_text(json.dumps(TRAINING))
    return root


def _eval(run_dir, out, *extra):
    return main(
        ["eval", "--ckpts", f"{run_dir}/ckpt-100", "--out", str(out), "--no-progress", "--cache-dir", "none", *extra]
    )


def _records(out):
    return [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]


def _check_training(results, run_dir):
    ckpts = results["run"]["checkpoints"]
    assert [c["step"] for c in ckpts] == [100] and ckpts[0]["path"].endswith("ckpt-100")
    assert ckpts[0]["training"] == TRAINING
    assert ckpts[0]["training"]["window"] == 512 and ckpts[0]["training"]["rope_theta"] == 5e6
    assert results["run"]["mode"] == "anchor" and results["run"]["model"] == str(run_dir)


def test_eval_longbench_icl_end_to_end(run_dir, lb_dir, tmp_path, capsys):
    _icl_files(lb_dir)
    out = tmp_path / "out"
    assert (
        _eval(
            run_dir,
            out,
            "--suite",
            "longbench-icl",
            "--samples",
            "2",
            "--max-length",
            "256",
            "--longbench",
            str(lb_dir),
        )
        == 0
    )
    printed = capsys.readouterr().out
    recs = _records(out)
    assert sorted((r["task"], r["index"]) for r in recs) == [
        ("lsht", 0),
        ("samsum", 0),
        ("trec", 0),
        ("trec", 1),
        ("triviaqa", 0),
    ]
    for r in recs:
        # the reference protocol (default): --max-length is pred.py's prompt budget, one for all tasks
        assert r["settings"]["truncation"] == "middle" and r["length"] == 256
        assert r["metadata"]["truncation"]["max_length"] == 256 and r["metadata"]["protocol"] == "reference"
        assert r["num_tokens"] <= 256 + 2  # pred.py's cut as it is: a seam merge may re-encode over

    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["longbench-icl"]
    assert suite["evaluated"] == ["trec", "triviaqa", "samsum", "lsht"] and suite["lengths"] == [256]
    cat = suite["categories"]["LongBench ICL"]["256"]
    assert cat["tasks_covered"] == 4 and cat["mean"] == pytest.approx(
        sum(suite["per_task"][t]["256"]["mean"] for t in suite["evaluated"]) / 4
    )
    assert suite["per_task"]["trec"]["256"]["num_samples"] == 2  # --samples 2 caps (trec has 2 items)
    # not length-controlled: no effective length; the table says n/a
    assert suite["summary"]["effective_length"] == {"threshold": None, "value": None, "label": "n/a"}
    assert "effective length n/a" in printed and "[LongBench ICL]" in printed
    prov = results["provenance"]
    assert prov["truncation"] == "middle" and prov["max_length"] == 256 and prov["lm_eval_version"] is None
    assert prov["samples"] == 2
    _check_training(results, run_dir)


def test_eval_short_end_to_end(run_dir, short_dirs, tmp_path, capsys):
    from tasks.short.lm_adapter import lm_eval_version

    out = tmp_path / "out"
    assert _eval(run_dir, out, "--suite", "short", "--samples", "2") == 0
    printed = capsys.readouterr().out
    recs = _records(out)
    assert sorted((r["task"], r["index"], r["length"]) for r in recs) == [
        ("hellaswag", 0, 0),
        ("hellaswag", 1, 0),
        ("mmlu", 0, 0),
        ("mmlu", 1, 0),
    ]
    assert all(r["settings"]["truncation"] == "none" for r in recs)
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["short"]
    assert suite["lengths"] == [0] and suite["per_task"]["mmlu"]["0"]["num_samples"] == 2
    assert suite["summary"]["effective_length"]["label"] == "n/a" and suite["length_controlled"] is False
    prov = results["provenance"]
    assert prov["lm_eval_version"] == lm_eval_version() and prov["lm_eval_version"]
    assert prov["truncation"] == "none" and "max_length" not in prov
    assert "0M" not in printed and "effective length n/a" in printed
    _check_training(results, run_dir)


def test_eval_ppl_end_to_end_with_a_length_no_document_reaches(run_dir, tmp_path, monkeypatch, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"text": "short one."}\n' + json.dumps({"text": DOC}) + "\n")
    monkeypatch.setenv(ppl.ENV_VAR, str(docs))
    out = tmp_path / "out"
    assert _eval(run_dir, out, "--suite", "ppl", "--lengths", "256,4k", "--samples", "2") == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "ppl@256" not in captured.err  # the task's own bar obeys --no-progress
    recs = _records(out)
    assert sorted((r["length"], r["index"]) for r in recs) == [(256, 0), (256, 1)]  # 4K: planned out, nothing lost
    results = json.loads((out / "results.json").read_text())
    suite = results["suites"]["ppl"]
    assert suite["score"] == "perplexity"
    assert suite["summary"]["effective_length"]["label"] == "n/a (perplexity)"
    nll, tokens = sum(r["metadata"]["nll"] for r in recs), sum(r["metadata"]["tokens"] for r in recs)
    assert suite["per_task"]["ppl"]["256"]["mean"] == pytest.approx(math.exp(nll / tokens))
    assert "4096" not in suite["per_task"]["ppl"] and suite["evaluated"] == ["ppl"]
    gaps = suite["unavailable_lengths"]
    assert list(gaps) == ["ppl"] and list(gaps["ppl"]) == ["4096"]
    assert gaps["ppl"]["4096"].startswith("no perplexity document has 4096 tokens")
    assert "unavailable: ppl at 4K (no perplexity document has 4096 tokens" in printed
    assert results["provenance"]["truncation"] == "none" and results["provenance"]["lm_eval_version"] is None


def test_ppl_unavailable_at_every_length_is_listed_before_any_model_load(run_dir, tmp_path, monkeypatch):
    from harness.pipeline.evaluate import EvalConfig, plan_eval

    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"text": DOC}) + "\n")
    monkeypatch.setenv(ppl.ENV_VAR, str(docs))
    with pytest.raises(UserError, match="ppl: no perplexity document has 4096 tokens"):
        plan_eval(
            EvalConfig(
                ckpts=f"{run_dir}/ckpt-100", suite="ppl", lengths="4k,8k", out=str(tmp_path / "o"), progress=False
            )
        )
    # next to a task that can run, it is listed as unavailable (reason at its shortest length)
    plan = plan_eval(
        EvalConfig(
            ckpts=f"{run_dir}/ckpt-100",
            tasks=["ppl", "niah_single_1"],
            lengths="4k",
            samples=1,
            out=str(tmp_path / "o2"),
            progress=False,
        )
    )
    assert [t.name for t in plan.tasks] == ["niah_single_1"]
    assert plan.unavailable["ppl"].startswith("no perplexity document has 4096 tokens")


def test_samples_default_all_items_for_fixed_datasets_500_for_length_controlled(
    run_dir, short_dirs, tmp_path, monkeypatch
):
    """Without --samples: MMLU/HellaSwag (and LongBench) get every item, length-controlled tasks 500;
    --samples N caps every task."""
    from harness.cli import build_parser
    from harness.commands.eval import config_from_args
    from harness.pipeline.evaluate import DEFAULT_SAMPLES, plan_eval
    from harness.pipeline.sample_plan import _num_samples

    def planned(*flags):
        args = build_parser().parse_args(
            [
                "eval",
                "--ckpts",
                f"{run_dir}/ckpt-100",
                "--suite",
                "short",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
                *flags,
            ]
        )
        plan = plan_eval(config_from_args(args))
        return {w.task.name: len(w.indices) for job in plan.jobs for w in job.runner_work}, plan

    counts, plan = planned()
    assert plan.cfg.samples is None
    assert counts == {"mmlu": 4, "hellaswag": 3}  # every item of the tiny files
    assert planned("--samples", "2")[0] == {"mmlu": 2, "hellaswag": 2}
    assert planned("--samples", "600")[0] == {"mmlu": 4, "hellaswag": 3}

    class LengthControlled:
        length_controlled = True

        def num_samples_available(self, length):
            return None

        def default_samples(self, length):
            return None

    assert DEFAULT_SAMPLES == 500
    assert _num_samples(LengthControlled(), 4096, None, None) == 500
    assert _num_samples(LengthControlled(), 4096, 7, None) == 7


def test_paper_suite_reports_families_with_length_control():
    """--suite paper is reported per family; only RULER's lengths are context lengths."""
    from types import SimpleNamespace

    from harness.pipeline.aggregate import aggregate
    from harness.pipeline.results import report_suites
    from tasks.registry import all_suites, get_task

    names = all_suites()["paper"]
    tasks = [get_task(n) for n in names]
    plan = SimpleNamespace(
        suite_label="paper",
        suite_tasks=names,
        cfg=SimpleNamespace(exclude=[], max_length=None),
        unavailable={},
        tasks=tasks,
        lengths=[4096, 8192],
        # as plan_eval computes them for --lengths 4k,8k on an 8K model
        task_lengths={t.name: t.task_lengths([4096, 8192], 8192, None) for t in tasks},
        contexts={"fp": 8192},
        unavailable_lengths={},
    )
    suites = report_suites(plan)
    assert {k: (v["lengths"], v["length_controlled"]) for k, v in suites.items()} == {
        "ruler": ([4096, 8192], True),
        "longbench": ([7500], False),  # pred.py's prompt budget for an 8K model
        "short": ([0], False),
    }
    ckpt = {"path": "r/ckpt-1", "step": 1, "fingerprint": "fp"}

    def rec(task, length, score):
        return {
            "type": "sample",
            "run": "r",
            "checkpoint": ckpt,
            "suite": "paper",
            "task": task,
            "task_version": "1",
            "length": length,
            "index": 0,
            "seed": 42,
            "dataset_hash": "h",
            "prediction": "",
            "score": score,
            "metric": "m",
            "num_tokens": 1,
            "settings": {},
            "metadata": {},
        }

    res = aggregate(
        [rec("niah_single_1", 4096, 1.0), rec("niah_single_1", 8192, 1.0), rec("trec", 7500, 1.0), rec("mmlu", 0, 1.0)],
        suites,
        {"name": "r", "model": "r", "mode": None, "checkpoints": [dict(ckpt, training=None)]},
        {},
        threshold=50.0,
    )
    eff = {k: v["summary"]["effective_length"]["label"] for k, v in res["suites"].items()}
    assert eff == {"ruler": "8K", "longbench": "n/a", "short": "n/a"}


def test_max_length_must_leave_room_for_a_prompt(run_dir, lb_dir, tmp_path):
    """Under the exact-length protocol --max-length is prompt + generation: one at or below a task's
    tokens to generate would give a prompt cap <= 0, which truncation reads as "no truncation"; it is
    an error instead. (Under the reference protocol it is the prompt budget: test_reference_protocol.)"""
    from harness.pipeline.evaluate import EvalConfig, plan_eval

    _icl_files(lb_dir)
    with pytest.raises(UserError, match="--max-length 128 leaves no prompt for samsum"):
        plan_eval(
            EvalConfig(
                ckpts=f"{run_dir}/ckpt-100",
                suite="longbench-icl",
                max_length=128,
                out=str(tmp_path / "o"),
                progress=False,
                protocol="exact-length",
            )
        )
    plan = plan_eval(
        EvalConfig(
            ckpts=f"{run_dir}/ckpt-100",
            suite="longbench-icl",
            max_length=129,
            out=str(tmp_path / "o"),
            progress=False,
            cache_dir="none",
            protocol="exact-length",
        )
    )
    assert plan.truncation_budget == 129 and plan.all_lengths == [129]
