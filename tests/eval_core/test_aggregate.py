"""Aggregation math against hand-computed values (harness/pipeline/aggregate.py)."""

from __future__ import annotations

import json
import math

import pytest

from harness.core.effective_length import effective_length
from harness.core.errors import UserError
from harness.core.results_file import load_results, write_results
from harness.pipeline.aggregate import DEFAULT_THRESHOLD, aggregate, apply_threshold

STEPS = (10, 20, 30)
CKPTS = [{"path": f"runs/r/ckpt-{s}", "step": s, "fingerprint": f"fp{s}", "training": None} for s in STEPS]
# Cell scores x100 per (task, length) for checkpoints 10, 20, 30. Two samples per cell: a cell
# of 75 is the samples (1.0, 0.5), 25 is (0.5, 0.0), and so on.
CELLS = {
    ("A", 4096): (100, 50, 75),
    ("A", 8192): (50, 25, 0),
    ("B", 4096): (75, 100, 50),
    ("B", 8192): (25, 50, 0),
}
PAIRS = {100: (1.0, 1.0), 75: (1.0, 0.5), 50: (0.5, 0.5), 25: (0.5, 0.0), 0: (0.0, 0.0)}


def record(task, length, ckpt, index, score, suite="handmade"):  # a suite no test registers (toytasks registers "toy")
    return {
        "type": "sample",
        "run": "r",
        "checkpoint": {k: ckpt[k] for k in ("path", "step", "fingerprint")},
        "suite": suite,
        "task": task,
        "task_version": 1,
        "length": length,
        "index": index,
        "seed": 42,
        "dataset_hash": "h",
        "prediction": "a prediction",
        "score": score,
        "metric": "m",
        "num_tokens": 1,
        "settings": {},
        "metadata": {},
    }


def make_records(cells=CELLS, ckpts=CKPTS):
    out = []
    for (task, length), values in cells.items():
        for ckpt, value in zip(ckpts, values):
            if value is None:
                continue
            for index, score in enumerate(PAIRS[value]):
                out.append(record(task, length, ckpt, index, score))
    return out


SUITES = {
    "handmade": {
        "tasks": ["A", "B", "C", "D"],
        "excluded": ["C"],
        "unavailable": {"D": "data not found: pass --d PATH"},
        "lengths": [4096, 8192],
    }
}
RUN = {"name": "r", "model": "runs/r", "mode": "anchor", "checkpoints": CKPTS}
PROV = {"package_version": "0.1.0", "git_hash": "abc", "backend": "hf"}


def close(stats, mean, std, lo, hi, n=3):
    assert stats["mean"] == pytest.approx(mean) and stats["std"] == pytest.approx(std)
    assert (stats["min"], stats["max"], stats["n"]) == (pytest.approx(lo), pytest.approx(hi), n)


def test_hand_computed_two_tasks_two_lengths_three_checkpoints():
    recs = make_records()
    recs.append(record("C", 4096, CKPTS[0], 0, 0.0))  # excluded: never averaged
    stale = dict(CKPTS[0], fingerprint="old")  # a re-trained dir's old results
    recs.append(record("A", 4096, stale, 0, 0.0))
    recs.append(dict(recs[0], score=0.0))  # a duplicate key: the first one counts
    res = aggregate(recs, SUITES, RUN, PROV)
    assert res["schema_version"] == 2 and res["provenance"] == PROV and res["run"]["checkpoints"] == CKPTS
    s = res["suites"]["handmade"]
    assert (
        s["evaluated"] == ["A", "B"]
        and s["excluded"] == ["C"]
        and s["unavailable"] == {"D": "data not found: pass --d PATH"}
    )

    a4 = s["per_task"]["A"]["4096"]
    close(a4, 75, 25, 50, 100)
    assert a4["steps"] == [10, 20, 30] and a4["per_step"] == {"10": 100, "20": 50, "30": 75} and a4["num_samples"] == 2
    close(s["per_task"]["A"]["8192"], 25, 25, 0, 50)
    close(s["per_task"]["B"]["4096"], 75, 25, 50, 100)
    close(s["per_task"]["B"]["8192"], 25, 25, 0, 50)

    # within each checkpoint first: 4K = (87.5, 75, 62.5), 8K = (37.5, 37.5, 0)
    l4, l8 = s["per_length"]["4096"], s["per_length"]["8192"]
    close(l4, 75, 12.5, 62.5, 87.5)
    assert l4["per_step"] == {"10": 87.5, "20": 75, "30": 62.5}
    close(l8, 25, math.sqrt(468.75), 0, 37.5)  # not the mean of the task stds (25)
    assert (l4["tasks_covered"], l4["tasks_total"]) == (2, 4)

    summ = s["summary"]
    close(summ["avg"], 50, math.sqrt(273.4375), 31.25, 62.5)  # per ckpt (62.5, 56.25, 31.25)
    close(
        summ["wavg_inc"],
        125 / 3,
        math.sqrt(((162.5 - 125) ** 2 + (150 - 125) ** 2 + (62.5 - 125) ** 2) / 9 / 2),
        62.5 / 3,
        162.5 / 3,
    )
    close(
        summ["wavg_dec"],
        525 / 9,
        math.sqrt(((212.5 - 175) ** 2 + (187.5 - 175) ** 2 + (125 - 175) ** 2) / 9 / 2),
        125 / 3,
        212.5 / 3,
    )
    assert (summ["tasks_covered"], summ["tasks_total"]) == (2, 4)
    assert summ["effective_length"] == {"threshold": 85.6, "value": None, "label": "below the first length"}
    assert s["per_task_summary"]["A"]["avg"]["per_step"] == {"10": 75, "20": 37.5, "30": 37.5}
    json.dumps(res, allow_nan=False)


