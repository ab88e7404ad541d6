"""`harness generate`'s tokenizer without transformers: the same ids, texts, fingerprint and sample
bytes as transformers' AutoTokenizer, for every RULER task, and no torch on the generation path.

The reference is transformers itself (load_tokenizer), loaded from the same directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.models.tokenization import (
    LightTokenizer,
    adds_bos,
    load_generation_tokenizer,
    load_tokenizer,
    num_special_tokens,
    tokenizer_fingerprint,
)
from tasks.generate import generate_samples
from tasks.registry import get_task
from tasks.ruler import RULER_TASKS

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "",
    "a",
    "Hello world.",
    "spaces before punctuation , . ? ! it 's we 're do n't",  # what clean_up_tokenization_spaces would eat
    "  two  spaces\tand\ttabs\n\n\nnew lines ",
    "One of the special magic numbers for key-7 is: 1234567.",
    "<s> in the text</s> and <pad>, ünïcödé, 数字 42, emoji \U0001f600",
    "x" * 3000,
]


def _copy(src: Path, dst: Path, config: dict | None = None, model_config: dict | None = None, **extra) -> Path:
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "tokenizer_config.json").read_text())
    cfg.update(config or {})
    (dst / "tokenizer_config.json").write_text(json.dumps(cfg))
    if model_config is not None:
        (dst / "config.json").write_text(json.dumps(model_config))
    for name, text in extra.items():
        (dst / name).write_text(text)
    return dst


@pytest.fixture(scope="module")
def plain_dirs(bpe_tokenizer_dir, byte_tokenizer_dir, tiny_llama_dir, tmp_path_factory) -> list[Path]:
    """Directories the light path takes: the embedded layout (with and without BOS), checkpoints
    (a saved Llama; a bare config.json of one), and a Llama-3-like config: PreTrainedTokenizerFast
    with added_tokens_decoder, a chat template and BPE space clean-up."""
    root = tmp_path_factory.mktemp("plain")
    tok = json.loads((bpe_tokenizer_dir / "tokenizer.json").read_text())
    decoder = {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
        for t in tok["added_tokens"]
    }
    llama = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 4096}
    return [
        bpe_tokenizer_dir,
        byte_tokenizer_dir,
        tiny_llama_dir,
        _copy(bpe_tokenizer_dir, root / "ckpt", model_config=llama),
        _copy(
            bpe_tokenizer_dir,
            root / "full",
            {
                "added_tokens_decoder": decoder,
                "chat_template": "{{ messages[0]['content'] }}",
                "clean_up_tokenization_spaces": True,
                "model_input_names": ["input_ids", "attention_mask"],
                "extra_special_tokens": {},
                "tokenizer_class": "PreTrainedTokenizerFast",  # as Llama-3's, beside a Llama config.json
            },
            model_config=llama,
            **{"special_tokens_map.json": json.dumps({"bos_token": "<s>"})},
        ),
    ]


def test_light_tokenizer_equals_transformers(plain_dirs, byte_tokenizer_dir):
    byte_dir = byte_tokenizer_dir
    for path in plain_dirs:
        light, ref = load_generation_tokenizer(str(path)), load_tokenizer(str(path))
        assert isinstance(light, LightTokenizer), path
        assert tokenizer_fingerprint(light) == tokenizer_fingerprint(ref)
        assert light.backend_tokenizer.to_str() == ref.backend_tokenizer.to_str()
        assert light.special_tokens_map == ref.special_tokens_map
        for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
            assert getattr(light, attr) == getattr(ref, attr), attr
        assert adds_bos(light) == adds_bos(ref) == (path != byte_dir)
        assert num_special_tokens(light) == num_special_tokens(ref) == int(path != byte_dir)
        for special in (True, False):
            assert (
                light(TEXTS, add_special_tokens=special)["input_ids"]
                == ref(TEXTS, add_special_tokens=special)["input_ids"]
            )
            for text in TEXTS:
                ids = ref(text, add_special_tokens=special)["input_ids"]
                assert light(text, add_special_tokens=special)["input_ids"] == ids
                assert light.encode(text, add_special_tokens=special) == ref.encode(text, add_special_tokens=special)
                for skip in (True, False):
                    assert light.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)
                    assert light.decode(ids[1:3], skip_special_tokens=skip) == ref.decode(
                        ids[1:3], skip_special_tokens=skip
                    )


def test_directories_transformers_would_change_go_to_transformers(bpe_tokenizer_dir, tmp_path):
    from transformers import PreTrainedTokenizerBase

    no_post = json.loads((bpe_tokenizer_dir / "tokenizer.json").read_text())
    no_post["post_processor"] = None
    cases = {
        # no post-processor: transformers writes one (update_post_processor)
        "no post-processor": _copy(bpe_tokenizer_dir, tmp_path / "p", **{"tokenizer.json": json.dumps(no_post)}),
        "add_bos_token": _copy(bpe_tokenizer_dir, tmp_path / "a", {"add_bos_token": False}),
        "model class": _copy(bpe_tokenizer_dir, tmp_path / "b", {"tokenizer_class": "LlamaTokenizer"}),
        "re-routed model type": _copy(bpe_tokenizer_dir, tmp_path / "c", model_config={"model_type": "qwen2"}),
        "special token not in tokenizer.json": _copy(bpe_tokenizer_dir, tmp_path / "d", {"unk_token": "<unk>"}),
        "legacy special_tokens_map.json": _copy(
            bpe_tokenizer_dir, tmp_path / "e", **{"special_tokens_map.json": json.dumps({"bos_token": "</s>"})}
        ),
    }
    for why, path in cases.items():
        tok = load_generation_tokenizer(str(path))
        assert isinstance(tok, PreTrainedTokenizerBase), why
    # where transformers does change the tokenizer (here: adds the missing <unk>), a light
    # tokenizer over the same file would differ: the refusal is needed
    from tokenizers import Tokenizer

    path = cases["special token not in tokenizer.json"]
    raw = Tokenizer.from_file(str(path / "tokenizer.json"))
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    assert tokenizer_fingerprint(LightTokenizer(raw, special)) != tokenizer_fingerprint(load_tokenizer(str(path)))


def test_every_ruler_task_byte_identical_and_torch_free(bpe_tokenizer_dir, squad_file, hotpot_file, tmp_path):
    """`harness generate` (light tokenizer, fresh process) writes the bytes transformers' tokenizer gives."""
    out = tmp_path / "out"
    argv = ["generate", "--suite", "ruler", "--lengths", "2k", "--samples", "2", "--out", str(out)]
    argv += ["--tokenizer", str(bpe_tokenizer_dir), "--cache-dir", "none"]
    argv += ["--squad", str(squad_file), "--hotpotqa", str(hotpot_file)]
    code = (
        "import json, sys\n"
        "from harness.cli import main\n"
        f"rc = main({argv!r})\n"
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "print('RESULT', json.dumps({'rc': rc, 'heavy': heavy}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout.split("RESULT ")[-1])
    assert result == {"rc": 0, "heavy": []}

    ref = load_tokenizer(str(bpe_tokenizer_dir))
    for name in RULER_TASKS:
        task = get_task(name)
        if name == "qa_1":
            task.path = str(squad_file)
        if name == "qa_2":
            task.path = str(hotpot_file)
        want = "".join(s.to_json() + "\n" for s in generate_samples(task, 2048, range(2), ref, cache_dir=False))
        assert (out / name / "2048.jsonl").read_bytes() == want.encode(), name


def test_ppl_samples_identical(bpe_tokenizer_dir):
    """ppl reads decode, the fingerprint and the special-token count (not only the backend)."""
    light, ref = load_generation_tokenizer(str(bpe_tokenizer_dir)), load_tokenizer(str(bpe_tokenizer_dir))
    assert isinstance(light, LightTokenizer)
    task = get_task("ppl")
    want = [s.to_json() for s in generate_samples(task, 2048, range(3), ref, cache_dir=False)]
    assert [s.to_json() for s in generate_samples(task, 2048, range(3), light, cache_dir=False)] == want


def test_older_transformers_goes_to_transformers(bpe_tokenizer_dir, monkeypatch):
    """The rules are transformers 5's: with 4.x installed (it cleans up decoded BPE text, for
    one) every directory goes through AutoTokenizer."""
    import harness.models.tokenization as tz

    monkeypatch.setattr(tz, "_transformers_is_5", lambda: False)
    assert not isinstance(load_generation_tokenizer(str(bpe_tokenizer_dir)), LightTokenizer)
