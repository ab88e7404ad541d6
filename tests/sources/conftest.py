"""Fixtures for the model-source tests: a tiny GGUF written from the tiny Llama folder, a chat model."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from .gguf_fixture import write_tiny_gguf

# tests/serve/tiny_server.py: the stdlib OpenAI-compatible server the served-model tests use
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "serve"))


@pytest.fixture(scope="session")
def tiny_gguf(tiny_llama_dir, tmp_path_factory):
    """tiny.gguf: the tiny Llama folder's weights (float32) and tokenizer as a GGUF file."""
    return write_tiny_gguf(tiny_llama_dir, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="session")
def chat_model_dir(tiny_llama_dir, tmp_path_factory):
    """The tiny model with a chat template (writing BOS itself, as real templates do)."""
    from transformers import AutoTokenizer

    d = tmp_path_factory.mktemp("chat") / "tiny-chat"
    shutil.copytree(tiny_llama_dir, d)
    tok = AutoTokenizer.from_pretrained(d)
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
        "{% if not (loop.last and m['role'] == 'assistant') %}\n<|end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )
    tok.save_pretrained(d)
    return d
