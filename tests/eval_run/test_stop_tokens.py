"""Token stops and a minimum length (GenerationRequest.stop_tokens, min_new_tokens), as LongBench's pred.py
runs samsum: model.generate(..., min_length=context_length + 1, eos_token_id=[tokenizer.eos_token_id,
tokenizer.encode("\\n", add_special_tokens=False)[-1]]). The reference here is that call itself,
transformers' generate on the same model; the hf runner (prefix engine with its decoding rows, and the
plain-generate path) must give the same text, cut before the stop id as before EOS (pred.py's text keeps
a final "\\n", which LongBench's eval.py drops: it scores samsum's first line). The openai runner sends
the fields to the server (vLLM's stop_token_ids and min_tokens) only when a request sets them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from harness.models.runners.base import GenerationRequest, RunnerSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))

PROMPTS = [
    "The sky is blue and the grass is",
    "Summarize the dialogue.\nAnna: hi\nBob: hello\nSummary:",
    "One two three four",
    "Dialogue: a b c\nSummary:",
    "x",
]
MAX_NEW = 12


def _greedy(model, tokenizer, prompt: str) -> list[int]:
    """The model's greedy continuation of prompt, with no stop at all."""
    ids = tokenizer(prompt)["input_ids"]
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=MAX_NEW,
            eos_token_id=None,
            pad_token_id=tokenizer.eos_token_id,
        )
    return out[0, len(ids) :].tolist()


def _as_stop_text(tokenizer, token: int) -> str:
    """A text whose last token (encoded without special tokens) is `token`."""
    text = tokenizer.decode([token])
    assert tokenizer.encode(text, add_special_tokens=False)[-1] == token
    return text


def pred_py(model, tokenizer, prompt: str, stop_texts: tuple[str, ...], min_new: int) -> str:
    """LongBench pred.py's call (min_length, an eos_token_id list of EOS and each stop text's last id),
    its text cut before the first stop id, as the runners cut it."""
    enc = tokenizer(prompt, truncation=False, return_tensors="pt")
    context_length = enc.input_ids.shape[-1]
    stops = [tokenizer.eos_token_id] + [tokenizer.encode(s, add_special_tokens=False)[-1] for s in stop_texts]
    floor = {"min_length": context_length + min_new} if min_new else {}
    with torch.inference_mode():
        output = model.generate(
            input_ids=enc.input_ids,
            attention_mask=enc.attention_mask,
            max_new_tokens=MAX_NEW,
            num_beams=1,
            do_sample=False,
            temperature=1.0,
            eos_token_id=stops,
            pad_token_id=tokenizer.eos_token_id,
            **floor,
        )[0]
    new = output[context_length:].tolist()
    end = next((k for k, t in enumerate(new) if t in stops), len(new))
    return tokenizer.decode(new[:end], skip_special_tokens=True)


def _runner(model_dir, path: str):
    from harness.models.runners.hf import HFRunner

    runner = HFRunner(str(model_dir), RunnerSettings(backend="hf", dtype="float32", prefix_reuse=path != "no_reuse"))
    if path == "plain":  # architectures the prefix engine refuses: transformers generate per request
        runner.engine = None
    assert runner.stop_ids == (runner.tokenizer.eos_token_id,)  # pred.py's EOS list is the runner's
    return runner


def _cases(model, tokenizer) -> list[GenerationRequest]:
    """Requests whose first greedy token is their stop token, whose stop comes later (also after a
    3-token floor, so the decoding rows mask it), pred.py's newline stop, and requests without fields."""
    greedy = [_greedy(model, tokenizer, p) for p in PROMPTS]
    first = _as_stop_text(tokenizer, greedy[0][0])
    # a token new in the continuation after at least two others: generation stops before it
    k = next(k for k in range(2, MAX_NEW) if greedy[1][k] not in greedy[1][:k])
    later = _as_stop_text(tokenizer, greedy[1][k])
    second = _as_stop_text(tokenizer, greedy[2][1])  # the second token, masked under min_new_tokens=3
    return [
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=(first,), min_new_tokens=1),
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=(first,)),  # no floor: ""
        GenerationRequest(PROMPTS[1], MAX_NEW, stop_tokens=(later,), min_new_tokens=1),
        GenerationRequest(PROMPTS[2], MAX_NEW, stop_tokens=(second,), min_new_tokens=3),
        GenerationRequest(PROMPTS[2], MAX_NEW, stop_tokens=(second,), min_new_tokens=1),
        GenerationRequest(PROMPTS[3], MAX_NEW, stop_tokens=("\n",), min_new_tokens=1),
        GenerationRequest(PROMPTS[4], MAX_NEW, stop_tokens=("\n", first), min_new_tokens=1),
        *(GenerationRequest(p, MAX_NEW) for p in PROMPTS),
    ]


