"""HELMET's judged tasks (LongQA: NarrativeQA; summarization: Multi-LexSum) with a fake
OpenAI-compatible judge: prompts byte-compared with the reference's, score parsing, untrusted
replies, the judge in provenance and in each judged record's settings, and no judge -> unavailable.

Expected values come from one run here of princeton-nlp/HELMET at 4526dfb:
scripts/eval_gpt4_longqa.py (judge_prompt, parse_output, parse_json), scripts/eval_gpt4_summ.py
(fluency/recall/precision prompts, parse_json), and the template literals of data.py
(load_narrativeqa, load_multi_lexsum).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from harness.core.errors import TaskUnavailable
from harness.models import judge as J
from tasks.helmet import judge_prompts as JP
from tasks.helmet import prompts as P
from tasks.helmet.metrics import parse_output
from tasks.registry import get_task

from .judge_server import JudgeServer


def _sha(text: str, n: int = 24) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def test_prompts_are_the_reference_strings():
    names = (
        "LONGQA_JUDGE",
        "SUMM_FLUENCY",
        "SUMM_RECALL",
        "SUMM_PRECISION",
        "BOOK_FLUENCY",
        "BOOK_RECALL",
        "BOOK_PRECISION",
    )
    assert [_sha(getattr(JP, n), 16) for n in names] == [
        "5e58473efe89277f",
        "1ae2a512ceda269a",
        "18fbb46816b4f273",
        "977e320bea9a5956",
        "1cdd25fa4ef5982b",
        "2716154035020275",
        "98f9964803fa36d0",
    ]
    assert [
        _sha(getattr(P, n))
        for n in ("NARRATIVEQA_USER", "NARRATIVEQA_SYSTEM", "MULTI_LEXSUM_USER", "MULTI_LEXSUM_SYSTEM")
    ] == [
        "c2d5faf4e03db5fa8ea35a8b",
        "64f89cf423ee1a167e9c8142",
        "ffdb9f17d1cdafcb0714694b",
        "23e0248aa91fc8c0f7a07b66",
    ]
    q, ans = "Who rescued the dog?", ["Mary Ann", "his sister Mary"]
    got = [
        _sha(JP.LONGQA_JUDGE.format(question=q, correct_answers=ans, parsed_output=parse_output(o.replace("\n", " "))))
        for o in ("Answer: Mary Ann rescued it.\nThen more", " The sister", "\nMary")
    ]
    assert got == ["65fad9c34a91dc70fe7cd347", "a10881c55dc30970afbb858d", "8aed692b4c14f45b7011e179"]
    kps, text = (
        ["The plaintiffs sued the city.", "The case settled in 2010."],
        "Summary: The city was sued. It settled.",
    )
    assert _sha(JP.SUMM_FLUENCY.format(text=text)) == "33345b6ae014fe4c9ed8188d"
    keypoints = "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(kps))
    assert _sha(JP.SUMM_RECALL.format(keypoints=keypoints, summary=text)) == "544f9d332edd47eb910bb074"
    assert (
        _sha(JP.SUMM_PRECISION.format(expert_summary="A long expert summary.", summary=text))
        == "749426ca5e8935dc0615975d"
    )


def test_parse_json_matches_the_reference():
    replies = [
        'Reasoning... {"fluency": 1, "correctness": 2}',
        'x {"a": 1} then {"fluency": 0, "correctness": 3}',
        "no json",
        '{"fluency": 1, "correctness": 3',
        '```json\n{"precision": 3, "sentence_count": 4}\n```',
    ]
    expected = [
        {"fluency": 1, "correctness": 2},
        {"fluency": 0, "correctness": 3},
        None,
        None,
        {"precision": 3, "sentence_count": 4},
    ]
    assert [J.parse_json(r) for r in replies] == expected
    assert [J.parse_json(r, True) for r in replies] == expected
    nested = '```json\n{"a": {"b": 1}}\n```'  # the last {...} is cut short: the summ parser reads the block
    assert J.parse_json(nested) is None and J.parse_json(nested, True) == {"a": {"b": 1}}


def _write_judged_data(folder):
    nq = folder / "narrativeqa"
    nq.mkdir(parents=True)
    story = " ".join(f"Line {i}: the dog ran to the river and Mary Ann followed." for i in range(300))
    rows = [
        {
            "document": {"text": story},
            "question": {"text": f"Who followed the dog {i}?"},
            "answers": [{"text": "Mary Ann"}, {"text": "Mary"}],
        }
        for i in range(3)
    ]
    (nq / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (nq / "train.jsonl").write_text(
        "".join(json.dumps({"question": {"text": f"Q{i}?"}, "answers": [{"text": f"A{i}"}]}) + "\n" for i in range(4))
    )
    ml = folder / "multi_lexsum"
    ml.mkdir(parents=True)
    val = [
        {
            "id": f"case-{i}",
            "sources": [f"Document {j} of case {i}: the city was sued over policing." * 20 for j in range(3)],
            "summary/short": f"The city was sued in case {i}.",
            "summary/long": f"A long summary of case {i}.",
            "summary/short_keypoints": ["The city was sued.", "The case settled."],
        }
        for i in range(2)
    ]
    (ml / "multi_lexsum_val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in val))
    (ml / "train.jsonl").write_text(
        "".join(json.dumps({"summary/short": f"Train summary {i}."}) + "\n" for i in range(3))
    )


def _reply(prompt: str) -> str:
    if "Correct answers:" in prompt:
        answer = prompt.rsplit("\nAnswer: ", 1)[1]
        correctness = 3 if "Mary" in answer else 1
        return 'Thinking. {"fluency": 1, "correctness": ' + str(correctness) + "}"
    if "evaluate the fluency" in prompt:
        return '{"fluency": 1}'
    if "key points" in prompt.lower():
        return 'The summary covers one. {"recall": 1}'
    return 'Output: {"precision": 1, "sentence_count": 2}'


@pytest.fixture
def judged_dir(tmp_path, monkeypatch):
    _write_judged_data(tmp_path)
    monkeypatch.setenv("HARNESS_HELMET", str(tmp_path))
    for var in (J.ENV_BASE_URL, J.ENV_MODEL, J.ENV_API_KEY_ENV):
        monkeypatch.delenv(var, raising=False)
    J._describe.cache_clear()
    yield tmp_path
    for var in (J.ENV_BASE_URL, J.ENV_MODEL, J.ENV_API_KEY_ENV):  # set_judge writes them for the run's workers
        os.environ.pop(var, None)
    J._describe.cache_clear()


def _exact(name: str):
    """The task under the exact-length protocol (documents cut in the evaluated model's tokens)."""
    task = get_task(name)
    task.set_protocol("exact-length")
    return task


def test_no_judge_means_unavailable(judged_dir):
    for name in ("helmet_narrativeqa", "helmet_multi_lexsum", "helmet_infbench_sum"):
        with pytest.raises(TaskUnavailable, match="--judge-base-url URL --judge-model NAME"):
            get_task(name).check_available()
    for name in ("helmet_infbench_qa", "helmet_infbench_choice"):  # LongQA without a judge
        assert not hasattr(get_task(name), "judge_settings")


def test_scores_and_untrusted_replies(judged_dir, bpe_tokenizer, monkeypatch):
    with JudgeServer(_reply) as server:
        J.set_judge(server.url, "judge")
        qa = _exact("helmet_narrativeqa")
        qa.check_available()
        s = qa.sample(2048, 0, 42, bpe_tokenizer)
        assert s.num_tokens + 100 <= 2048 and s.input.endswith("Question: " + s.metadata["question"])
        assert P.TRUNCATION_POSTFIX in s.input and s.metadata["context_tokens"] < s.metadata["context_tokens_available"]
        assert qa.score(" Mary Ann followed it.", s) == 1.0
        assert qa.score(" the neighbour", s) == pytest.approx(1 / 3)
        body = server.requests[-1]
        assert body["temperature"] == 0.1 and body["top_p"] == 0.9 and body["seed"] == 42 and body["max_tokens"] == 2048
        assert [m["role"] for m in body["messages"]] == ["user"]  # HELMET sends no system turn
        # a reply without readable scores is asked again; out-of-range scores count as unreadable
        server.script = ["no scores here", '{"fluency": 7, "correctness": 3}']
        assert qa.score(" Mary", s) == 1.0 and len(server.script) == 0
        server.script = ["garbage"] * J.ATTEMPTS
        with pytest.raises(J.JudgeReplyError, match="no readable scores"):
            qa.score(" Mary", s)
        server.script = [{"choices": []}] * 8  # a malformed body: an error (after the endpoint's retries)
        with pytest.raises(J.UserError):
            qa.score(" Mary", s)
        server.script = []
        summ = _exact("helmet_multi_lexsum")
        t = summ.sample(2048, 0, 42, bpe_tokenizer)
        assert t.answer_prefix == "\n\nSummary:" and t.num_tokens + 400 <= 2048
        # fluency 1, recall 1 of 2 key points, precision 1 of 2 sentences: F1 0.5
        assert summ.score(" The city was sued. It settled.", t) == pytest.approx(0.5)
        assert server.requests[-1]["max_tokens"] == 4096
        from .fixtures import write_helmet

        write_helmet(judged_dir)
        book = _exact("helmet_infbench_sum")
        book.check_available()
        u = book.sample(2048, 0, 42, bpe_tokenizer)
        assert u.max_new_tokens == 1200 and u.num_tokens + 1200 <= 2048
        assert book.score(" Keeper walks. The end.", u) == pytest.approx(0.5)  # the _book prompts, same scoring
        assert "Example 2:" in server.requests[-1]["messages"][0]["content"]
        settings = summ.judge_settings()
        assert (
            settings["model"] == "judge"
            and settings["root"] == "/models/judge-v1"
            and settings["base_url"] == server.url
        )


def test_eval_records_the_judge(tiny_llama_dir, judged_dir, tmp_path, monkeypatch):
    from harness.cli import main

    out = tmp_path / "out"
    with JudgeServer(_reply) as server:
        code = main(
            [
                "eval",
                "--ckpts",
                str(tiny_llama_dir),
                "--tasks",
                "helmet_narrativeqa,helmet_multi_lexsum,helmet_json_kv",
                "--lengths",
                "2k",
                "--samples",
                "1",
                "--max-new-tokens",
                "4",
                "--judge-base-url",
                server.url,
                "--judge-model",
                "judge",
                "--out",
                str(out),
                "--no-progress",
                "--cache-dir",
                "none",
                "--protocol",
                "exact-length",
            ]
        )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    judge = results["provenance"]["judge"]
    assert judge["model"] == "judge" and judge["root"] == "/models/judge-v1" and judge["base_url"] == server.url
    recs = {json.loads(x)["task"]: json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()[1:]}
    assert recs["helmet_narrativeqa"]["settings"]["judge"]["root"] == "/models/judge-v1"
    assert recs["helmet_multi_lexsum"]["settings"]["judge"]["max_tokens"] == 4096
    assert "judge" not in recs["helmet_json_kv"]["settings"]  # only judged records carry it


def test_judge_flags_come_in_pairs(monkeypatch):
    with pytest.raises(J.UserError, match="both"):
        J.set_judge("http://127.0.0.1:1/v1", None)


def test_unreachable_or_unknown_judge_names_its_flags(judged_dir):
    cfg = J.JudgeConfig("http://127.0.0.1:9/v1", "judge", retries=0)
    with pytest.raises(J.UserError, match="judge: .*cannot be reached.*--judge-base-url"):
        J.judge_settings(cfg, 10)
    with JudgeServer(_reply) as server, pytest.raises(J.UserError, match="judge: model 'other' is not served"):
        J.judge_settings(J.JudgeConfig(server.url, "other"), 10)
