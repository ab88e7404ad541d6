"""NoLiMa: prompts byte-compared with the reference, its metric, both protocols' lengths, missing
and malformed data.

The PINNED prompts are the exact-length protocol's (a haystack fitted to the budget); the reference
protocol's prompts are pinned against the reference's own code in test_nolima_parity.py.

Expected values were computed once by running adobe-research/NoLiMa at 7532e4e on the fixture
of tests/nolima/fixtures.py with the test BPE tokenizer (harness.models.embedded.build_tokenizer):
data/book_haystack.py BookHaystack.generate_w_needle_placement, evaluation/run_tests.py's
argument filling and DEFAULT_TASK_TEMPLATE, async_evaluate.py's per-test seeding and
np.random.choice draws, and async_evaluate.py _evaluate_response (metric "contains").
"""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.core.errors import TaskUnavailable
from tasks.nolima import data
from tasks.nolima.tasks import DEPTHS, MAX_NEW_TOKENS, contains
from tasks.registry import all_suites, get_task

from .fixtures import NEEDLE_SET, write_nolima

# (task, length, index, character, haystack tokens, sha256 prefix of the prompt): each prompt was
# rebuilt by the reference's code for the same test, book, depth and haystack size, and matched.
PINNED = [
    ("nolima", 512, 0, "Gary", 176, "4a49073ee8d41e19b4db4d6a"),
    ("nolima", 512, 1, "Calvin", 176, "5c66b92a9ceaa64a84b3bb8b"),
    ("nolima", 512, 2, "Mandy", 181, "3e69daaacf3839a545934d5a"),
    ("nolima", 512, 3, "Yuki", 174, "4de8a0b442106e7d2a698a78"),
    ("nolima", 512, 4, "Veronica", 174, "df31d088258deb954683a2a8"),
    ("nolima", 512, 5, "Yosef", 187, "c136b84e1a89a72746650254"),
    ("nolima", 1024, 0, "Gary", 688, "684f167f05632e848493e394"),
    ("nolima", 1024, 1, "Calvin", 688, "9305429f98ce194a8f037a38"),
    ("nolima", 1024, 2, "Mandy", 693, "bd1a1577a88d55d56db47f34"),
    ("nolima", 1024, 3, "Yuki", 686, "6c6d8aa1cfa57f9d79976117"),
    ("nolima", 1024, 4, "Veronica", 686, "9b1f4afd67ba8e2177991ed4"),
    ("nolima", 1024, 5, "Yosef", 699, "a0236c4d009ad86e403b027d"),
    ("nolima", 2048, 0, "Gary", 1712, "0f6b3fbf36534e269bb79531"),
    ("nolima", 2048, 1, "Calvin", 1712, "3d4ca5100372860812c92e42"),
    ("nolima", 2048, 2, "Mandy", 1717, "c40125546596611b8a3ab339"),
    ("nolima", 2048, 3, "Yuki", 1710, "86157df88b590e7f9203cd3e"),
    ("nolima", 2048, 4, "Veronica", 1710, "91f6c0bb888b8dc6c3d2bcdb"),
    ("nolima", 2048, 5, "Yosef", 1723, "1848543511f8335f4e6610ca"),
    ("nolima_direct", 512, 0, "Veronica", 169, "04c7d2e6ff7e7d608274bdf9"),
    ("nolima_direct", 512, 1, "Katie", 178, "99baff150b065820a74cea5b"),
    ("nolima_direct", 512, 2, "Katie", 170, "1e5b8cf4dd0aed05927b3b9f"),
    ("nolima_direct", 512, 3, "Gary", 171, "19c75d6f7292962795731f4f"),
    ("nolima_direct", 512, 4, "Yuki", 177, "cffe5322c55e805874deb6b6"),
    ("nolima_direct", 512, 5, "Diana", 170, "77f0504f2f7cfb6c6ed92b66"),
    ("nolima_direct", 1024, 0, "Veronica", 681, "cde29fb531fd48d5f65c4cdb"),
    ("nolima_direct", 1024, 1, "Katie", 690, "0f92b3f649f26b808b1747f2"),
    ("nolima_direct", 1024, 2, "Katie", 682, "566d9ce8dab35544d3246aac"),
    ("nolima_direct", 1024, 3, "Gary", 683, "a7285449c0d390f32997369d"),
    ("nolima_direct", 1024, 4, "Yuki", 689, "487b0abd0c9c5a5015c3bf70"),
    ("nolima_direct", 1024, 5, "Diana", 682, "55b016cfefbbfe6d7e8823a4"),
    ("nolima_direct", 2048, 0, "Veronica", 1705, "b92910a6107c5127cf11d7e1"),
    ("nolima_direct", 2048, 1, "Katie", 1714, "bb2df7f91f41eb5ab4ee3450"),
    ("nolima_direct", 2048, 2, "Katie", 1706, "3f0663341ca47d806c51c05e"),
    ("nolima_direct", 2048, 3, "Gary", 1707, "d4050c921deb1ced4a1f67c5"),
    ("nolima_direct", 2048, 4, "Yuki", 1713, "731afdaacaaa1f3e12445595"),
    ("nolima_direct", 2048, 5, "Diana", 1706, "fafc6d8c2d241db00ee82ca5"),
]


