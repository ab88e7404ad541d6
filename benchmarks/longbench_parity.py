"""Prompt and metric parity with THUDM/LongBench v1 (LongBench/pred.py, eval.py), no model needed.

    python benchmarks/longbench_parity.py --reference /tmp/ref/LongBench          # print the comparison
    python benchmarks/longbench_parity.py --reference ... --write-pins tests/longbench/parity_pins.json

The reference side runs pred.py's own get_pred (prompt fill, middle truncation, chat decision, samsum's
stop rule) on the fixture files (tests/longbench/fixtures/data, data.zip's layout) with a local
tokenizer: pred.py is imported from the checkout, its model loader swapped for one that returns that
tokenizer and a stand-in model that records what generate() is given (the text fed to the model, its
eos ids and min_length) and generates nothing. Its flash-attention patch module, which needs CUDA
packages, is replaced by an empty stand-in when it cannot be imported; nothing it holds is called.
Model "llama2-7b-chat-4k" is the one whose chat format is visible in the text ([INST]...[/INST]), so
the chat decision is read off the fed text. The metric side calls eval.py's scorer on the same
predictions (tests/longbench/fixture_data.predictions) per sample and per task.

Our side: each task under the reference protocol, its record length from Task.task_lengths (a 4096-
and a 2048-position model by default, then explicit --max-length budgets), its sample's prompt, its
uses_chat_template(), its samsum stop metadata and its score().

Printed per task and budget: prompts compared and the mismatches of each kind; at the end the totals.
--write-pins writes, per case, the reference's results (prompt sha256, chat decision, stop rule,
scores), which tests/longbench/test_parity_pins.py compares with ours without the checkout.
The tokenizer defaults to the tests' BPE (harness.models.embedded.build_tokenizer, deterministic).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import load_file, mismatch_status, sha, tokenizer_folder, write_json  # after the sys.path lines above

DATA = ROOT / "tests" / "longbench" / "fixtures" / "data"
MODEL = "llama2-7b-chat-4k"  # pred.py's [INST]...[/INST] chat format: visible in the text
CONTEXTS = (4096, 2048)  # model contexts: the reference budget comes from Task.task_lengths
BUDGETS = (500, 128)  # explicit prompt budgets (--max-length under the reference protocol)
CHAT_OPEN, CHAT_CLOSE = "[INST]", "[/INST]"


def import_reference(ref: Path):
    """pred.py and eval.py of the checkout (LongBench/ subfolder), as modules."""
    folder = ref / "LongBench"
    sys.path.insert(0, str(folder))  # eval.py: `from metrics import ...`
    try:
        import llama_flash_attn_monkey_patch  # type: ignore[import-not-found]  # noqa: F401
    except Exception:  # noqa: BLE001  (flash_attn/einops missing: only load_model_and_tokenizer calls it)
        stub = types.ModuleType("llama_flash_attn_monkey_patch")
        stub.replace_llama_attn_with_flash_attn = lambda: None  # type: ignore[attr-defined]
        sys.modules["llama_flash_attn_monkey_patch"] = stub
    pred = load_file("longbench_v1_pred", folder / "pred.py")
    evaluate = load_file("longbench_v1_eval", folder / "eval.py")
    configs = {
        n: json.loads((folder / "config" / f"{n}.json").read_text())
        for n in ("dataset2prompt", "dataset2maxlen", "model2maxlen")
    }
    return pred, evaluate, configs


class _Fed:
    """A tokenizer call's result that stays where it is on .to(device) (no GPU here)."""

    def __init__(self, enc):
        self.enc = enc

    def __getattr__(self, name):
        return getattr(self.enc, name)

    def to(self, device):
        return self.enc


class RecordingTokenizer:
    """The local tokenizer, remembering the last text encoded (the text pred.py feeds the model)."""

    def __init__(self, tok):
        self.tok, self.last_text = tok, None
        self.eos_token_id = tok.eos_token_id

    def __call__(self, text, **kw):
        self.last_text = text
        enc = self.tok(text, **kw)
        return _Fed(enc) if kw.get("return_tensors") == "pt" else enc

    def decode(self, *a, **kw):
        return self.tok.decode(*a, **kw)

    def encode(self, *a, **kw):
        return self.tok.encode(*a, **kw)


class RecordingModel:
    """Stands in for the LM: records what generate() is given and generates nothing."""

    def __init__(self, tok: RecordingTokenizer):
        self.tok = tok
        self.calls: list[dict] = []

    def generate(self, input_ids, **kw):
        self.calls.append({"text": self.tok.last_text, "ids": input_ids[0].tolist(), **kw})
        return input_ids

    def eval(self):
        return self


