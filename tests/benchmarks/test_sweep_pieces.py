"""The sweep's small pieces against hand-worked numbers: the estimate for tasks a budget did not
reach, the budget rule, the measuring order, the decoding-step count, the shapes' arithmetic, and
the Llama-3 tokenizer's merges (on a toy rank table; on Meta's file where llama-models is installed).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import llama3_tokenizer
from ruler_sweep import DecodeSteps, TaskTiming, estimate_seconds, fits, measure_order
from sweep_model import LLAMA_31_8B, small_shape


def _timing(task, samples, wall, decode, new, max_new=128) -> TaskTiming:
    return TaskTiming(task, samples, max_new, wall, decode_s=decode, new_tokens=new)


def test_estimate_from_the_measured_tasks():
    # a: 40 s for 2 samples (20 s each), 8 s of it decoding 256 tokens -> 16 s a sample outside decoding
    # b: 20 s for 2 samples (10 s each), 2 s decoding 60 tokens       ->  9 s a sample outside decoding
    # estimate for 50 new tokens: (16 + 9) / 2 + 50 x (8 + 2) / (256 + 60) = 12.5 + 1.582278 = 14.082278
    a, b = _timing("a", 2, 40.0, 8.0, 256), _timing("b", 2, 20.0, 2.0, 60, 30)
    assert estimate_seconds([a, b], 50) == pytest.approx(14.082_278, abs=1e-6)
    assert estimate_seconds([a], 0) == pytest.approx(16.0)
    with pytest.raises(ValueError, match="nothing measured"):
        estimate_seconds([], 50)


def test_a_task_runs_when_its_samples_fit_the_seconds_left():
    done = [_timing("a", 2, 40.0, 8.0, 256), _timing("b", 2, 20.0, 2.0, 60)]  # mean 15 s a sample
    assert fits([], 2, 0.0)  # the first task always runs
    assert fits(done, 2, None)  # no budget
    assert fits(done, 2, 30.0) and not fits(done, 2, 29.9)
    assert fits(done, 1, 15.0) and not fits(done, 3, 44.0)


def test_tasks_of_every_decode_budget_come_first():
    ruler = ["niah_single_1", "niah_single_2", "vt", "cwe", "fwe", "qa_1", "qa_2"]
    assert measure_order(ruler) == ["niah_single_1", "vt", "cwe", "fwe", "qa_1", "niah_single_2", "qa_2"]
    assert measure_order(["qa_2", "niah_single_2"]) == ["qa_2", "niah_single_2"]


def test_timing_figures():
    t = TaskTiming("a", 2, 128, 50.0, [1000, 1000], reused_tokens=500, new_tokens=256, prefill_s=40.0)
    t.decode_s, t.prefill_flops, t.steps, t.width = 8.0, 4e15, 127, 8
    assert t.seconds_per_sample == 25.0 and t.prefill_per_sample == 20.0
    assert t.prefill_tflops == pytest.approx(100.0)  # 4 PFLOP in 40 s
    assert t.decode_tokens_per_s == 32.0 and t.reused_share == 0.25
    assert t.decode_rows == pytest.approx(2.0) and t.rows_text() == "2.0 of 8"  # (256 - 2) / 127 steps
    assert TaskTiming("b", 1, 30, 1.0).rows_text() == "n/a"


def test_decode_steps_count_calls_at_the_decode_width():
    import torch

    class Echo(torch.nn.Module):
        def forward(self, input_ids=None, **kwargs):
            return input_ids

    model = Echo()
    with DecodeSteps(model, 8) as probe:
        model(input_ids=torch.zeros(1, 4096, dtype=torch.long))  # a prefill chunk
        for _ in range(3):
            model(input_ids=torch.zeros(8, 1, dtype=torch.long))  # decoding steps
        model(torch.zeros(8, 1, dtype=torch.long))  # positional input_ids
        model(input_ids=torch.zeros(1, 1, dtype=torch.long))  # a one-token chunk is no step
    model(input_ids=torch.zeros(8, 1, dtype=torch.long))  # after exit: not counted
    assert probe.steps == 4


def test_the_8b_shape_and_its_arithmetic():
    s = LLAMA_31_8B
    cfg = s.config(vocab=1, bos=128000, eos=128001)
    assert cfg["vocab_size"] == 128_256 and cfg["max_position_embeddings"] == 131_072 and cfg["head_dim"] == 128
    assert cfg["rope_scaling"] == {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    # 2 (K and V) x 32 layers x 8 heads x 128 x 131,072 tokens x 2 bytes = 17,179,869,184 bytes (~17 GB)
    assert s.kv_bytes(131_072) == 17_179_869_184
    small = small_shape(512)
    assert small.config(vocab=4099, bos=0, eos=1)["vocab_size"] == 4099
    assert small.config(4099, 0, 1)["rope_scaling"]["original_max_position_embeddings"] == 32


def _rank_file(tmp_path: Path, tokens: list[bytes]) -> Path:
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


def test_merges_follow_the_rank_of_the_token_they_make(tmp_path):
    ranks = llama3_tokenizer.read_ranks(_rank_file(tmp_path, [b"a", b"b", b"c", b"ab", b"bc", b"abc"]))
    assert ranks == {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    # ab (rank 3) <- a+b; bc (4) <- b+c; abc (5) <- a+bc and ab+c, a (0) before ab (3)
    assert llama3_tokenizer.merges_of(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b"ab", b"c")]


def test_a_file_that_is_not_llama3s_is_refused(tmp_path):
    model = _rank_file(tmp_path, [bytes([i]) for i in range(256)])
    with pytest.raises(ValueError, match="not Llama 3's 128256"):
        llama3_tokenizer.build(model, tmp_path / "tok")


@pytest.mark.skipif(llama3_tokenizer.default_model_file() is None, reason="llama-models is not installed")
def test_llama3_ids(tmp_path):
    from transformers import AutoTokenizer

    llama3_tokenizer.build(llama3_tokenizer.default_model_file(), tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    assert len(tok) == 128_256 and (tok.bos_token_id, tok.eos_token_id) == (128_000, 128_001)
    assert tok.encode("Hello world") == [128_000, 9906, 1917]
    assert tok.encode("The special magic number is: 1234567.")[1:] == [
        791,
        3361,
        11204,
        1396,
        374,
        25,
        220,
        4513,
        10961,
        22,
        13,
    ]
