"""Tiny local models and tokenizers broken the ways the failure-mode corpus needs (built from the
session's tiny Llama, tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def constant_model(src: Path, dst: Path, token_id: int) -> Path:
    """A copy of the tiny Llama whose greedy next token is always `token_id`: attention and MLP
    outputs zeroed (the residual stream is the input embedding), every embedding one positive vector
    v, and the output row of `token_id` equal to v, every other row 0."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        v = torch.rand(model.config.hidden_size, generator=torch.Generator().manual_seed(0)) + 0.5
        model.model.embed_tokens.weight.copy_(v.expand_as(model.model.embed_tokens.weight))
        model.lm_head.weight.zero_()
        model.lm_head.weight[token_id] = v
    model.save_pretrained(str(dst))
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, dst / f.name)
    return dst


def with_chat_template(model: Path, template: str) -> Path:
    """`model` with `template` as its tokenizer's chat template (tokenizer_config.json)."""
    path = model / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg["chat_template"] = template
    path.write_text(json.dumps(cfg))
    return model


def with_tokenizer(model: Path, tokenizer_dir: Path) -> Path:
    """`model` with another tokenizer's files in place of its own."""
    for f in model.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            f.unlink()
    for f in tokenizer_dir.iterdir():
        shutil.copy(f, model / f.name)
    return model


# A chat template as real ones are written: BOS first, one header per turn.
CHAT = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{% if not (loop.last and m['role'] == 'assistant') %}\n<|end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
