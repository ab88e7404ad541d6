"""OpenAI-MRCR set-ups that look like scores or like a hang (docs/failure-modes.md): items past the
model's window, and a silent count of every item's tokens up front."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import records

FIXTURES = Path(__file__).resolve().parents[1] / "mrcr" / "fixtures"
TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}<|assistant|>\n"


@pytest.fixture
def mrcr(monkeypatch, tmp_path):
    """The released-layout fixtures, bins counted in UTF-8 bytes (o200k_base cannot be had offline)."""
    from tasks.mrcr import bins, data, tasks

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    monkeypatch.setattr(bins, "reference_counter", lambda: lambda text: len(text.encode()))
    data.clear_cache()
    tasks._BIN_TOKENS.clear()
    tasks._PROMPT_TOKENS.clear()
    yield FIXTURES
    data.clear_cache()


def test_mrcr_items_past_the_window_are_left_out_and_counted(run, mrcr, tiny_llama_dir, tmp_path):
    """lm-eval 3754: prompts that do not fit the model's window must be filtered with its tokenizer and
    reported, not sent to be cut or refused. Here they are left out and counted, on stderr and in
    every record (a bin none of whose items fits is listed as unavailable with the count)."""
    model = tmp_path / "chat"
    shutil.copytree(tiny_llama_dir, model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": TEMPLATE}))
    out = tmp_path / "out"
    ran = run("eval", "--ckpts", str(model), "--chat", "--suite", "mrcr", "--mrcr-data", str(mrcr), "--out",
              str(out), "--max-length", "706", "--max-new-tokens", "2", "--cache-dir", "none")  # fmt: skip
    assert ran.code == 0 and "items do not fit the 706-token window (prompt + 2 to generate" in ran.err
    recs = records(out)
    assert recs and all(r["num_tokens"] + 2 <= 706 for r in recs)  # the run's budget, not the card's 4096
    assert sum(r["metadata"]["too_long"] for r in recs) > 0
    for r in recs:  # each record says how many items of its bin were left out, and the rest ran
        assert r["metadata"]["bin_items"] - r["metadata"]["too_long"] == sum(x["task"] == r["task"] for x in recs)


def test_mrcr_counting_every_item_up_front_is_announced(mrcr, monkeypatch, capsys):
    """openbench 24: counting the tokens of every item before the first request looked like a stall.
    The count says what it is doing and how many items, before it starts, and moves a bar."""
    from harness.core import progress
    from tasks.mrcr.tasks import bin_tokens

    moved = []

    class Bar:
        def __init__(self, **kw):
            moved.append(kw["total"])

        def update(self, n):
            moved.append(n)

        def close(self):
            pass

    monkeypatch.setattr(progress, "progress_bar", lambda **kw: Bar(**kw))
    assert len(bin_tokens(8)) == 8
    assert "MRCR: counting o200k_base tokens of 8 8needle.parquet" in capsys.readouterr().err
    assert moved == [8] + [1] * 8