@pytest.mark.parametrize("path", ["reuse", "no_reuse", "plain"])
def test_hf_runner_equals_pred_py_generate(tiny_llama_dir, path):
    runner = _runner(tiny_llama_dir, path)
    model, tok = runner.model, runner.tokenizer
    requests = _cases(model, tok)
    texts = runner.generate(requests)  # all at once: masked and unmasked rows decode side by side
    for r, text in zip(requests, texts):
        assert text == pred_py(model, tok, r.prompt, r.stop_tokens, r.min_new_tokens), r
    assert texts[1] == "" and texts[0] != ""  # the case is real: the floor moved the first token
    assert texts[3] != texts[4]  # and the 3-token floor moved where the second token's stop ends it
    assert texts[2] and texts[8].startswith(texts[2]) and texts[2] != texts[8]  # a later stop cut the text
    # Requests without the fields are what they were, alone or beside masked ones (bit-identical tokens).
    alone = runner.generate([GenerationRequest(p, MAX_NEW) for p in PROMPTS])
    assert texts[7:] == alone
    runner.close()


@pytest.mark.parametrize("path", ["reuse", "plain"])
def test_eos_as_the_first_greedy_token(tiny_llama_dir, path):
    """A model whose first greedy token is EOS: the floor masks EOS too (pred.py's min_length), so the
    output is not empty, and equals generate's."""
    runner = _runner(tiny_llama_dir, path)
    model, tok = runner.model, runner.tokenizer
    eos = tok.eos_token_id
    t0 = _greedy(model, tok, PROMPTS[0])[0]
    with torch.no_grad():  # EOS's logit becomes twice the first token's: EOS is chosen first
        head = model.get_output_embeddings().weight
        head[eos] = 2 * head[t0]
    assert _greedy(model, tok, PROMPTS[0])[0] == eos
    requests = [
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=("\n",), min_new_tokens=1),
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=("\n",)),
        GenerationRequest(PROMPTS[0], MAX_NEW, min_new_tokens=1),  # the floor alone masks EOS
        GenerationRequest(PROMPTS[0], MAX_NEW),
    ]
    texts = runner.generate(requests)
    for r, text in zip(requests, texts):
        assert text == pred_py(model, tok, r.prompt, r.stop_tokens, r.min_new_tokens), r
    assert texts[0] != "" and texts[1] == "" and texts[2] != "" and texts[3] == ""
    runner.close()


def test_a_stop_text_of_no_token_is_refused(tiny_llama_dir):
    from harness.core.errors import UserError

    runner = _runner(tiny_llama_dir, "reuse")
    with pytest.raises(UserError, match="encodes to no token"):
        runner.generate([GenerationRequest(PROMPTS[0], 4, stop_tokens=("",))])
    runner.close()


def test_openai_sends_the_fields_only_when_set(tiny_llama_dir):
    from tiny_server import TinyServer

    from harness.models.runners.openai import OpenAIRunner

    hf = _runner(tiny_llama_dir, "reuse")
    first = _greedy(hf.model, hf.tokenizer, PROMPTS[0])[0]
    stop = _as_stop_text(hf.tokenizer, first)
    requests = [
        GenerationRequest(PROMPTS[0], MAX_NEW),
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=(stop,), min_new_tokens=1),
        GenerationRequest(PROMPTS[0], MAX_NEW, stop_tokens=(stop,)),
        GenerationRequest(PROMPTS[0], MAX_NEW, min_new_tokens=2),
    ]
    expected = hf.generate(requests)
    with TinyServer(str(tiny_llama_dir)) as server:
        settings = RunnerSettings(
            backend="openai", max_model_len=2048, endpoint={"base_url": server.url}, tokenizer=str(tiny_llama_dir)
        )
        api = OpenAIRunner("tiny", settings)
        for r, want in zip(requests, expected):
            assert api.generate([r]) == [want]  # the server's own generate honours them as vLLM does
        bodies = [b for b in server.bodies if "max_tokens" in b]
    sent = [{k: b[k] for k in ("stop_token_ids", "min_tokens") if k in b} for b in bodies]
    assert sent == [{}, {"stop_token_ids": [first], "min_tokens": 1}, {"stop_token_ids": [first]}, {"min_tokens": 2}]
    assert expected[1] != "" and expected[2] == ""
    hf.close()


def test_the_eval_loop_fills_requests_from_the_sample(tiny_llama_dir, tmp_path, monkeypatch):
    """harness/pipeline/engine.py builds samsum's requests (reference protocol) with pred.py's stop rule from the
    sample's metadata (tasks/longbench/tasks.py), and every other task's without it."""
    import shutil

    from harness.cli import main
    from harness.models.runners.hf import HFRunner
    from tasks.longbench import data

    folder = tmp_path / "longbench"
    folder.mkdir()
    for name in ("samsum", "trec"):
        shutil.copy(Path(__file__).resolve().parents[1] / "longbench" / "fixtures" / "data" / f"{name}.jsonl", folder)
    seen: list[GenerationRequest] = []
    generate_each = HFRunner.generate_each

    def spy(self, requests):
        seen.extend(requests)
        yield from generate_each(self, requests)

    monkeypatch.setattr(HFRunner, "generate_each", spy)
    data.load_records.cache_clear()
    argv = ["eval", "--ckpts", str(tiny_llama_dir), "--tasks", "samsum,trec", "--samples", "1"]
    argv += ["--max-length", "256", "--longbench", str(folder), "--out", str(tmp_path / "out")]
    try:
        assert main([*argv, "--no-progress", "--cache-dir", "none"]) == 0
    finally:
        data.load_records.cache_clear()
    rules = sorted((r.stop_tokens, r.min_new_tokens) for r in seen)
    assert rules == [((), 0), (("\n",), 1)]  # trec's request, samsum's