@pytest.fixture
def nolima_dir(tmp_path):
    write_nolima(tmp_path)
    data.set_data_dir(tmp_path)
    yield tmp_path
    data.set_data_dir(None)


def _task(name: str, protocol: str = "exact-length"):
    task = get_task(name)
    task.set_protocol(protocol)
    return task


def test_prompts_match_the_reference(nolima_dir, bpe_tokenizer):
    for task_name, length, index, char, haystack, sha in PINNED:
        s = _task(task_name).sample(length, index, 42, bpe_tokenizer)
        assert s.metadata["character"] == char and s.references == (char,)
        assert s.metadata["haystack_tokens"] == haystack
        assert hashlib.sha256(s.prompt.encode()).hexdigest().startswith(sha), (task_name, length, index)


def test_length_is_exact(nolima_dir, bpe_tokenizer):
    from tasks.nolima.tasks import DEFAULT_TASK_TEMPLATE, BookTokens

    task = _task("nolima")
    d = data.load()
    for length in (512, 1024, 2048):
        for index in range(4):
            s = task.sample(length, index, 42, bpe_tokenizer)
            assert s.num_tokens == len(bpe_tokenizer(s.prompt)["input_ids"])
            assert s.num_tokens + MAX_NEW_TOKENS <= length
            # one more haystack token would not fit (the largest haystack is taken)
            book = BookTokens(dict(d.books)[s.metadata["book"]], bpe_tokenizer)
            test = next(t for t in d.tests if t.name == s.metadata["test"])
            text, _ = book.place(
                test.needle.replace("{CHAR}", s.metadata["character"]),
                s.metadata["haystack_tokens"] + 1,
                s.metadata["depth"] / 100,
            )
            bigger = DEFAULT_TASK_TEMPLATE.format(haystack=text, question=test.question)
            assert len(bpe_tokenizer(bigger)["input_ids"]) + MAX_NEW_TOKENS > length
            assert s.metadata["answer_depths"] == [s.metadata["depth"]] and s.metadata["depth"] in DEPTHS


def test_grid_and_task_split(nolima_dir, bpe_tokenizer):
    nolima, direct = _task("nolima"), _task("nolima_direct")
    # 2 tests x (onehop, twohop) + 2 tests x onehop = 6 non-direct tests; 2 direct; 2 books; 26 depths
    assert nolima.num_samples_available(1024) == 6 * 2 * 26
    assert direct.num_samples_available(1024) == 2 * 2 * 26
    cells = {nolima.cell(i) for i in range(6 * 2 * 26)}
    assert len(cells) == 6 * 2 * 26  # a permutation of the grid
    assert all(t.question_type != "direct" for t, _, _ in cells)
    assert "Which character lives next to" in direct.sample(1024, 0, 42, bpe_tokenizer).prompt
    assert all_suites()["nolima"] == ["nolima"]
    # the seed is NoLiMa's base seed: another one draws other characters
    a = [nolima.sample(1024, i, 42, bpe_tokenizer).references for i in range(8)]
    b = [nolima.sample(1024, i, 7, bpe_tokenizer).references for i in range(8)]
    assert a != b


def test_metric_matches_the_reference():
    # async_evaluate.py _evaluate_response(metric="contains") on these predictions gave:
    preds = ["Yuki", "The answer is Yuki.", "yuki", "Yukiko lives there", "", "Gary and Yuki", "I don't know"]
    assert [contains(p, ["Yuki"]) for p in preds] == [1, 1, 0, 1, 0, 1, 0]
    assert [contains(p, ["Emma", "Gary"]) for p in preds] == [0, 0, 0, 0, 0, 1, 0]


def test_question_placeholder_quirk():
    # run_tests.py rebuilds the question from its template for each placeholder it holds: only the
    # last substitution survives
    needle_set = [
        dict(NEEDLE_SET[1], questions={"onehop": "Who avoids {1} and {2}?"}, tests={"T": {"input_args": ["a", "b"]}})
    ]
    (test,) = data.expand_tests(needle_set)
    assert test.question == "Who avoids {1} and b?"


