"""qa_1 / qa_2 on tiny local SQuAD / HotpotQA files; missing data -> TaskUnavailable."""

import re

import pytest

from harness.core.errors import TaskUnavailable, UserError
from tasks.data.qa import load_qa
from tasks.registry import get_task
from tests.ruler.test_tasks import check_length_rule


def _task(name, path):
    t = get_task(name)
    t.path = str(path)
    return t


def test_squad_reading(squad_file):
    d = load_qa("squad", str(squad_file))
    assert len(d.docs) == 32 and len(d.qas) == 32  # unanswerable questions dropped
    assert d.qas[0]["outputs"] == ["answer 0-0", "item 0-0"]
    assert len(d.qas[0]["more_context"]) == 7


@pytest.mark.parametrize("name,fixture", [("qa_1", "squad_file"), ("qa_2", "hotpot_file")])
@pytest.mark.parametrize("length", [1024, 2048])
def test_qa_length_rule_and_gold_documents(name, fixture, length, bpe_tokenizer, request):
    path = request.getfixturevalue(fixture)
    task = _task(name, path)
    data = task.data()
    for index in (0, 5):
        s = task.sample(length, index, 42, bpe_tokenizer)
        check_length_rule(task, s, bpe_tokenizer)
        q = data.qas[index]
        assert s.input.endswith(f"Question: {q['query']}") and list(s.references) == q["outputs"]
        docs = re.findall(r"Document (\d+):\n", s.input)
        assert [int(x) for x in docs] == list(range(1, len(docs) + 1)) == list(range(1, s.metadata["documents"] + 1))
        for gold in q["context"]:
            assert f":\n{data.docs[gold]}\n\n" in s.input or f":\n{data.docs[gold]}\n\nAnswer the question" in s.input


def test_qa_length_beyond_dataset_names_the_limit(squad_file, bpe_tokenizer):
    with pytest.raises(UserError, match="at most"):
        _task("qa_1", squad_file).sample(16384, 0, 42, bpe_tokenizer)


def test_qa_missing_data_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_SQUAD", raising=False)
    with pytest.raises(TaskUnavailable, match="--squad"):
        _task("qa_1", tmp_path / "nope.json").check_available()
    with pytest.raises(TaskUnavailable, match="--hotpotqa"):
        get_task("qa_2").check_available()  # offline in tests: no hub


def test_qa_scores_part(squad_file, bpe_tokenizer):
    task = _task("qa_1", squad_file)
    s = task.sample(1024, 0, 42, bpe_tokenizer)
    assert task.score(" item 0-0", s) == 1.0 and task.score("nothing", s) == 0.0
