"""config.json values transformers cannot use, and a chat template with a Jinja syntax error
(issue 49): one line naming the field (or the template), exit 2, before any work, in every command
that loads the model (doctor names it in a FAIL line). Before, each was a KeyError or AttributeError
from inside from_pretrained (ACT2FN["bogus"], ROPE_INIT_FUNCTIONS["bogus"], torch.float128), or a
jinja2 TemplateSyntaxError from apply_chat_template."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main
from harness.core.errors import UserError


def _damaged(src, dst, edit):
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _rope(cfg):
    cfg.pop("rope_scaling", None)
    cfg["rope_parameters"] = {"rope_theta": 10000.0, "rope_type": "bogus"}


DAMAGE = {
    "hidden_act": (lambda c: c.update(hidden_act="bogus"), "hidden_act 'bogus'"),
    "rope_type": (_rope, "rope_parameters.rope_type 'bogus'"),
    "rope_scaling_type": (lambda c: c.update(rope_scaling={"type": "bogus", "factor": 2.0}), "rope_scaling.type"),
    "dtype": (lambda c: c.update(dtype="float128"), "dtype 'float128'"),
    "torch_dtype": (lambda c: (c.pop("dtype", None), c.update(torch_dtype="auto")), "torch_dtype 'auto'"),
}


def _argv(command, model, tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "a.jsonl").write_text(json.dumps({"text": "hello world " * 200}) + "\n")
    return {
        "eval": ["eval", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k", "--samples", "1",
                 "--out", str(tmp_path / "out"), "--no-progress"],
        "train": ["train", "--model", str(model), "--mode", "anchor", "--window", "256", "--steps", "1",
                  "--data", str(data), "--out", str(tmp_path / "out")],
        "diagnose": ["diagnose", "rope", "--ckpt", str(model), "--out", str(tmp_path / "out")],
    }[command]  # fmt: skip


@pytest.mark.parametrize("command", ["eval", "train", "diagnose"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_value_transformers_lacks_is_one_line(command, damage, tiny_llama_dir, tmp_path, capsys):
    edit, phrase = DAMAGE[damage]
    model = _damaged(tiny_llama_dir, tmp_path / "model", edit)
    assert main(_argv(command, model, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    assert phrase in err and "config.json" in err and "transformers" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("damage", ["hidden_act", "rope_type", "dtype"])
def test_doctor_names_it_in_a_fail_line(damage, tiny_llama_dir, tmp_path, capsys):
    edit, phrase = DAMAGE[damage]
    model = _damaged(tiny_llama_dir, tmp_path / "model", edit)
    assert main(["doctor", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k"]) == 1
    out = capsys.readouterr().out
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fail and phrase in fail[0] and "Traceback" not in out


def test_the_names_transformers_uses_pass(tiny_llama_dir, tmp_path):
    """The check is no stricter than transformers: names it knows (old and per-model ones too) pass."""
    from harness.models.sources.config_names import check_names

    for cfg in (
        {"hidden_act": "gelu_pytorch_tanh", "dtype": "bfloat16", "rope_parameters": {"rope_type": "llama3"}},
        {"hidden_activation": "gelu_pytorch_tanh", "torch_dtype": "float16"},
        {"dtype": "float32", "torch_dtype": "auto"},  # transformers keeps dtype and never reads torch_dtype
        {"rope_scaling": {"type": "su"}, "rope_parameters": {"rope_type": "mrope"}},
        {"rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "linear"}}},
    ):
        check_names(cfg, "config.json")
    # a Llama does not read a text_config; a composite model's text model does
    check_names({"model_type": "llama", "text_config": {"hidden_act": "bogus"}}, "config.json")
    with pytest.raises(UserError, match="text_config.hidden_activation 'bogus'"):
        check_names({"model_type": "gemma3", "text_config": {"hidden_activation": "bogus"}}, "config.json")
    check_names({"model_type": "gemma3", "text_config": {"hidden_act": "bogus"}}, "config.json")  # not read
    with pytest.raises(UserError, match="text_config.hidden_act 'bogus'"):  # LLaVA: the text model's own class
        check_names({"model_type": "llava", "text_config": {"model_type": "llama", "hidden_act": "bogus"}}, "c")
    with pytest.raises(UserError, match="text_config.rope_parameters.rope_type 'bogus'"):
        check_names({"model_type": "gemma3", "text_config": {"rope_parameters": {"rope_type": "bogus"}}}, "c")


def _broken_template(tiny_llama_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_llama_dir, model)
    tc = json.loads((model / "tokenizer_config.json").read_text())
    tc["chat_template"] = "{% for m in messages %}{{ m.content }"
    (model / "tokenizer_config.json").write_text(json.dumps(tc))
    return model


def test_eval_with_a_template_syntax_error_is_one_line(tiny_llama_dir, tmp_path, capsys):
    model = _broken_template(tiny_llama_dir, tmp_path)
    out = tmp_path / "out"
    argv = ["eval", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k", "--samples", "1",
            "--out", str(out), "--no-progress", "--chat-template"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    assert "chat template" in err and "unexpected '}'" in err and "--chat-template" in err
    assert not (out / "samples.jsonl").exists()


def test_doctor_with_a_template_syntax_error_fails_its_chat_check(tiny_llama_dir, tmp_path, capsys):
    model = _broken_template(tiny_llama_dir, tmp_path)
    assert main(["doctor", "--ckpts", str(model), "--tasks", "vt", "--lengths", "1k", "--chat-template"]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("FAIL") and "chat template" in line for line in out.splitlines())


def test_the_common_names_are_in_the_tables_of_transformers():
    """The names passed without reading transformers' tables are in them (a light re-run stays exact)."""
    from harness.models.sources.config_names import COMMON, activations, dtype_names, rope_types

    assert COMMON["activation"] <= activations() and COMMON["rope"] <= rope_types()
    assert COMMON["dtype"] <= dtype_names()
    with pytest.raises(UserError, match="hidden_act 'float32'"):  # a common name, of the wrong kind
        from harness.models.sources.config_names import check_names

        check_names({"model_type": "llama", "hidden_act": "float32"}, "config.json")