def test_one_checkpoint_has_zero_std():
    res = aggregate(make_records(), SUITES, dict(RUN, checkpoints=CKPTS[:1]), PROV)
    s = res["suites"]["handmade"]
    close(s["per_length"]["4096"], 87.5, 0.0, 87.5, 87.5, n=1)
    close(s["summary"]["avg"], 62.5, 0.0, 62.5, 62.5, n=1)


def test_partial_checkpoint_leaves_suite_average_not_task_set():
    cells = dict(CELLS)
    cells[("B", 8192)] = (25, 50, None)  # checkpoint 30 was killed before B at 8K
    s = aggregate(make_records(cells), SUITES, RUN, PROV)["suites"]["handmade"]
    assert s["per_task"]["B"]["8192"]["n"] == 2 and s["per_task"]["A"]["8192"]["n"] == 3
    l8 = s["per_length"]["8192"]
    assert l8["per_step"] == {"10": 37.5, "20": 37.5} and l8["n"] == 2 and l8["tasks_covered"] == 2
    assert s["summary"]["avg"]["per_step"] == {"10": 62.5, "20": 56.25}


def test_missing_length_leaves_averages_absent_never_zero():
    cells = {k: v for k, v in CELLS.items() if k[1] == 4096}
    s = aggregate(make_records(cells), SUITES, RUN, PROV)["suites"]["handmade"]
    assert "8192" not in s["per_length"] and "8192" not in s["per_task"]["A"]
    assert not {"avg", "wavg_inc", "wavg_dec"} & set(s["summary"])
    assert (s["summary"]["lengths_covered"], s["summary"]["lengths_total"]) == (1, 2)
    assert s["summary"]["effective_length"]["label"] == "below the first length"  # 75 < 85.6


def test_task_covered_at_one_length_only():
    cells = dict(CELLS)
    del cells[("B", 8192)]
    s = aggregate(make_records(cells), SUITES, RUN, PROV)["suites"]["handmade"]
    assert s["per_length"]["4096"]["tasks_covered"] == 2 and s["per_length"]["8192"]["tasks_covered"] == 1
    assert s["per_length"]["8192"]["per_step"] == {"10": 50, "20": 25, "30": 0}
    assert s["summary"]["tasks_covered"] == 1
    assert "B" not in s["per_task_summary"]


def test_categories():
    suites = {"handmade": dict(SUITES["handmade"], categories={"first": ["A", "C"], "both": ["A", "B"]})}
    cats = aggregate(make_records(), suites, RUN, PROV)["suites"]["handmade"]["categories"]
    close(cats["first"]["4096"], 75, 25, 50, 100)
    assert (cats["first"]["4096"]["tasks_covered"], cats["first"]["4096"]["tasks_total"]) == (1, 2)
    assert cats["both"]["8192"]["per_step"] == {"10": 37.5, "20": 37.5, "30": 0}


