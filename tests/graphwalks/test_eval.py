"""`harness eval --suite graphwalks*` end to end on the fixtures: a scripted runner that answers
correctly, on the last line or above it, checks the headline, the two parses reported apart and
the rows left out by the budget; the tiny Llama runs the real hf backend; without data the run
stops in one line naming the flag."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar

import pytest

from harness.cli import main
from harness.models.runners import registry
from tasks.graphwalks import data

FIXTURES = Path(__file__).parent / "fixtures"
GEN = 16384  # lm-eval's max_gen_toks
PROMPT_ROOM = 3600  # of the fixture's rows, those up to 3600 tokens fit (7 of the 128k set, none of the 1M)


@pytest.fixture(scope="module")
def long_llama_dir(tmp_path_factory, bpe_tokenizer_dir):
    """The tiny Llama with a 32K context: the reference's 16384 tokens to generate need more than 16K."""
    from harness.models.embedded import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("gw-llama"), bpe_tokenizer_dir, max_position_embeddings=32768)


@pytest.fixture(autouse=True)
def fresh_data():
    data.clear_cache()
    yield
    data.clear_cache()


def answer(prompt: str) -> list[str]:
    """The prompt's answer by brute force, from its edge list and operation."""
    body = prompt.split("Here is the graph to operate on:\nThe graph has the following edges:\n", 1)[1]
    lines, op = body.split("\n\nOperation:\n", 1)
    edges = [tuple(x.split(" -> ")) for x in lines.split("\n")]
    m = re.match(r"Find the parents of node (\w+)\.", op)
    if m:
        return sorted({s for s, t in edges if t == m.group(1) and s != m.group(1)})
    m = re.match(r"Perform a BFS from node (\w+) with depth (\d+)\.", op)
    seen = frontier = {m.group(1)}
    for _ in range(int(m.group(2))):
        frontier = {t for s, t in edges if s in frontier} - seen
        seen = seen | frontier
    return sorted(frontier)


class ScriptedRunner:
    """Right answers: BFS ones on the last line, parents ones followed by a remark (lm-eval 3377)."""

    submit_all = True
    seen: ClassVar[list] = []

    def __init__(self, model_path, settings):
        self.settings = settings

    def generate(self, requests):
        ScriptedRunner.seen += list(requests)
        out = []
        for r in requests:
            final = "Final Answer: [" + ", ".join(answer(r.prompt)) + "]"
            operation = r.prompt.rsplit("\n\nOperation:\n", 1)[1]  # (the worked examples ask both)
            out.append(
                final + "\nThese are its parents." if operation.startswith("Find the parents") else "Sure.\n" + final
            )
        return out

    def close(self):
        pass


@pytest.fixture
def scripted(monkeypatch):
    registry.backend_names()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_runner("scripted-gw", help="answers GraphWalks")(ScriptedRunner)
    ScriptedRunner.seen = []
    return ScriptedRunner


def _eval(ckpt, out, *extra):
    return main(["eval", "--ckpts", str(ckpt), "--out", str(out), "--no-progress", "--cache-dir", "none", *extra])


def _kept(label: str, kind: str, tok) -> list[data.Row]:
    return [r for r in data.rows_of(label, kind) if len(tok(r.prompt)["input_ids"]) <= PROMPT_ROOM]


@pytest.mark.parametrize(("suite", "parents_score"), [("graphwalks", 0.0), ("graphwalks-flexible", 100.0)])
def test_released_rows_strict_and_flexible(long_llama_dir, tmp_path, scripted, monkeypatch, suite, parents_score):
    from harness.models.tokenization import load_tokenizer

    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    tok = load_tokenizer(str(long_llama_dir))
    out = tmp_path / suite
    length = GEN + PROMPT_ROOM
    args = [
        "--suite",
        suite,
        "--backend",
        "scripted-gw",
        "--max-length",
        str(length),
        "--graphwalks-data",
        str(FIXTURES),
    ]
    assert _eval(long_llama_dir, out, *args) == 0
    assert {r.max_new_tokens for r in scripted.seen} == {GEN}
    kept = {k: _kept("128k", k, tok) for k in data.PROBLEM_TYPES}
    assert len(scripted.seen) == sum(map(len, kept.values())) == 7
    assert sorted(r.prompt for r in scripted.seen) == sorted(r.prompt for rows in kept.values() for r in rows)
    block = json.loads((out / "results.json").read_text())["suites"][suite]
    prefix = "graphwalks_flexible" if suite.endswith("flexible") else "graphwalks"
    per_task = {t: v[str(length)]["mean"] for t, v in block["per_task"].items()}
    # a right answer scores 100, but a row whose gold set is empty scores 0 whatever is said (the reference's F1)
    bfs = 100.0 * sum(bool(r.answer_nodes) for r in kept["bfs"]) / len(kept["bfs"])
    assert bfs == 75.0 and all(r.answer_nodes for r in kept["parents"])
    assert per_task == pytest.approx({f"{prefix}_128k_bfs": bfs, f"{prefix}_128k_parents": parents_score})
    # the 1M set: no row fits, said per task and length rather than scored 0
    gone = block["unavailable"]
    assert set(gone) == {f"{prefix}_1m_bfs", f"{prefix}_1m_parents"}
    assert all("rows fits" in why and "16384 to generate" in why for why in gone.values())
    n_bfs, n_par = len(kept["bfs"]), len(kept["parents"])
    overall = (bfs * n_bfs + parents_score * n_par) / (n_bfs + n_par)  # the samples pooled: weight_by_size
    assert block["categories"]["128k"][str(length)]["mean"] == pytest.approx(overall)
    assert block["headline"]["groups"]["Overall"]["per_length"][str(length)]["mean"] == pytest.approx(overall)
    assert block["protocol"] == "reference"
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert {r["metadata"]["set"] for r in recs} == {"128k"} and all(r["num_tokens"] <= PROMPT_ROOM for r in recs)