def reference_prompts(pred, configs, task: str, records: list[dict], budget: int, tok) -> list[dict]:
    """pred.py's get_pred on `records` at prompt budget `budget`: per record the prompt text before
    the chat wrap, whether it was wrapped, and samsum's stop rule."""
    rtok = RecordingTokenizer(tok)
    model = RecordingModel(rtok)
    pred.load_model_and_tokenizer = lambda path, name, device: (model, rtok)
    pred.dist = types.SimpleNamespace(destroy_process_group=lambda: None)
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()):
        pred.get_pred(
            0, 1, records, budget, configs["dataset2maxlen"][task], configs["dataset2prompt"][task], task,
            None, MODEL, {MODEL: "unused"}, str(Path(tmp) / "pred.jsonl"),
        )  # fmt: skip
    out = []
    for call in model.calls:
        text = call["text"]
        chat = text.startswith(CHAT_OPEN) and text.endswith(CHAT_CLOSE)
        stop = {}
        if "min_length" in call:  # samsum: stop ids beyond EOS, and a first token that may not be one
            extra = [i for i in call["eos_token_id"] if i != tok.eos_token_id]
            stop = {
                "stop_tokens": [tok.decode([i]) for i in extra],
                "min_new_tokens": call["min_length"] - len(call["ids"]),
            }
        out.append(
            {
                "prompt": text[len(CHAT_OPEN) : -len(CHAT_CLOSE)] if chat else text,
                "chat": chat,
                "stop": stop,
                "max_new_tokens": call["max_new_tokens"],
            }
        )
    return out


def our_prompts(task_name: str, n: int, context: int, max_length: int | None, tok) -> tuple[int, list[dict]]:
    from tasks.registry import get_task

    task = get_task(task_name)
    task.set_protocol("reference")
    (length,) = task.task_lengths(None, context, max_length)
    out = []
    for i in range(n):
        s = task.sample(length, i, 42, tok)
        stop = {k: s.metadata[k] for k in ("stop_tokens", "min_new_tokens") if k in s.metadata}
        out.append(
            {
                "prompt": s.prompt,
                "chat": task.uses_chat_template(),
                "stop": stop,
                "max_new_tokens": s.max_new_tokens,
                "sample": s,
            }
        )
    return length, out


def compare(ref: Path, data: Path, tok) -> dict:
    """Every comparison, as {"cases": [...], "metrics": [...], "totals": {...}}."""
    from tasks.longbench import data as lb_data
    from tasks.longbench.prompts import DATASETS
    from tasks.registry import get_task
    from tests.longbench.fixture_data import predictions

    pred, evaluate, configs = import_reference(ref)
    lb_data.set_data_dir(data)
    # pred.py's model2maxlen for the models whose context its name says: our rule must give the same
    budget_rule = {}
    for model, budget in configs["model2maxlen"].items():
        k = next((int(p[:-1]) for p in model.split("-") if p.endswith("k") and p[:-1].isdigit()), None)
        if k is not None:
            budget_rule[model] = {"reference": budget, "ours": get_task("trec").task_lengths(None, 1024 * k, None)[0]}
    cases, metrics = [], []
    for task in DATASETS:
        records = [dict(r) for r in lb_data.load_records(task)]
        runs = [(c, None) for c in CONTEXTS] + [(4096, b) for b in BUDGETS]
        for context, max_length in runs:
            length, ours = our_prompts(task, len(records), context, max_length, tok)
            theirs = reference_prompts(pred, configs, task, records, length, tok)
            for i, (o, t) in enumerate(zip(ours, theirs, strict=True)):
                cases.append(
                    {
                        "task": task, "context": context, "max_length": max_length, "budget": length, "index": i,
                        "prompt_sha256": sha(t["prompt"]), "chat": t["chat"], "stop": t["stop"], "max_new_tokens": t["max_new_tokens"],
                        "truncated": o["sample"].metadata["truncation"]["truncated"],
                        "prompt_match": o["prompt"] == t["prompt"], "chat_match": o["chat"] == t["chat"],
                        "stop_match": o["stop"] == t["stop"], "max_new_tokens_match": o["max_new_tokens"] == t["max_new_tokens"],
                    }
                )  # fmt: skip
        # metrics: eval.py's scorer on each prediction alone and on the task's whole list
        scorer_task = get_task(task)
        _, ours = our_prompts(task, len(records), 4096, None, tok)
        all_preds: list[str] = []
        all_answers: list[list[str]] = []
        our_scores: list[float] = []
        for rec, o in zip(records, ours):
            for p in predictions(rec):
                theirs = evaluate.scorer(task, [p], [rec["answers"]], rec["all_classes"])
                mine = scorer_task.score(p, o["sample"])
                metrics.append(
                    {
                        "task": task,
                        "prediction": p,
                        "answers": rec["answers"],
                        "reference": theirs,
                        "match": theirs == round(100 * mine, 2),
                    }
                )
                all_preds.append(p)
                all_answers.append(rec["answers"])
                our_scores.append(mine)
        theirs = evaluate.scorer(task, all_preds, all_answers, records[0]["all_classes"])
        ours_mean = round(100 * sum(our_scores) / len(our_scores), 2)
        metrics.append({"task": task, "prediction": None, "reference": theirs, "match": theirs == ours_mean})
    totals = {
        "prompts_compared": len(cases),
        "prompts_truncated": sum(c["truncated"] for c in cases),
        "prompt_mismatches": sum(not c["prompt_match"] for c in cases),
        "chat_mismatches": sum(not c["chat_match"] for c in cases),
        "stop_mismatches": sum(not c["stop_match"] for c in cases),
        "max_new_tokens_mismatches": sum(not c["max_new_tokens_match"] for c in cases),
        "scores_compared": len(metrics),
        "metric_mismatches": sum(not m["match"] for m in metrics),
        "budget_rule_mismatches": sum(v["reference"] != v["ours"] for v in budget_rule.values()),
    }
    return {"cases": cases, "metrics": metrics, "budget_rule": budget_rule, "totals": totals}


