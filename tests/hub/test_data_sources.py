"""The data-source table: one row per source, read by both commands, matching what the loaders read."""

from __future__ import annotations

import os

import pytest

from tasks import data_sources
from tasks.data_sources import DATA_SOURCES, source


def test_rows_name_the_variables_the_loaders_read():
    from tasks import ppl
    from tasks.aa_lcr import data as aa_lcr
    from tasks.babilong import data as babilong
    from tasks.data import qa
    from tasks.graphwalks import data as graphwalks
    from tasks.helmet import data as helmet
    from tasks.helmet import reference as helmet_reference
    from tasks.icl import data as icl
    from tasks.longbench import data as longbench
    from tasks.longbench_v2 import data as longbench_v2
    from tasks.mrcr import data as mrcr
    from tasks.nolima import data as nolima
    from tasks.short import data as short

    read = {
        "essays": "HARNESS_ESSAYS",
        "squad": qa.ENV["squad"],
        "hotpotqa": qa.ENV["hotpotqa"],
        "longbench": longbench.ENV_VAR,
        "longbench_v2": longbench_v2.ENV_VAR,
        "babilong": babilong.ENV_VAR,
        "helmet": helmet.ENV_VAR,
        "llama2_tokenizer": helmet_reference.LLAMA2_ENV,
        "nolima": nolima.ENV_VAR,
        "graphwalks": graphwalks.ENV_VAR,
        "mrcr": mrcr.ENV_VAR,
        "aa_lcr": aa_lcr.ENV_VAR,
        "icl": icl.ENV_VAR,
        "mmlu": short.MMLU_ENV,
        "hellaswag": short.HELLASWAG_ENV,
        "ppl": ppl.ENV_VAR,
    }
    assert {s.key: s.env for s in DATA_SOURCES} == read
    assert len({s.flag for s in DATA_SOURCES}) == len(DATA_SOURCES)


@pytest.mark.parametrize("command", ["eval", "generate"])
def test_both_commands_take_every_flag(command, tmp_path, monkeypatch):
    from harness.cli import build_parser

    for s in DATA_SOURCES:
        monkeypatch.delenv(s.env, raising=False)
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    flags = {opt for a in sub._actions for opt in a.option_strings}
    assert {s.flag for s in DATA_SOURCES} <= flags
    args = sub.parse_args(["--out", "x", "--lengths", "1k", "--babilong-data", str(tmp_path), "--squad", "~/dev.json"])
    data_sources.apply(args)
    assert os.environ["HARNESS_BABILONG"] == str(tmp_path)
    assert os.environ["HARNESS_SQUAD"] == os.path.expanduser("~/dev.json")
    assert "HARNESS_LONGBENCH_V2" not in os.environ


def test_fix_names_flag_variable_and_files():
    fix = source("longbench_v2").fix()
    assert (
        fix
        == "pass --longbench-v2-data DIR or set HARNESS_LONGBENCH_V2=DIR with data.json of the hub dataset THUDM/LongBench-v2"
    )
