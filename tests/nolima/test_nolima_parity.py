"""NoLiMa against the reference's own code, without the checkout: the pinned output of
benchmarks/nolima_parity.py (re-made with `python benchmarks/nolima_parity.py --reference DIR
--write-pin tests/nolima/parity_pin.json` on a checkout of adobe-research/NoLiMa at 7532e4e), and
the paper's base score and effective length (tasks.nolima.effective)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tasks.nolima.effective import effective_length, per_test_means

from .fixtures import write_nolima

ROOT = Path(__file__).resolve().parents[2]
PIN = json.loads((Path(__file__).parent / "parity_pin.json").read_text())


def _script():
    spec = importlib.util.spec_from_file_location("nolima_parity", ROOT / "benchmarks" / "nolima_parity.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pinned_reference_output_has_no_mismatch():
    # the reference ran every cell of both tasks at six haystack sizes, and ours matched each one
    assert PIN["lengths"] == [250, 500, 1000, 2000, 4000, 8000]
    for task, per_len in PIN["tasks"].items():
        assert set(per_len) == {str(L) for L in PIN["lengths"]}
        for cell in per_len.values():
            assert cell["cells"] == (312 if task == "nolima" else 104)
            assert set(cell["mismatches"].values()) == {0}
            assert cell["system"] == ["You are a helpful assistant"] and cell["max_tokens"] == [192]


def test_our_prompts_and_scores_equal_the_references(tmp_path, bpe_tokenizer):
    """Our reference-protocol prompts (digest over every cell) and metric on the script's
    predictions equal what the reference's run_tests.py built and scored."""
    script = _script()
    write_nolima(tmp_path)
    ours = script.our_cells(tmp_path, bpe_tokenizer, PIN["lengths"][:4])  # 8K/4K: the same code, slower
    for (task, L), cells in ours.items():
        got = script.digest(cells)
        want = PIN["tasks"][task][str(L)]
        assert got == {k: v for k, v in want.items() if k != "mismatches"}, (task, L)


def test_paper_base_score_is_the_mean_of_per_test_maxima():
    # two tests peaking at different short lengths: the paper's base (mean of per-test maxima) is
    # 100, the mean of the per-length means would be 50
    means = {(250, "a"): 100.0, (500, "a"): 0.0, (1000, "a"): 0.0}
    means |= {(250, "b"): 0.0, (500, "b"): 100.0, (1000, "b"): 100.0}
    means |= {(2000, "a"): 90.0, (2000, "b"): 80.0, (4000, "a"): 80.0, (4000, "b"): 80.0}
    out = effective_length(means)
    assert out["base_score"] == 100.0 and out["base_lengths"] == [250, 500, 1000]
    assert out["threshold"] == 85.0
    # 1K scores 50 < 85: below the first column, as Table 3 writes it
    assert out["value"] is None and out["label"] == "<1K"


def test_table3_gpt4o_row():
    # README Table 3, GPT-4o: base 99.3 -> threshold 84.4; 8K 89.2 passes, 16K 81.6 does not
    row = {1000: 98.1, 2000: 98.0, 4000: 95.7, 8000: 89.2, 16000: 81.6, 32000: 69.7}
    means = {(L, "t"): v for L, v in row.items()} | {(250, "t"): 99.3, (500, "t"): 99.0}
    out = effective_length(means)
    assert round(out["base_score"], 1) == 99.3 and round(out["threshold"], 1) == 84.4
    assert out["value"] == 8000 and out["label"] == "8K"
    # exact-length runs (1024 units) use the same rule: <= 1K are the base lengths
    binary = {(L * 1024 // 1000, t): v for (L, t), v in means.items() if L >= 1000}
    out = effective_length(binary)
    assert out["base_lengths"] == [1024] and out["value"] == 8192 and out["label"] == "8K"


def test_per_test_means_within_then_across_checkpoints():
    rows = [(1000, "a", "c1", 1.0), (1000, "a", "c1", 0.0), (1000, "a", "c2", 1.0), (1000, "b", "c1", 0.0)]
    assert per_test_means(rows) == {(1000, "a"): 0.75, (1000, "b"): 0.0}
