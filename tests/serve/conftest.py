"""Shared by the served-model tests: a loglikelihood task and the tiny model with a chat template."""

from __future__ import annotations

import pytest

from harness.models.runners.base import LoglikelihoodRequest
from tasks.base import Task
from tasks.registry import register_task


@register_task
class ServeChoice(Task):
    """A loglikelihood task for these tests: which of two colours the model prefers."""

    name = "serve_choice"
    version = "1"
    family = "serve"
    kind = "loglikelihood"
    metric = "acc"
    length_controlled = False

    def num_samples_available(self, length):
        return 2

    def evaluate_with_runner(self, runner, length, indices, seed, tokenizer, progress=True):
        out = []
        for i in indices:
            reqs = [LoglikelihoodRequest("The grass is green. " * (i + 1) + "The sky is", c) for c in (" blue", " red")]
            lls = [ll for ll, _ in runner.loglikelihood(reqs)]
            out.append({"index": i, "prediction": str(lls.index(max(lls))), "score": float(lls[0] > lls[1]),
                        "metadata": {"logprobs": lls}})  # fmt: skip
        return out


@pytest.fixture(scope="session")
def chat_model_dir(tiny_llama_dir, tmp_path_factory):
    """The tiny model with a chat template (writing BOS itself, as real templates do)."""
    import shutil

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