def report(result: dict) -> None:
    rows: dict[tuple, list[dict]] = {}
    for c in result["cases"]:
        rows.setdefault((c["task"], c["budget"]), []).append(c)
    print(f"{'task':22} {'budget':>6} {'prompts':>7} {'cut':>4} {'prompt':>6} {'chat':>4} {'stop':>4}  (mismatches)")
    for (task, budget), cs in rows.items():
        bad = [sum(not c[k] for c in cs) for k in ("prompt_match", "chat_match", "stop_match")]
        print(
            f"{task:22} {budget:>6} {len(cs):>7} {sum(c['truncated'] for c in cs):>4} {bad[0]:>6} {bad[1]:>4} {bad[2]:>4}"
        )
    by_task: dict[str, list[dict]] = {}
    for m in result["metrics"]:
        by_task.setdefault(m["task"], []).append(m)
    print("\nmetric (eval.py scorer vs ours, per prediction and per task):")
    for task, ms in by_task.items():
        print(f"  {task:22} {len(ms):>3} scores, {sum(not m['match'] for m in ms)} mismatches")
    print("\nbudget rule (pred.py model2maxlen vs Task.task_lengths):")
    for model, v in result["budget_rule"].items():
        print(f"  {model:24} {v['reference']:>6} {v['ours']:>6}")
    print("\ntotals:", json.dumps(result["totals"]))


def pins(result: dict) -> dict:
    """What the pinned test needs: the reference's side of every case, and the totals."""
    keep = ("task", "context", "max_length", "budget", "index", "prompt_sha256", "chat", "stop", "max_new_tokens")
    return {
        "_source": "benchmarks/longbench_parity.py --write-pins, THUDM/LongBench 2e00731 (LongBench/pred.py get_pred, eval.py scorer) "
        "on tests/longbench/fixtures/data with the tests' BPE tokenizer (harness.models.embedded.build_tokenizer)",
        "cases": [{k: c[k] for k in keep} for c in result["cases"]],
        "metrics": [{k: m[k] for k in ("task", "prediction", "reference")} for m in result["metrics"]],
        "budget_rule": result["budget_rule"],
        "totals": result["totals"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, type=Path, help="a checkout of THUDM/LongBench")
    ap.add_argument("--data", type=Path, default=DATA, help="folder of <task>.jsonl (data.zip's layout)")
    ap.add_argument("--tokenizer", help="tokenizer folder (default: the tests' BPE, built in a temp folder)")
    ap.add_argument("--write-pins", type=Path, help="write the reference's results here (JSON)")
    args = ap.parse_args(argv)
    from harness.models.tokenization import load_tokenizer

    args.tokenizer = tokenizer_folder(args.tokenizer, "lb-parity-tok-")
    tok = load_tokenizer(args.tokenizer)
    result = compare(args.reference.resolve(), args.data.resolve(), tok)
    report(result)
    if args.write_pins:
        write_json(args.write_pins, pins(result))
    t = result["totals"]
    return mismatch_status(t)


if __name__ == "__main__":
    sys.exit(main())