def test_missing_and_bad_data(tmp_path, monkeypatch):
    task = get_task("nolima")
    data.set_data_dir(tmp_path)
    try:
        with pytest.raises(TaskUnavailable, match="needlesets/needle_set.json not found"):
            task.check_available()
        write_nolima(tmp_path, books=())
        data.set_data_dir(tmp_path)
        with pytest.raises(TaskUnavailable, match="rand_shuffle holds no .txt book"):
            task.check_available()
        write_nolima(tmp_path)
        (tmp_path / "needlesets" / "needle_set.json").write_text(json.dumps([{"id": "x", "needle": "n"}]))
        data.set_data_dir(tmp_path)
        with pytest.raises(TaskUnavailable, match="not a NoLiMa needle set"):
            task.check_available()
        bad = [dict(NEEDLE_SET[0], distractors={"onehop": "d"})]
        (tmp_path / "needlesets" / "needle_set.json").write_text(json.dumps(bad))
        data.set_data_dir(tmp_path)
        with pytest.raises(TaskUnavailable, match="distractors"):
            task.check_available()
    finally:
        data.set_data_dir(None)
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data.set_data_dir(None)
    with pytest.raises(TaskUnavailable, match="offline.*--nolima-data"):
        task.check_available()


def test_books_too_short_make_the_length_unavailable(nolima_dir, bpe_tokenizer):
    with pytest.raises(TaskUnavailable, match="fewer than 65536"):
        get_task("nolima").num_samples_with_tokenizer(65536, bpe_tokenizer)
    assert get_task("nolima").num_samples_with_tokenizer(2048, bpe_tokenizer) == 6 * 2 * 26


def test_generate_command(nolima_dir, bpe_tokenizer_dir, bpe_tokenizer, tmp_path):
    """`harness generate` (light tokenizer, no transformers) writes the same samples as eval builds."""
    from harness.cli import main

    out = tmp_path / "gen"
    args = ["generate", "--tasks", "nolima", "--lengths", "1k", "--samples", "3", "--tokenizer", str(bpe_tokenizer_dir)]
    assert main([*args, "--nolima-data", str(nolima_dir), "--out", str(out), "--cache-dir", "none"]) == 0
    (path,) = (out / "nolima").glob("*.jsonl")  # 1024.jsonl, or 1000.jsonl when lengths map by protocol
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    task = get_task("nolima")  # the default protocol, as the command's
    expected = [task.sample(int(path.stem), i, 42, bpe_tokenizer).prompt for i in range(3)]
    assert [r["input"] + r["answer_prefix"] for r in rows] == expected


def test_reference_protocol(nolima_dir, bpe_tokenizer):
    """The default protocol: the haystack is the length, in the reference's units and grid."""
    from harness.core.errors import UserError
    from tasks.nolima.protocol import REFERENCE_LENGTHS, reference_length
    from tasks.nolima.tasks import SYSTEM_PROMPT

    task = get_task("nolima")
    assert task.protocol == "reference" and task.protocols == ("reference", "exact-length")
    assert task.task_lengths(None, 8192, None) == [250, 500, 1000, 2000, 4000, 8000, 16000, 32000]
    assert list(REFERENCE_LENGTHS) == task.task_lengths(None, 8192, None)
    # --lengths: k = 1024 names the reference's K; 256/512 its 250/500; multiples of 250 as written
    assert task.task_lengths([256, 512, 1024, 2048, 32768, 131072], 8192, None) == [250, 500, 1000, 2000, 32000, 128000]
    assert task.task_lengths([500, 1000, 4000, 16000, 128000], 8192, None) == [500, 1000, 4000, 16000, 128000]
    assert task.task_lengths([1024, 1000], 8192, None) == [1000]
    for bad in (768, 1536, 4097, 300):
        with pytest.raises(UserError, match="names no haystack size.*--protocol exact-length"):
            reference_length(bad)
    assert task.default_samples(1000) == 6 * 2 * 26  # the whole grid, as Table 3 averages it
    assert task.uses_chat_template() and task.reference_system_prompt == SYSTEM_PROMPT == "You are a helpful assistant"
    assert not task.length_is_budget()
    for length in (250, 1000):
        s = task.sample(length, 0, 42, bpe_tokenizer)
        assert s.length == length and s.metadata["haystack_tokens"] == length
        assert s.metadata["protocol"] == "reference" and s.num_tokens > length
    # the same cell under exact-length: a smaller haystack (the budget holds prompt + 192)
    exact = _task("nolima")
    assert exact.task_lengths(None, 8192, None)[0] == 4096 and exact.default_samples(1024) is None
    assert exact.length_is_budget()
    e = exact.sample(1024, 0, 42, bpe_tokenizer)
    assert e.metadata["haystack_tokens"] < 1000 and e.metadata["protocol"] == "exact-length"
