"""In-loop probes (training/probes.py): each against an independent reference, and training left as it was.

- needle log-likelihood: a brute-force teacher-forced sum over the plain model's full logits
  (transformers' own eager attention, no logits_to_keep);
- loss by position: per-token cross-entropy of the plain model, bucketed by a Python loop; the
  bucket means weighted by their token counts give the overall mean;
- D: `harness diagnose rope`'s measure() on the step's checkpoint loaded as the diagnostic loads it;
- the loss curve with probes on equals the one with probes off, bit for bit, and no RNG stream moves;
- the values are read back from log.jsonl and from TensorBoard's event files.
"""

from __future__ import annotations

import hashlib
import importlib
import json

import numpy as np
import pytest
import torch

from harness.core.errors import UserError

from .helpers import docs_pipeline, small_job

WINDOW = 256
NEEDLE_LENGTHS = [160, 256]


def _job(model_dir, out, *, every=2, steps=4, dtype="fp32", window=WINDOW, **probe_kw):
    from training.config import ProbeConfig

    job = small_job(model_dir, out, steps=steps, window=window, dtype=dtype, save_every=2, keep_last=None)
    job.probes = ProbeConfig(every=every, lengths=probe_kw.pop("lengths", NEEDLE_LENGTHS), **probe_kw)
    return job


def _train(job, docs, tokenizer, **kw):
    from training.loop import train

    return train(job, pipeline=docs_pipeline(job, docs, tokenizer.bos_token_id), progress=False, **kw)


@pytest.fixture(scope="module")
def probed(tmp_path_factory, tiny_llama_dir, corpus_docs, bpe_tokenizer):
    """One bf16 run with probes every 2 steps (TensorBoard on) and the same run with probes off."""
    root = tmp_path_factory.mktemp("probed")
    on = _job(tiny_llama_dir, root / "on", dtype="bf16")
    off = _job(tiny_llama_dir, root / "off", dtype="bf16", every=0)
    return {
        "on": _train(on, corpus_docs, bpe_tokenizer, log_to=["tensorboard"]),
        "off": _train(off, corpus_docs, bpe_tokenizer),
        "dir": root / "on",
        "off_dir": root / "off",
    }


def _probes(tmp_path, model_dir, tokenizer, **kw):
    from training.distributed import SingleProcess
    from training.probes import open_probes

    probes = open_probes(_job(model_dir, tmp_path, **kw), tokenizer, SingleProcess(torch.device("cpu")))
    assert probes is not None
    return probes