@pytest.mark.parametrize(
    "means, threshold, value, label",
    [
        ((90, 88, 86), DEFAULT_THRESHOLD, 16384, "16K"),
        ((90, 80, 95), DEFAULT_THRESHOLD, 4096, "4K"),  # a later recovery does not count
        ((80, 95, 95), DEFAULT_THRESHOLD, None, "below the first length"),
        ((85.6, 99, 99), DEFAULT_THRESHOLD, None, "below the first length"),  # "above": strictly greater
        ((90, 88, 86), 87, 8192, "8K"),
    ],
)
def test_effective_length(means, threshold, value, label):
    lengths = [4096, 8192, 16384]
    per_length = {str(L): {"mean": m} for L, m in zip(lengths, means)}
    assert effective_length(per_length, lengths, threshold) == {"threshold": threshold, "value": value, "label": label}


def test_effective_length_skips_unevaluated_lengths():
    per_length = {"4096": {"mean": 90}, "16384": {"mean": 90}}
    assert effective_length(per_length, [4096, 8192, 16384], 85.6)["value"] == 16384
    assert effective_length({}, [4096], 85.6) == {"threshold": 85.6, "value": None, "label": "no length evaluated"}


def test_threshold_and_hub_labels():
    res = aggregate(make_records(), SUITES, RUN, PROV, threshold=70)
    assert res["suites"]["handmade"]["summary"]["effective_length"]["label"] == "4K"
    assert apply_threshold(res, 20)["suites"]["handmade"]["summary"]["effective_length"]["label"] == "8K"
    hub = [dict(c, step=None, path=f"org/m{i}") for i, c in enumerate(CKPTS)]
    recs = make_records(ckpts=hub)
    s = aggregate(recs, SUITES, dict(RUN, checkpoints=hub), PROV)["suites"]["handmade"]
    assert s["per_task"]["A"]["4096"]["per_step"] == {"org/m0": 100, "org/m1": 50, "org/m2": 75}


def test_checkpoints_from_records_when_run_has_none():
    recs = make_records()
    # the same path re-trained: its newer fingerprint (written later) replaces the old one
    recs += [record("A", 4096, dict(CKPTS[2], fingerprint="fp30new"), i, 0.0) for i in range(2)]
    res = aggregate(recs, SUITES, {"name": "r"}, PROV)
    assert [c["fingerprint"] for c in res["run"]["checkpoints"]] == ["fp10", "fp20", "fp30new"]
    assert res["suites"]["handmade"]["per_task"]["A"]["4096"]["per_step"] == {"10": 100, "20": 50, "30": 0}


