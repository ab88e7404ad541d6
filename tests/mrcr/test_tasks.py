"""MRCR tasks: bins as lengths, items that do not fit the window left out and counted (with the
model's tokenizer), the two renderings, and the sample's identity."""

from __future__ import annotations

import pytest

from harness.core.errors import TaskUnavailable, UserError
from harness.models.runners.common import prompt_ids
from harness.pipeline.reasoning import chat_messages, chat_prompt
from tasks.mrcr import bins, data
from tasks.mrcr.render import completion_text
from tasks.registry import all_suites, get_task, suite_headline


def _task(needles: int, protocol: str, window: int | None):
    task = get_task(f"mrcr_{needles}needle")
    task.set_protocol(protocol)
    if window is not None:
        task.task_lengths(list(bins.BINS), window, None)
    return task


def test_suite_and_headline():
    assert all_suites()["mrcr"] == ["mrcr_2needle", "mrcr_4needle", "mrcr_8needle"]
    head = suite_headline("mrcr")
    assert head is not None and set(head.groups) == {"2 needles", "4 needles", "8 needles"}
    assert head.groups["8 needles"] == {"8 needles": ["mrcr_8needle"]}


def test_lengths_are_the_bins_the_window_holds(mrcr_data):
    task = get_task("mrcr_2needle")
    assert task.task_lengths(None, 8192, None) == [8192]
    assert task.task_lengths(None, 131072, None) == [8192, 16384, 32768, 65536, 131072]
    assert task.task_lengths(None, 200000, None) == [8192, 16384, 32768, 65536, 131072]  # not the cut 256K bin
    assert task.task_lengths(None, 1 << 20, 20000) == [8192, 16384] and task.window == 20000
    assert task.task_lengths(None, 4096, None) == [8192]  # below every bin: the first, filtered and counted
    assert task.task_lengths([16384], 4096, None) == [16384]
    with pytest.raises(UserError, match="MRCR's lengths are its card's bins"):
        task.task_lengths([10000], 131072, None)


def test_items_that_do_not_fit_are_left_out_and_counted(mrcr_data, stand_in_counter, chat_tokenizer, capsys):
    """Brute force: render every item of the bin, count it with the model's tokenizer, keep those whose
    prompt + max_new_tokens fits; the task keeps the same, in file order, and says how many it left."""
    window = 4096 + 700
    for protocol in ("reference", "completion"):
        task = _task(2, protocol, window)
        items = data.load_items(2)
        in_bin = [
            r
            for r, it in enumerate(items)
            if bins.bin_of(bins.item_tokens(it.messages, it.answer, stand_in_counter)) == 8192
        ]
        fits = [
            r
            for r in in_bin
            if len(prompt_ids(chat_tokenizer, _shown(protocol, items[r].messages, chat_tokenizer))) + 4096 <= window
        ]
        assert 0 < len(fits) < len(in_bin)  # the window cuts this bin
        capsys.readouterr()
        assert task.num_samples_available(8192) == len(in_bin)
        assert task.num_samples_with_tokenizer(8192, chat_tokenizer) == len(fits)
        err = capsys.readouterr().err
        assert f"{len(in_bin) - len(fits)} of {len(in_bin)} items do not fit the {window}-token window" in err
        assert "counting the model's tokens of" in err  # the count is announced before it runs
        samples = [task.sample(8192, k, 42, chat_tokenizer) for k in range(len(fits))]
        assert [s.metadata["row"] for s in samples] == fits
        for s in samples:
            assert s.metadata["bin_items"] == len(in_bin) and s.metadata["too_long"] == len(in_bin) - len(fits)
            seen = chat_prompt(chat_tokenizer, s, None) if protocol == "reference" else s.prompt
            assert s.num_tokens == len(prompt_ids(chat_tokenizer, seen)) and s.num_tokens + 4096 <= window
        with pytest.raises(UserError, match="index"):
            task.sample(8192, len(fits), 42, chat_tokenizer)


def test_a_bin_nothing_fits_is_unavailable(mrcr_data, stand_in_counter, chat_tokenizer):
    task = _task(2, "reference", 4200)
    with pytest.raises(
        TaskUnavailable, match=r"none of the 1 items of 2 needles, bin \(8192, 16384\] fits the 4200-token window"
    ):
        task.num_samples_with_tokenizer(16384, chat_tokenizer)
    with pytest.raises(TaskUnavailable, match="has no item in bin"):
        task.num_samples_with_tokenizer(1048576, chat_tokenizer)


def _shown(protocol: str, messages, tokenizer) -> str:
    if protocol == "completion":
        return "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages) + "\n\nAssistant:"
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def test_renderings(mrcr_data, stand_in_counter, chat_tokenizer, bpe_tokenizer):
    """Under "reference" the sample carries the released turns, which the pipeline sends as chat turns
    (rendered through the template, or to a served model as they are); "completion" is plain text."""
    item = data.load_items(4)[0]
    ref = _task(4, "reference", 1 << 20)
    chat = ref.sample(8192, 0, 42, chat_tokenizer)
    assert chat.metadata["conversation"] is True and chat.answer_prefix == "" and ref.uses_chat_template()
    assert chat_messages(chat, None) == item.messages
    assert chat_messages(chat, "Be brief.") == ({"role": "system", "content": "Be brief."}, *item.messages)
    assert chat_prompt(chat_tokenizer, chat, None) == _shown("reference", item.messages, chat_tokenizer)
    assert chat_prompt(chat_tokenizer, chat, None).count("<|assistant|>") == item.total_messages // 2 + 1
    comp = _task(4, "completion", 1 << 20)
    plain = comp.sample(8192, 0, 42, bpe_tokenizer)
    assert plain.prompt == _shown("completion", item.messages, None) and not comp.uses_chat_template()
    assert plain.input == completion_text(item.messages) and plain.answer_prefix == "\n\nAssistant:"
    assert "conversation" not in plain.metadata
    with pytest.raises(UserError, match="pass --chat for a chat model, or --protocol completion"):
        _task(4, "reference", 1 << 20).sample(8192, 0, 42, bpe_tokenizer)


def test_scores_are_the_cards_grade(mrcr_data, stand_in_counter, chat_tokenizer, bpe_tokenizer):
    s = _task(2, "reference", 1 << 20).sample(8192, 1, 42, chat_tokenizer)
    answer, prefix = s.references[0], s.metadata["random_string_to_prepend"]
    task = get_task("mrcr_2needle")
    assert task.score(answer, s) == 1.0 and task.score(" " + answer, s) == 0.0
    assert task.score(answer.removeprefix(prefix), s) == 0.0 and task.score("", s) == 0.0
    c = _task(2, "completion", 1 << 20).sample(8192, 1, 42, bpe_tokenizer)
    assert task.score(" " + answer, c) == 1.0 and task.score("  " + answer, c) == 0.0  # one space only


def test_identity_covers_the_window_and_the_template(mrcr_data, stand_in_counter, chat_tokenizer):
    a, b = _task(2, "reference", 8192), _task(2, "reference", 9000)
    assert a.dataset_hash() != b.dataset_hash()
    before = a.dataset_hash()
    a.num_samples_with_tokenizer(8192, chat_tokenizer)  # sees the chat template
    assert a.dataset_hash() != before
    assert get_task("mrcr_2needle").dataset_hash() == data.items_hash(2)  # no window: the data alone