def _plain_model(model_dir, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager").eval()


# ---------------------------------------------------------------- training is left as it was


def test_the_loss_curve_with_probes_equals_the_one_without(probed):
    from training.logging import read_log

    on, off = read_log(probed["dir"] / "log.jsonl"), read_log(probed["off_dir"] / "log.jsonl")
    assert probed["on"]["losses"] == probed["off"]["losses"] and len(on) == 4
    for a, b in zip(on, off):  # every training field of every step, bit for bit
        assert {k: v for k, v in a.items() if k in b and not k.endswith("_s")} == {
            k: v for k, v in b.items() if not k.endswith("_s")
        }
    assert not any(k.startswith("probe") for row in off for k in row)
    # and the weights the runs end with
    from safetensors.torch import load_file

    w_on, w_off = (
        load_file(probed["dir"] / "ckpt-4" / "model.safetensors"),
        load_file(probed["off_dir"] / "ckpt-4" / "model.safetensors"),
    )
    assert w_on.keys() == w_off.keys() and all(torch.equal(w_on[k], w_off[k]) for k in w_on)


def test_probe_fields_are_logged_at_the_probe_steps(probed):
    from training.logging import read_log

    rows = read_log(probed["dir"] / "log.jsonl")
    probed_steps = [r["step"] for r in rows if "probe_pos/loss" in r]
    assert probed_steps == [2, 4]
    row = rows[-1]
    needles = sorted(k for k in row if k.startswith("probe_needle/logp_") and k != "probe_needle/logp_mean")
    assert needles == [f"probe_needle/logp_{n}_d{d}" for n in NEEDLE_LENGTHS for d in (10, 50, 90)]
    assert all(row[k] < 0 for k in needles) and 0 <= row["probe_needle/hit_share"] <= 1
    assert row["probe_needle/logp_mean"] == pytest.approx(sum(row[k] for k in needles) / len(needles))
    buckets = [k for k in row if k.startswith("probe_pos/loss_")]
    assert buckets[0] == "probe_pos/loss_000-031" and buckets[-1] == "probe_pos/loss_224-255" and len(buckets) == 8
    assert row["probe_rope/D_bf16"] > 0 and 0 < row["probe_rope/first_token_share"] < 1
    assert row["probe/seconds"] > 0


def test_probes_draw_no_random_number_and_restore_the_model(tmp_path, tiny_llama_dir, bpe_tokenizer):
    from training.rng_streams import rng_state

    probes = _probes(tmp_path, tiny_llama_dir, bpe_tokenizer, dtype="bf16")
    model = _plain_model(tiny_llama_dir)
    model.set_attn_implementation("sdpa")
    model.train()
    torch.manual_seed(123)
    before = rng_state()
    probes.run(model)  # the first run also builds the bf16 copy for D
    probes.run(model)
    after = rng_state()
    assert torch.equal(before["torch"], after["torch"]) and before["python"] == after["python"]
    assert (
        torch.equal(before["numpy"]["keys"], after["numpy"]["keys"]) and before["numpy"]["pos"] == after["numpy"]["pos"]
    )
    assert model.training and model.config._attn_implementation == "sdpa"
    assert all(p.grad is None for p in model.parameters())


# ---------------------------------------------------------------- each probe against a reference


def test_needle_logprob_equals_a_brute_force_teacher_forced_sum(tmp_path, tiny_llama_dir, bpe_tokenizer):
    probes = _probes(tmp_path, tiny_llama_dir, bpe_tokenizer)
    model = _plain_model(tiny_llama_dir)
    got = probes.run(model)
    ref = _plain_model(tiny_llama_dir)
    hits = []
    for probe in probes.probe_set.needles:
        ids = torch.tensor([probe.input_ids])
        with torch.no_grad():
            logp = torch.log_softmax(ref(input_ids=ids).logits[0].double(), -1)
        a, n = probe.answer_start, len(probe.input_ids)
        want = sum(float(logp[t - 1, probe.input_ids[t]]) for t in range(a, n))
        name = f"probe_needle/logp_{probe.length}_d{probe.depth:g}"
        assert got[name] == pytest.approx(want, abs=1e-4), name
        hits.append(all(int(logp[t - 1].argmax()) == probe.input_ids[t] for t in range(a, n)))
    assert got["probe_needle/hit_share"] == sum(hits) / len(hits)


def test_needle_prompts_hold_the_needle_at_its_depth(tmp_path, tiny_llama_dir, bpe_tokenizer):
    from tasks.ruler.templates import NEEDLE, NOISE

    probes = _probes(tmp_path, tiny_llama_dir, bpe_tokenizer, depths=[0.0, 50.0, 100.0])
    for probe in probes.probe_set.needles:
        assert len(probe.input_ids) <= probe.length and probe.input_ids[0] == bpe_tokenizer.bos_token_id
        text = bpe_tokenizer.decode(probe.input_ids[1:])
        answer = bpe_tokenizer.decode(probe.input_ids[probe.answer_start :])
        assert answer.strip() == probe.value and len(probe.value) == 7 and probe.value.isdigit()
        assert text.endswith(f"special magic number for {probe.key} mentioned in the provided text is {probe.value}")
        lines = text.split("\n")
        needle = NEEDLE.format(type_needle_v="numbers", key=probe.key, value=probe.value)
        haystack = [line for line in lines if line in (NOISE, needle)]
        position = haystack.index(needle)
        assert position == round((len(haystack) - 1) * probe.depth / 100)
        # as many lines as fit: one more would pass the length
        two, three = ("\n".join([NOISE] * k) for k in (2, 3))
        line = len(bpe_tokenizer(three)["input_ids"]) - len(bpe_tokenizer(two)["input_ids"])
        assert len(probe.input_ids) + line > probe.length


def test_position_buckets_average_to_the_overall_loss(tmp_path, tiny_llama_dir, bpe_tokenizer):
    probes = _probes(tmp_path, tiny_llama_dir, bpe_tokenizer, buckets=5)
    got = probes.run(_plain_model(tiny_llama_dir))
    ref = _plain_model(tiny_llama_dir)
    per_bucket: dict[int, list[float]] = {}
    everything: list[float] = []
    for doc in probes.probe_set.documents:
        ids = torch.tensor([doc])
        with torch.no_grad():
            nll = torch.nn.functional.cross_entropy(
                ref(input_ids=ids).logits[0, :-1].double(), ids[0, 1:], reduction="none"
            )
        for i in range(1, WINDOW):  # token i is predicted at position i - 1
            per_bucket.setdefault(i * 5 // WINDOW, []).append(float(nll[i - 1]))
        everything += nll.tolist()
    assert got["probe_pos/loss"] == pytest.approx(sum(everything) / len(everything), rel=1e-5)
    names = [k for k in got if k.startswith("probe_pos/loss_")]
    assert len(names) == 5 == len(per_bucket)
    counts = [len(per_bucket[b]) for b in range(5)]
    assert sum(counts) == 2 * (WINDOW - 1)  # token 0 is never predicted
    for b, name in enumerate(names):  # a bucket's name spans the tokens it holds
        first, last = (int(x) for x in name.rsplit("_", 1)[1].split("-"))
        assert [i for i in range(1, WINDOW) if i * 5 // WINDOW == b] == list(range(max(first, 1), last + 1))
    for b, name in enumerate(names):
        assert got[name] == pytest.approx(sum(per_bucket[b]) / counts[b], rel=1e-5), name
    weighted = sum(got[n] * c for n, c in zip(names, counts)) / sum(counts)
    assert weighted == pytest.approx(got["probe_pos/loss"], rel=1e-12)


def test_rope_deviation_equals_the_diagnostic_on_the_checkpoint(probed, bpe_tokenizer):
    from harness.commands.diagnose import _load_model
    from harness.diagnose.rope import Settings, measure
    from training.logging import read_log
    from training.probe_set import FILE_NAME, ProbeSetFile

    row = read_log(probed["dir"] / "log.jsonl")[-1]
    assert row["step"] == 4
    window = ProbeSetFile.model_validate_json((probed["dir"] / FILE_NAME).read_text()).rope_window
    assert len(window) == WINDOW  # the default: the window up to 1024
    model = _load_model(str(probed["dir"] / "ckpt-4"), "bf16", torch.device("cpu"))
    settings = Settings(shifts=(0,), delta2=16, seq_len=len(window), logit_lengths=(), kernel="eager", sources=False)
    result = measure(model, [window], settings, "bf16", progress=False)
    assert row["probe_rope/D_bf16"] == result["D"]["mean"][0]  # the same number, bit for bit
    per_token = result["per_token"]["mean"]
    assert row["probe_rope/first_token_share"] == pytest.approx(per_token[0] / sum(per_token), rel=1e-12)


# ---------------------------------------------------------------- the logs and the probe set


def test_probe_values_read_back_from_tensorboard(probed):
    from training.logging import read_log

    reader = importlib.import_module("tensorboard.backend.event_processing.event_accumulator")
    acc = reader.EventAccumulator(str(probed["dir"] / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    rows = [r for r in read_log(probed["dir"] / "log.jsonl") if "probe_pos/loss" in r]
    tags = [k for k in rows[0] if k.startswith("probe")]
    assert {"probe_needle/logp_mean", "probe_pos/loss", "probe_rope/D_bf16", "probe/seconds"} <= set(tags)
    assert set(tags) <= set(acc.Tags()["scalars"])
    for tag in tags:
        assert [(e.step, e.value) for e in acc.Scalars(tag)] == [(r["step"], float(np.float32(r[tag]))) for r in rows]


def test_the_probe_set_is_stored_once_with_its_hash(probed, tmp_path, tiny_llama_dir, corpus_docs, bpe_tokenizer):
    from training.probe_set import FILE_NAME

    path = probed["dir"] / FILE_NAME
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for step in (2, 4):
        meta = json.loads((probed["dir"] / f"ckpt-{step}" / "harness_training.json").read_text())
        assert meta["probes"] == {"every": 2, "file": FILE_NAME, "sha256": digest}
    # made again elsewhere from the same settings: the same bytes (deterministic, seeded)
    again = _probes(tmp_path / "again", tiny_llama_dir, bpe_tokenizer)
    assert again.probe_set.path.read_bytes() == path.read_bytes()
    # a resumed run (a copy of the run) reads it back; other settings are refused before any step
    import shutil

    run = shutil.copytree(probed["dir"], tmp_path / "resumed")
    job = _job(tiny_llama_dir, run, steps=6, dtype="bf16")
    assert _train(job, corpus_docs, bpe_tokenizer)["resumed_from"] == 4
    assert hashlib.sha256((run / FILE_NAME).read_bytes()).hexdigest() == digest
    job = _job(tiny_llama_dir, run, steps=8, dtype="bf16", depths=[25.0])
    with pytest.raises(UserError, match=r"other probe settings: depths \[10.0, 50.0, 90.0\] \(now \[25.0\]\)"):
        _train(job, corpus_docs, bpe_tokenizer)


def test_a_damaged_probe_set_is_one_error(tmp_path, tiny_llama_dir, bpe_tokenizer):
    from training.probe_set import FILE_NAME

    probes = _probes(tmp_path, tiny_llama_dir, bpe_tokenizer)
    data = json.loads(probes.probe_set.path.read_text())
    data["needles"][0]["answer_start"] = len(data["needles"][0]["input_ids"])
    (tmp_path / FILE_NAME).write_text(json.dumps(data))
    with pytest.raises(UserError, match="answer_start .* must lie inside the prompt.*delete it"):
        _probes(tmp_path, tiny_llama_dir, bpe_tokenizer)
    (tmp_path / FILE_NAME).write_text("{")
    with pytest.raises(UserError, match="is not JSON"):
        _probes(tmp_path, tiny_llama_dir, bpe_tokenizer)


def test_held_out_documents_from_files(tmp_path, tiny_llama_dir, bpe_tokenizer, corpus_path):
    texts = [json.loads(line)["text"] for line in corpus_path.read_text().splitlines()]
    ids = [bpe_tokenizer(t, add_special_tokens=False)["input_ids"] + [bpe_tokenizer.eos_token_id] for t in texts]
    long = [d for d in ids if len(d) >= WINDOW - 1]  # after BOS, a document fills the window
    probes = _probes(tmp_path / "a", tiny_llama_dir, bpe_tokenizer, docs=[str(corpus_path)], num_docs=2)
    assert probes.probe_set.documents == [[bpe_tokenizer.bos_token_id] + d[: WINDOW - 1] for d in long[:2]]
    with pytest.raises(UserError, match=r"holds \d+ document\(s\) of at least 255 tokens; .* needs 500"):
        _probes(tmp_path / "b", tiny_llama_dir, bpe_tokenizer, docs=[str(corpus_path)], num_docs=500)


def test_off_and_out_of_range(tmp_path, tiny_llama_dir, bpe_tokenizer, capsys):
    from training.distributed import SingleProcess
    from training.probe_set import FILE_NAME
    from training.probes import open_probes

    ctx = SingleProcess(torch.device("cpu"))
    assert open_probes(_job(tiny_llama_dir, tmp_path, every=0), bpe_tokenizer, ctx) is None
    assert open_probes(_job(tiny_llama_dir, tmp_path, every=5, steps=4), bpe_tokenizer, ctx) is None
    assert not (tmp_path / FILE_NAME).exists()
    with pytest.raises(UserError, match="--probe-lengths 512 is longer than --window 256"):
        open_probes(_job(tiny_llama_dir, tmp_path, lengths=[512]), bpe_tokenizer, ctx)
    with pytest.raises(UserError, match="--probe-rope-len 300 is longer than --window 256"):
        open_probes(_job(tiny_llama_dir, tmp_path, rope_len=300), bpe_tokenizer, ctx)
    with pytest.raises(UserError, match="--probe-lengths 40: a needle prompt needs more than"):
        open_probes(_job(tiny_llama_dir, tmp_path, lengths=[40]), bpe_tokenizer, ctx)
    # default lengths too short for a needle prompt are dropped; with none left the probe says so
    probes = open_probes(_job(tiny_llama_dir, tmp_path / "default", lengths=None), bpe_tokenizer, ctx)
    assert probes is not None and [n.length for n in probes.probe_set.needles] == [256, 256, 256]
    capsys.readouterr()
    short = _job(tiny_llama_dir, tmp_path / "short", lengths=None, window=128, rope_len=0)
    probes = open_probes(short, bpe_tokenizer, ctx)
    assert probes is not None and probes.probe_set.needles == [] and not probes.probe_set.rope_window
    assert "probes: no needle probe (the 128-token window is shorter than a needle prompt" in capsys.readouterr().out
    got = probes.run(_plain_model(tiny_llama_dir))
    assert not any(k.startswith(("probe_needle", "probe_rope")) for k in got) and "probe_pos/loss" in got


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--probe-every", "-1"], "--probe-every -1 must be at least 0"),
        (["--probe-depths", "10,120"], "120 is not a percent from 0 to 100"),
        (["--probe-depths", "ten"], "'ten' is not a number"),
        (["--probe-lengths", "1k,x"], "--probe-lengths: bad length"),
        (["--probe-buckets", "0"], "--probe-buckets 0 must be at least 1"),
        (["--probe-docs", ","], "--probe-docs is empty"),
        (["--probe-rope-len", "-2"], "--probe-rope-len -2 must be at least 0"),
    ],
)
def test_bad_probe_flags_are_one_line(flags, message, tmp_path, capsys):
    from harness.cli import main

    argv = ["train", "--model", "m", "--data", "d.jsonl", "--out", str(tmp_path / "r"), "--mode", "anchor"]
    code = main([*argv, "--window", "256", "--steps", "4", *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_probe_flags_reach_the_run(tmp_path, tiny_llama_dir, corpus_path, capsys):
    from harness.cli import main
    from training.logging import read_log

    out = tmp_path / "run"
    argv = ["train", "--model", str(tiny_llama_dir), "--data", str(corpus_path), "--out", str(out), "--mode", "anchor"]
    argv += [
        "--window",
        "256",
        "--steps",
        "2",
        "--dtype",
        "fp32",
        "--no-progress",
        "--max-docs",
        "20",
        "--save-every",
        "2",
    ]
    argv += ["--probe-every", "2", "--probe-lengths", "250", "--probe-depths", "50,25", "--probe-buckets", "4"]
    argv += ["--probe-rope-len", "64", "--probe-num-docs", "1"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "probes: every 2 steps; probe set" in capsys.readouterr().out
    row = read_log(out / "log.jsonl")[-1]
    assert sorted(k for k in row if k.startswith("probe_needle/logp_2")) == [
        "probe_needle/logp_250_d25",
        "probe_needle/logp_250_d50",
    ]
    assert len([k for k in row if k.startswith("probe_pos/loss_")]) == 4 and "probe_rope/D_bf16" in row
    meta = json.loads((out / "ckpt-2" / "harness_training.json").read_text())
    assert meta["job"]["probes"] == {
        "every": 2,
        "lengths": [250],
        "depths": [25.0, 50.0],
        "docs": None,
        "num_docs": 1,
        "buckets": 4,
        "rope_len": 64,
    }
