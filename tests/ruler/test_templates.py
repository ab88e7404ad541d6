"""Rendered prompts against the reference strings (NVIDIA/RULER constants.py, copied here by hand
from the reference, not from our templates module)."""

import re

from tasks.registry import get_task

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."


def test_niah_singular_prompt(bpe_tokenizer):
    s = get_task("niah_single_1").sample(1024, 3, 42, bpe_tokenizer)
    key = re.search(r"for (\S+) mentioned", s.answer_prefix).group(1)
    head = "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you about the number afterwards.\n"
    tail = f"\nWhat is the special magic number for {key} mentioned in the provided text?"
    assert s.input.startswith(head) and s.input.endswith(tail)
    assert s.answer_prefix == f" The special magic number for {key} mentioned in the provided text is"
    lines = s.input[len(head) : -len(tail)].split("\n")
    needle = f"One of the special magic numbers for {key} is: {s.references[0]}."
    assert lines.count(needle) == 1 and set(lines) == {NOISE, needle}
    assert re.fullmatch(r"[a-z-]+-[a-z]+", key) and re.fullmatch(r"\d{7}", s.references[0])


def test_niah_plural_prompts(bpe_tokenizer):
    s = get_task("niah_multivalue").sample(2048, 0, 42, bpe_tokenizer)
    key = re.search(r"for (\S+) mentioned", s.answer_prefix).group(1)
    assert s.input.startswith(
        "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the numbers afterwards.\n"
    )
    assert s.input.endswith(f"\nWhat are all the special magic numbers for {key} mentioned in the provided text?")
    assert s.answer_prefix == f" The special magic numbers for {key} mentioned in the provided text are"
    assert len(s.references) == 4
    q = get_task("niah_multiquery").sample(2048, 0, 42, bpe_tokenizer)
    keys = re.search(r"for (.+) mentioned in the provided text are$", q.answer_prefix).group(1)
    assert re.fullmatch(r"\S+, \S+, \S+, and \S+", keys)
    u = get_task("niah_single_3").sample(2048, 0, 42, bpe_tokenizer)
    assert "I will quiz you about the uuid afterwards." in u.input
    assert re.search(
        r"One of the special magic uuids for \S+ is: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.",
        u.input,
    )


def test_vt_prompt(bpe_tokenizer):
    s = get_task("vt").sample(2048, 0, 42, bpe_tokenizer)
    value = re.search(r"assigned the value (\d+), they are: $", s.answer_prefix).group(1)
    assert (
        s.answer_prefix
        == f" Answer: According to the chain(s) of variable assignment in the text above, 5 variables are assigned the value {value}, they are: "
    )
    icl, task = s.input.split("\n\nMemorize and track", 1)
    assert icl.startswith("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n")
    assert re.search(r"they are:  [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3} [A-Z]{3}\n$", icl + "\n")
    assert task.endswith(f"\nQuestion: Find all variables that are assigned the value {value} in the text above.")


def test_cwe_prompt(bpe_tokenizer):
    s = get_task("cwe").sample(8192, 0, 42, bpe_tokenizer)
    head = "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that appear most often.\n"
    q = "\nQuestion: What are the 10 most common words in the above list?"
    assert s.answer_prefix == " Answer: The top 10 words that appear most often in the list are:"
    example, task = s.input.split("\n" + head)
    assert example.startswith(head) and task.endswith(q)
    assert re.search(
        re.escape(q)
        + r" Answer: The top 10 words that appear most often in the list are: 1\. \S+ 2\. \S+ .* 10\. \S+$",
        example,
    )


def test_fwe_prompt(bpe_tokenizer):
    s = get_task("fwe").sample(2048, 0, 42, bpe_tokenizer)
    assert s.input.startswith(
        "Read the following coded text and track the frequency of each coded word. Find the three most frequently appeared coded words. "
    )
    assert s.input.endswith(
        "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently appeared words in the above coded text?"
    )
    assert (
        s.answer_prefix == " Answer: According to the coded text above, the three most frequently appeared words are:"
    )


def test_qa_prompt(bpe_tokenizer, squad_file):
    task = get_task("qa_1")
    task.path = str(squad_file)
    s = task.sample(1024, 0, 42, bpe_tokenizer)
    assert s.input.startswith(
        "Answer the question based on the given documents. Only give me the answer and do not output any other words.\n\nThe following are given documents.\n\nDocument 1:\n"
    )
    assert s.input.endswith(
        "\n\nAnswer the question based on the given documents. Only give me the answer and do not output any other words.\n\nQuestion: What is item 0-0?"
    )
    assert s.answer_prefix == " Answer:"
