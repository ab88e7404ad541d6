"""Bad inputs to `harness eval`: each is one line on stderr and exit code 2, before any model runs."""

from __future__ import annotations

import json

import pytest
from ckpt_copy import copy_ckpt

from harness.cli import main


@pytest.fixture(scope="module")
def bad_dirs(tmp_path_factory, ckpt_series, byte_tokenizer_dir):
    from harness.models.embedded import build_tiny_llama

    root = tmp_path_factory.mktemp("bad")
    copy_ckpt(ckpt_series / "ckpt-10", root / "notok" / "ckpt-1", drop_tokenizer=True)
    (root / "notmodel" / "ckpt-1").mkdir(parents=True)
    (root / "notmodel" / "ckpt-1" / "readme.txt").write_text("not a model")
    copy_ckpt(ckpt_series / "ckpt-10", root / "mixed" / "ckpt-1")
    build_tiny_llama(root / "mixed" / "ckpt-2", byte_tokenizer_dir, hidden_size=64)
    (root / "foreign").mkdir()
    (root / "foreign" / "samples.jsonl").write_text("id,score\n1,0.5\n")
    return root


CASES = {
    "no checkpoint matches": (["--ckpts", "{run}/ckpt-<100..200>"], "no checkpoint"),
    "malformed lengths": (["--lengths", "4q"], "bad length"),
    "reversed lengths": (["--lengths", "2k-1k"], "reversed length range"),
    "unknown task": (["--tasks", "toy_nope"], "unknown task"),
    "unknown suite": (["--suite", "nope"], "unknown suite"),
    "length beyond context": (["--lengths", "4k"], "beyond the context"),
    "missing tokenizer": (["--ckpts", "{bad}/notok/ckpt-1"], "tokenizer"),
    "not a loadable model": (["--ckpts", "{bad}/notmodel/ckpt-1"], "not a loadable model"),
    "tokenizer mismatch": (["--ckpts", "{bad}/mixed/ckpt-<1..2>"], "different tokenizers"),
    "unreadable store": (["--out", "{bad}/foreign"], "not a harness results store"),
    "bad rope scaling": (["--rope-scaling", "{factor: 2"], "--rope-scaling"),
    "chat template without one": (["--chat-template", ""], "no chat template"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_exit_2(case, ckpt_series, bad_dirs, tmp_path, capsys):
    extra, expect = CASES[case]
    args = {
        "--ckpts": f"{ckpt_series}/ckpt-<10..20>",
        "--suite": "toy",
        "--lengths": "1k",
        "--samples": "2",
        "--out": str(tmp_path / "out"),
    }
    for flag, value in zip(extra[::2], extra[1::2]):
        args[flag] = value.replace("{run}", str(ckpt_series)).replace("{bad}", str(bad_dirs))
    if "--tasks" in args:
        del args["--suite"]
    argv = ["eval", "--no-progress"] + [x for kv in args.items() for x in kv if x != ""]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert expect in err, err
    assert not (tmp_path / "out" / "results.json").exists()


def test_no_ckpts_flag(capsys):
    assert main(["eval", "--suite", "toy"]) == 2
    assert "--ckpts" in capsys.readouterr().err


def test_beyond_context_names_length_context_and_fix(ckpt_series, tmp_path, capsys):
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-10",
                "--suite",
                "toy",
                "--lengths",
                "1k,4k",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "4K" in err and "2048" in err and "--max-model-len" in err and "--rope-scaling" in err
    # --max-model-len lifts the limit (the sample check then passes); nothing is silently cut.
    assert (
        main(
            [
                "eval",
                "--ckpts",
                f"{ckpt_series}/ckpt-10",
                "--suite",
                "toy",
                "--lengths",
                "4k",
                "--samples",
                "1",
                "--max-model-len",
                "4096",
                "--rope-scaling",
                json.dumps({"rope_type": "linear", "factor": 2.0}),
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["provenance"]["max_model_len"] == 4096
    assert res["provenance"]["rope_scaling"] == {"rope_type": "linear", "factor": 2.0}
