"""AA-LCR's released layout read as released: the questions CSV and the document zip (or it unpacked),
the zip's mis-decoded file names found as NeMo-Skills' find_actual_file finds them, one-line refusals
naming the data flag, and grading before the judge (empty and cut answers never reach it)."""

from __future__ import annotations

import shutil
import zipfile

import pytest

from harness.core.errors import TaskUnavailable
from tasks.aa_lcr import data, grading
from tasks.aa_lcr.prompts import judge_prompt, question_prompt

from .conftest import FIXTURES


def test_fixtures_load_as_released(aa_lcr_data):
    items = data.load_items()
    assert [it.question_id for it in items] == ["1", "2", "3", "4", "5"]
    assert items[1].question == 'Rank the years by staff count.\nGive "the year, count" pairs, highest first.'
    assert items[1].answer == "1. 2023, 1,350\\n2. 2022, 1,200"  # the CSV's text, not unescaped
    three = items[2]
    assert three.filenames[0] == "Harbour Board\u2019s Annual Report 2023.txt"  # stored as "ΓÇÖ" in the zip
    assert (
        "BEGIN DOCUMENT 1:\nThe harbour board's report lists 3 new cranes and {braces} kept as text.\nEND DOCUMENT 1"
        in three.prompt
    )
    assert "Staff: 1,350.\n" in items[0].prompt and "\r" not in items[0].prompt  # Windows line ends read as text mode
    assert three.prompt.endswith("START QUESTION\n\n" + three.question + "\n\nEND QUESTION\n")


def test_unpacked_layout_gives_the_same_prompts(aa_lcr_data, tmp_path, monkeypatch):
    zipped = [it.prompt for it in data.load_items()]
    shutil.copy(FIXTURES / data.QUESTIONS, tmp_path / data.QUESTIONS)
    zipfile.ZipFile(FIXTURES / data.ZIP).extractall(tmp_path)
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    assert [it.prompt for it in data.load_items()] == zipped


def test_resolve_follows_find_actual_file():
    present = ["Board\u0393\u00c7\u00d6s report.txt", "plain.txt"]
    assert data.resolve("plain.txt", present) == "plain.txt"
    assert data.resolve("Board\u2019s report.txt", present) == present[0]
    assert data.resolve("Board's report.txt", present) == present[0]
    assert data.resolve("missing.txt", present) is None


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("no_csv", "AA-LCR questions"),
        ("no_docs", "AA-LCR documents"),
        ("no_column", "lacks column(s) input_tokens"),
        ("bad_tokens", "is not a number"),
        ("missing_document", "Tribunal decision.txt is not in"),
    ],
)
def test_bad_data_is_one_line_naming_the_flag(tmp_path, monkeypatch, damage, words):
    csv_text = (FIXTURES / data.QUESTIONS).read_text(encoding="utf-8")
    if damage != "no_csv":
        if damage == "no_column":
            csv_text = csv_text.replace(",input_tokens\n", ",tokens\n", 1)
        if damage == "bad_tokens":
            csv_text = csv_text.replace(",105\n", ",many\n", 1)
        (tmp_path / data.QUESTIONS).write_text(csv_text, encoding="utf-8")
    if damage != "no_docs":
        zipfile.ZipFile(FIXTURES / data.ZIP).extractall(tmp_path)
    if damage == "missing_document":
        (tmp_path / "lcr" / "Legal" / "12" / "Tribunal decision.txt").unlink()
    monkeypatch.setenv(data.ENV_VAR, str(tmp_path))
    data.clear_cache()
    with pytest.raises(TaskUnavailable) as info:
        data.load_items()
    data.clear_cache()
    message = str(info.value)
    assert words in message and "--aa-lcr-data DIR" in message and "\n" not in message


def test_grading_before_the_judge():
    assert grading.before_judge("", False) == grading.EMPTY
    assert grading.before_judge(" \n\t", False) == grading.EMPTY
    assert grading.before_judge("110", True) == grading.CUT
    assert grading.before_judge("110", False) is None
    assert [
        grading.is_correct(r) for r in ("CORRECT", " correct.\n", "CORRECTLY", "INCORRECT", "**CORRECT**", None)
    ] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_prompts_are_the_reference_templates():
    prompt = question_prompt(["a", "b"], "Q?")
    assert prompt == (
        "BEGIN INPUT DOCUMENTS\n\nBEGIN DOCUMENT 1:\na\nEND DOCUMENT 1\n\nBEGIN DOCUMENT 2:\nb\nEND DOCUMENT 2\n\n"
        "END INPUT DOCUMENTS\n\nAnswer the following question using the input documents provided above.\n\n"
        "START QUESTION\n\nQ?\n\nEND QUESTION\n"
    )
    turn = judge_prompt(prompt, "42", "{x}")
    assert turn.startswith("Assess whether the following CANDIDATE ANSWER is CORRECT or INCORRECT.")
    assert "The OFFICIAL ANSWER: 42\nCANDIDATE ANSWER TO ASSESS: {x}\n\nReply only with CORRECT or INCORRECT." in turn
