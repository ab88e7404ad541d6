"""LongBench v2: prompts, truncation and answer extraction against THUDM/LongBench's pred.py
(recorded in reference_expected.json), data loading, categories and the sample-weighted averages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import TaskUnavailable
from tasks.longbench_v2 import data
from tasks.longbench_v2.prompts import extract_answer
from tasks.registry import all_suites, get_task

from .helpers import PER_CELL, make_items, write_data

EXPECTED = json.loads((Path(__file__).parent / "reference_expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def lbv2_dir(tmp_path, monkeypatch):
    write_data(tmp_path)
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    yield tmp_path
    data.clear_cache()


def _locate(index_in_file: int) -> tuple[str, str, int]:
    """(difficulty, length class, index within its cell) of the index-th item of data.json."""
    items = make_items()
    it = items[index_in_file]
    same = [i for i, x in enumerate(items) if (x["difficulty"], x["length"]) == (it["difficulty"], it["length"])]
    return it["difficulty"], it["length"], same.index(index_in_file)


@pytest.mark.parametrize("case", EXPECTED["prompts"], ids=lambda c: str(c["index_in_file"]))
def test_prompts_are_pred_pys(lbv2_dir, bpe_tokenizer, case):
    d, l, k = _locate(case["index_in_file"])
    plain = get_task(f"longbench_v2_{d}_{l}").sample(0, k, 42, bpe_tokenizer)  # length 0: no truncation
    assert plain.prompt == case["0shot"]
    cot_task = get_task(f"longbench_v2_cot_{d}_{l}")
    cot = cot_task.sample(0, k, 42, bpe_tokenizer)
    assert cot.prompt == case["cot"] and cot.max_new_tokens == 1024
    second = cot_task.follow_up(cot, "  Step 1: the passage opens with a word.\nSo (B).\n")
    assert second.prompt == case["cot_answer"] and second.max_new_tokens == 128
    nc = get_task(f"longbench_v2_nocontext_{d}_{l}").sample(0, k, 42, bpe_tokenizer)
    assert nc.prompt == case["nocontext"] and "truncation" not in nc.metadata
    assert plain.references == (make_items()[case["index_in_file"]]["answer"],)
    assert get_task(f"longbench_v2_{d}_{l}").follow_up(plain, "x") is None


@pytest.mark.parametrize("case", EXPECTED["truncated"], ids=lambda c: f"{c['index_in_file']}@{c['max_len']}")
def test_middle_truncation_is_pred_pys(lbv2_dir, bpe_tokenizer, case):
    d, l, k = _locate(case["index_in_file"])
    task = get_task(f"longbench_v2_{d}_{l}")
    s = task.sample(case["max_len"] + 128, k, 42, bpe_tokenizer)  # the length is the prompt cap + 128 to generate
    info = s.metadata["truncation"]
    assert info["truncated"] and info["max_length"] == case["max_len"] and info["refit_tokens"] == 0
    assert s.prompt == case["prompt"]
    assert s.num_tokens <= case["max_len"]
    assert info["original_tokens"] == len(bpe_tokenizer(task.sample(0, k, 42, bpe_tokenizer).prompt)["input_ids"])


def test_truncation_never_exceeds_the_cap(bpe_tokenizer, byte_tokenizer):
    import random

    from tasks.longbench_v2.truncation import middle_truncate

    rng = random.Random(1)
    vocab = ["alpha", "beta", "1234", "!", "\n", " ", "éa", "中文", "x-y", "the", "’s"]
    for tok in (bpe_tokenizer, byte_tokenizer):
        for _ in range(40):
            text = "".join(rng.choice(vocab) + rng.choice(["", " "]) for _ in range(rng.randint(60, 200)))
            cap = rng.randint(9, 60)
            kept, info = middle_truncate(text, tok, cap)
            assert len(tok(kept)["input_ids"]) <= cap
            assert info["truncated"] == (info["original_tokens"] > cap)


def test_answer_extraction_is_pred_pys():
    assert {r: extract_answer(r) for r in EXPECTED["answers"]} == EXPECTED["answers"]


def test_suites_categories_and_cells(lbv2_dir, bpe_tokenizer):
    from tasks.suites import suite_categories, suite_weighting

    suites = all_suites()
    for variant in ("", "-cot", "-nocontext"):
        names = suites[f"longbench-v2{variant}"]
        assert len(names) == 6
        cats = suite_categories(f"longbench-v2{variant}")
        assert list(cats) == ["Overall", "Easy", "Hard", "Short", "Medium", "Long"]
        assert cats["Overall"] == names and sorted(cats["Easy"] + cats["Hard"]) == sorted(names)
        assert sorted(cats["Short"] + cats["Medium"] + cats["Long"]) == sorted(names)
        assert suite_weighting(f"longbench-v2{variant}") == "samples"
    assert suite_weighting("longbench") is None
    for (d, l), n in PER_CELL.items():
        task = get_task(f"longbench_v2_{d}_{l}")
        assert task.num_samples_available(0) == n and task.family == "longbench-v2"
        s = task.sample(0, n - 1, 42, bpe_tokenizer)
        assert (s.metadata["difficulty"], s.metadata["length_class"]) == (d, l)
    assert get_task("longbench_v2_nocontext_easy_short").no_context
    assert get_task("longbench_v2_cot_easy_short").fit_chat_template


def test_missing_or_bad_data_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    with pytest.raises(TaskUnavailable) as exc:
        get_task("longbench_v2_easy_short").check_available()
    msg = str(exc.value)
    assert "\n" not in msg and "data.json" in msg and "--longbench-v2-data DIR" in msg and "HARNESS_LONGBENCH_V2" in msg
    items = make_items()
    items[2]["difficulty"] = "medium"
    (tmp_path / "data.json").write_text(json.dumps(items))
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="item 2: difficulty 'medium' is not one of easy, hard"):
        get_task("longbench_v2_easy_short").check_available()
    (tmp_path / "data.json").write_text("{not json")
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match="is not valid JSON"):
        get_task("longbench_v2_easy_short").check_available()
    monkeypatch.delenv(data.ENV_VAR)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data.clear_cache()
    with pytest.raises(TaskUnavailable, match=r"offline: HF_HUB_OFFLINE is set.*--longbench-v2-data DIR"):
        get_task("longbench_v2_easy_short").check_available()
    data.clear_cache()


def test_dataset_hash_follows_the_content(lbv2_dir):
    h = get_task("longbench_v2_easy_short").dataset_hash()
    items = make_items()
    (lbv2_dir / "data.json").write_text(json.dumps(items, indent=2))  # same content, other layout
    data.clear_cache()
    assert get_task("longbench_v2_easy_short").dataset_hash() == h
    items[0]["answer"] = "D"
    (lbv2_dir / "data.json").write_text(json.dumps(items))
    data.clear_cache()
    assert get_task("longbench_v2_easy_short").dataset_hash() != h


def test_generate_reads_the_data_flag_and_unknown_suites_are_one_line(tmp_path, bpe_tokenizer_dir, capsys, monkeypatch):
    from harness.cli import main

    folder = tmp_path / "lbv2"
    folder.mkdir()
    write_data(folder)
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    data.clear_cache()
    out = tmp_path / "gen"
    args = ["generate", "--suite", "longbench-v2", "--lengths", "1k", "--samples", "1", "--out", str(out)]
    assert main([*args, "--tokenizer", str(bpe_tokenizer_dir), "--longbench-v2-data", str(folder)]) == 0
    lines = (out / "longbench_v2_easy_short" / "1024.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["metadata"]["truncation"]["max_length"] == 1024 - 128
    args[2] = "longbench-v2-nocontext"  # no context: written once, at length 0
    assert main([*args, "--tokenizer", str(bpe_tokenizer_dir), "--longbench-v2-data", str(folder)]) == 0
    assert [p.name for p in (out / "longbench_v2_nocontext_easy_short").iterdir()] == ["0.jsonl"]
    capsys.readouterr()
    assert main(["generate", "--suite", "longbench-v3", "--lengths", "1k", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown suite 'longbench-v3': choose from ")
    assert "longbench-v2" in err[0] and "babilong" in err[0]
    data.clear_cache()