def test_max_new_tokens_lets_a_short_context_run_the_released_rows(long_llama_dir, tmp_path, scripted, monkeypatch):
    """Below 16384 the reference's budget leaves no prompt (one line); --max-new-tokens N keeps the rows
    whose prompt plus N fit, each generated with N (lm-eval's --gen_kwargs max_gen_toks=N)."""
    from harness.models.tokenization import load_tokenizer

    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    args = ["--suite", "graphwalks", "--backend", "scripted-gw", "--max-length", str(PROMPT_ROOM + 64)]
    assert _eval(long_llama_dir, tmp_path / "own", *args) == 2 and not scripted.seen
    assert _eval(long_llama_dir, tmp_path / "low", *args, "--max-new-tokens", "64") == 0
    tok = load_tokenizer(str(long_llama_dir))
    kept = [r.prompt for k in data.PROBLEM_TYPES for r in _kept("128k", k, tok)]
    assert sorted(r.prompt for r in scripted.seen) == sorted(kept) and len(kept) == 7
    assert {r.max_new_tokens for r in scripted.seen} == {64}


def test_missing_data_is_one_line_naming_the_flag(long_llama_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from harness.core import hub

    hub.reset()
    assert _eval(long_llama_dir, tmp_path / "none", "--suite", "graphwalks") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--graphwalks-data DIR" in err[0]
    assert "Traceback" not in err[0]


def test_tiny_llama_runs_both_protocols(long_llama_dir, tmp_path, monkeypatch):
    """The real hf backend: one released row (a few tokens generated), then the exact-length graphs."""
    monkeypatch.setenv(data.ENV_VAR, str(FIXTURES))
    out = tmp_path / "tiny"
    args = ["--suite", "graphwalks", "--samples", "1", "--max-length", str(GEN + 800), "--max-new-tokens", "3"]
    assert _eval(long_llama_dir, out, *args) == 0
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    # 3 tokens to generate leave room for the 1M set's fixture rows too (16384 would not)
    assert {r["task"] for r in recs} == {f"graphwalks_{s}_{k}" for s in ("128k", "1m") for k in data.PROBLEM_TYPES}
    assert all(0.0 <= r["score"] <= 1.0 and r["metadata"]["max_new_tokens_default"] == GEN for r in recs)

    out = tmp_path / "exact"
    args = ["--suite", "graphwalks-exact-length", "--samples", "1", "--lengths", "2k", "--max-new-tokens", "3"]
    assert _eval(long_llama_dir, out, *args) == 0
    recs = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 2 and all(r["num_tokens"] + 512 <= 2048 for r in recs)
    assert all(r["metadata"]["protocol"].startswith("exact-length") for r in recs)


def test_generate_writes_the_rows_that_fit(tmp_path, capsys):
    """`harness generate` counts the rows that fit as eval does; a set with none fails its own line."""
    out = tmp_path / "gen"
    args = ["generate", "--suite", "graphwalks", "--lengths", str(GEN + PROMPT_ROOM), "--samples", "9"]
    assert main([*args, "--out", str(out), "--graphwalks-data", str(FIXTURES), "--cache-dir", "none"]) == 2
    got = capsys.readouterr()
    assert "graphwalks_128k_bfs: the data holds" in got.out and "none of the 1M set's bfs rows fits" in got.err
    rows = [
        json.loads(x) for x in (out / "graphwalks_128k_parents" / f"{GEN + PROMPT_ROOM}.jsonl").read_text().splitlines()
    ]
    assert [r["metadata"]["row"] for r in rows] and all(r["num_tokens"] <= PROMPT_ROOM for r in rows)
