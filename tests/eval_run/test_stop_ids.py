"""Generation ends at every EOS id of the model (tokenizer, config, generation config), as transformers'
generate and vLLM end it; more than one id is part of an hf record's identity (`eos_ids`)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from harness.core.errors import UserError
from harness.models.runners.base import GenerationRequest, RunnerSettings
from harness.models.runners.common import model_stop_ids, stop_token_ids

PROMPT = "The sky is blue and the grass is"


def test_stop_token_ids_reads_ints_and_lists():
    assert stop_token_ids(2) == (2,)
    assert stop_token_ids(None, [128001, 128009], 128009) == (128001, 128009)
    assert stop_token_ids(None, None) == ()
    assert stop_token_ids(5, True, "7", [3.0, 4]) == (4, 5)  # a bool, a string or a float is no id


def test_model_stop_ids_of_a_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 2}))
    assert model_stop_ids(str(tmp_path), 2) is None  # one id: records keep their identity
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7]}))
    assert model_stop_ids(str(tmp_path), 9) == [2, 7, 9]
    (tmp_path / "generation_config.json").write_text("{not json")
    with pytest.raises(UserError, match="generation_config.json cannot be read .*stop tokens"):
        model_stop_ids(str(tmp_path), 9)  # never silently without its stop ids
    (tmp_path / "generation_config.json").unlink()
    assert model_stop_ids(str(tmp_path), 9) == [2, 9]
    assert model_stop_ids(str(tmp_path / "model.gguf"), 9) is None
    assert model_stop_ids("no-such-org/no-such-model@main", 9) is None  # not in the hub cache: not fetched


@pytest.fixture(scope="module")
def stop_model(tiny_llama_dir, tmp_path_factory):
    """The tiny Llama with a second EOS id in config.json and generation_config.json: a token its
    greedy continuation of PROMPT reaches after others. Gives (folder, continuation up to it, it)."""
    from harness.models.runners.hf import HFRunner

    plain = HFRunner(str(tiny_llama_dir), RunnerSettings(backend="hf", dtype="float32"))
    ids = plain.tokenizer(PROMPT)["input_ids"]
    with torch.inference_mode():
        out = plain.model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=8,
            eos_token_id=None,
            pad_token_id=plain.pad_id,
        )
    toks = out[0, len(ids) :].tolist()
    # the first token that is new in the continuation after at least one other: generation stops before it
    k = next(k for k in range(1, len(toks)) if toks[k] not in toks[:k] and toks[k] != plain.tokenizer.eos_token_id)
    stop = toks[k]
    folder = tmp_path_factory.mktemp("stop") / "model"
    shutil.copytree(tiny_llama_dir, folder)
    for name in ("config.json", "generation_config.json"):
        path = folder / name
        data = json.loads(path.read_text()) if path.exists() else {}
        data["eos_token_id"] = [plain.tokenizer.eos_token_id, stop]
        path.write_text(json.dumps(data))
    plain.close()
    return folder, toks[: k + 1], stop


@pytest.mark.parametrize("reuse", [True, False])
def test_generation_stops_at_a_generation_config_eos(stop_model, reuse):
    from harness.models.runners.hf import HFRunner

    folder, toks, stop = stop_model
    runner = HFRunner(str(folder), RunnerSettings(backend="hf", dtype="float32", prefix_reuse=reuse))
    assert stop in runner.stop_ids and runner.tokenizer.eos_token_id in runner.stop_ids
    texts = runner.generate([GenerationRequest(PROMPT, max_new_tokens=8), GenerationRequest(PROMPT + " green", 8)])
    assert texts[0] == runner.tokenizer.decode(toks[:-1], skip_special_tokens=True)
    ids = runner.tokenizer(PROMPT)["input_ids"]
    with torch.inference_mode():  # transformers' generate stops there too (its generation config's ids)
        out = runner.model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=8,
            pad_token_id=runner.pad_id,
        )
    assert out[0, len(ids) :].tolist() == toks
    runner.close()


def test_the_plain_path_stops_there_too_and_takes_an_empty_prompt(stop_model):
    """Architectures the engine refuses run transformers' generate: the same stop ids; an empty prompt
    (a tokenizer that adds no BOS) gives "" as on the engine, not a reshape error."""
    from harness.models.runners.hf import HFRunner

    folder, toks, _ = stop_model
    runner = HFRunner(str(folder), RunnerSettings(backend="hf", dtype="float32"))
    runner.engine = None
    out = list(
        runner._generate_plain(
            [GenerationRequest(PROMPT, 8), GenerationRequest("", 8)], [runner.tokenizer(PROMPT)["input_ids"], []]
        )
    )
    assert [(i, text) for i, text, _ in out] == [
        (0, runner.tokenizer.decode(toks[:-1], skip_special_tokens=True)),
        (1, ""),
    ]
    runner.close()


def test_records_carry_eos_ids_where_there_are_several(stop_model, tiny_llama_dir, tmp_path):
    from harness.cli import main

    folder = stop_model[0]
    for model, out in ((folder, tmp_path / "several"), (tiny_llama_dir, tmp_path / "one")):
        argv = ["eval", "--ckpts", str(model), "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1"]
        assert main(argv + ["--out", str(out), "--no-progress", "--dtype", "float32"]) == 0
    several = [json.loads(line) for line in (tmp_path / "several" / "samples.jsonl").read_text().splitlines()[1:]]
    one = [json.loads(line) for line in (tmp_path / "one" / "samples.jsonl").read_text().splitlines()[1:]]
    assert several[0]["settings"]["eos_ids"] == sorted(json.loads((folder / "config.json").read_text())["eos_token_id"])
    assert "eos_ids" not in one[0]["settings"]  # one id: the identity records had before