def test_write_and_load_results(tmp_path):
    res = aggregate(make_records(), SUITES, RUN, PROV)
    path = tmp_path / "run" / "results.json"
    write_results(path, res)
    assert load_results(path) == json.loads(json.dumps(res))
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]  # no temp file left
    with pytest.raises(UserError, match="not found"):
        load_results(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"schema_version": 1, "suites": {')
    with pytest.raises(UserError, match="corrupt"):
        load_results(tmp_path / "bad.json")
    (tmp_path / "foreign.json").write_text('{"hello": 1}')
    with pytest.raises(UserError, match="not a harness results file"):
        load_results(tmp_path / "foreign.json")
    (tmp_path / "new.json").write_text('{"schema_version": 9, "suites": {}}')
    with pytest.raises(UserError, match="schema_version 9"):
        load_results(tmp_path / "new.json")


def test_perplexity_cells_are_corpus_perplexity_and_lower_is_better():
    # Two windows per checkpoint with different token counts: the corpus perplexity weights windows
    # by their tokens, which neither the mean of per-window perplexities nor of 1/ppl scores does.
    windows = {10: [(300.0, 100), (50.0, 100)], 20: [(120.0, 60), (40.0, 40)]}
    recs = []
    for ckpt in CKPTS[:2]:
        for i, (nll, n) in enumerate(windows[ckpt["step"]]):
            r = record("ppl", 4096, ckpt, i, math.exp(-nll / n), suite="ppl")
            r["metadata"] = {"nll": nll, "tokens": n, "ppl": math.exp(nll / n)}
            recs.append(r)
    suites = {"ppl": {"tasks": ["ppl"], "lengths": [4096]}}
    res = aggregate(recs, suites, dict(RUN, checkpoints=CKPTS[:2]), PROV)["suites"]["ppl"]
    expect = {10: math.exp(350.0 / 200), 20: math.exp(160.0 / 100)}
    cell = res["per_task"]["ppl"]["4096"]
    assert cell["per_step"] == {"10": pytest.approx(expect[10]), "20": pytest.approx(expect[20])}
    assert cell["mean"] == pytest.approx((expect[10] + expect[20]) / 2)
    assert res["score"] == "perplexity" and res["summary"]["effective_length"]["value"] is None
    # a threshold never turns a perplexity into an effective length
    assert (
        apply_threshold({"suites": {"ppl": res}}, 1.0)["suites"]["ppl"]["summary"]["effective_length"]["value"] is None
    )


def test_not_length_controlled_suites_have_no_effective_length():
    """MMLU/HellaSwag (length 0) and LongBench (one length: its truncation budget) are not
    length-controlled: effective length n/a, also after apply_threshold; RULER-style keeps it."""
    ckpt = CKPTS[:1]
    recs = [
        record("mmlu", 0, ckpt[0], 0, 1.0, suite="short"),
        record("trec", 4096, ckpt[0], 0, 1.0, suite="longbench"),
        record("A", 4096, ckpt[0], 0, 1.0),
    ]
    suites = {
        "short": {"tasks": ["mmlu"], "lengths": [0]},  # no flag: length 0 only -> not length-controlled
        "longbench": {"tasks": ["trec"], "lengths": [4096], "length_controlled": False},
        "handmade": {"tasks": ["A"], "lengths": [4096], "length_controlled": True},
    }
    res = aggregate(recs, suites, dict(RUN, checkpoints=ckpt), PROV, threshold=50.0)
    na = {"threshold": None, "value": None, "label": "n/a"}
    for name in ("short", "longbench"):
        assert res["suites"][name]["summary"]["effective_length"] == na
        assert res["suites"][name]["length_controlled"] is False
        assert res["suites"][name]["per_length"]  # scores are still there
    assert res["suites"]["handmade"]["summary"]["effective_length"] == {"threshold": 50.0, "value": 4096, "label": "4K"}
    assert "length_controlled" not in res["suites"]["handmade"]
    again = apply_threshold(res, 10.0)
    assert again["suites"]["short"]["summary"]["effective_length"] == na
    assert again["suites"]["longbench"]["summary"]["effective_length"] == na
    assert again["suites"]["handmade"]["summary"]["effective_length"]["threshold"] == 10.0


def test_unavailable_lengths_pass_through_and_show_in_table():
    from harness.pipeline.table import format_table

    ckpt = CKPTS[:1]
    recs = [record("A", 4096, ckpt[0], 0, 1.0)]
    gaps = {"A": {"8192": "no perplexity document has 8192 tokens"}}
    suites = {
        "handmade": {"tasks": ["A"], "lengths": [4096, 8192], "unavailable_lengths": gaps},
        "short": {"tasks": ["mmlu"], "lengths": [0]},
    }
    res = aggregate(
        recs + [record("mmlu", 0, ckpt[0], 0, 1.0, suite="short")], suites, dict(RUN, checkpoints=ckpt), PROV
    )
    assert res["suites"]["handmade"]["unavailable_lengths"] == gaps
    table = format_table(res)
    assert "unavailable: A at 8K (no perplexity document has 8192 tokens)" in table
    short_block = table[table.index("\nshort") :]
    assert "effective length n/a" in short_block and "0M" not in table
    assert short_block.splitlines()[2].split()[:2] == ["Task", "n/a"]


def test_records_of_one_identity_with_other_content_are_reported():
    """Two records with one key and different content (a hand-edited store): the first written
    counts and results.json says how many disagreed, never a silent choice (issue 40)."""
    recs = make_records()
    twin = json.loads(json.dumps(recs[0]))
    twin["score"] = 1.0 - twin["score"]
    same = json.loads(json.dumps(recs[1]))  # an identical duplicate is no conflict
    out = aggregate(recs + [twin, same], SUITES, RUN, PROV)
    assert out["conflicting_records"] == 1
    assert out["suites"] == aggregate(recs, SUITES, RUN, PROV)["suites"]
    from harness.pipeline.table import format_table

    assert "1 record(s) share an identity" in format_table(out)
    assert "conflicting_records" not in aggregate(recs + [same], SUITES, RUN, PROV)
