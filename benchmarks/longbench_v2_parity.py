"""Prompt and metric parity with THUDM/LongBench v2 (pred.py, result.py), no model and no server needed.

    python benchmarks/longbench_v2_parity.py --reference /tmp/ref/LongBench
    python benchmarks/longbench_v2_parity.py --reference ... --write-pins tests/longbench_v2/parity_pins.json

The reference side runs pred.py's own get_pred (template fill, query_llm's truncation with the
model's tokenizer, the chat route, the CoT second step, extract_answer, judge) on the fixture
data.json (tests/longbench_v2/fixtures, the hub file's layout): pred.py is imported from the checkout
(from its folder: it reads config/ and prompts/ at import), its model map pointed at a local tokenizer
folder, its max_len map at the cap under test, and its OpenAI client replaced by one that records the
messages it is sent and answers with canned responses. openai and tiktoken, which it imports, are
replaced by empty stand-ins when not installed (neither is called). result.py then runs on the
results file get_pred wrote, in a temporary folder, and its Overall/Easy/Hard/Short/Medium/Long are
compared with the sample-pooled accuracies of our suite's Headline groups.

Our side: each task under the reference protocol, at the record length that gives the same cap
(131072 for pred.py's own 120000, a 128K model; cap + max_new_tokens for the small caps), its
sample's prompt, follow_up() for the CoT answer step, uses_chat_template() and score().
pred.py drops an item whose response is empty ('' : nothing written), where we score it 0: those are
counted apart ("dropped by the reference"), not as mismatches, and left out of the headline check.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import runpy
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import (  # after the sys.path lines above
    importable,
    load_file,
    mismatch_status,
    sha,
    stand_in,
    tokenizer_folder,
    write_json,
)

DATA = ROOT / "tests" / "longbench_v2" / "fixtures" / "data.json"
MODEL = "local-model"
# (variant, cap): pred.py's own 120000 (nothing of the fixture is cut), two caps that cut, set by a
# short context; and SCALED, pred.py's fixed cap scaled down to cut the fixture: its max_len on their
# side, our REFERENCE_CAP on ours, with a 128K context (the cut of a 128K model, nothing refitted).
SCALED = 150
# The untruncated variant is pred.py's 0-shot with max_len set to the context instead of 120000: at a
# 1M context nothing of the fixture is cut (where SCALED's cap cuts it), at 200 the context cuts.
RUNS = [("", 120000), ("", 200), ("", 64), ("", -SCALED), ("cot", 120000), ("cot", 200), ("nocontext", 120000)]
RUNS += [("untruncated", 1048448), ("untruncated", 200)]
# canned responses, one per item in turn (the CoT variant's first step gets a reasoning, then these)
RESPONSES = [
    "The correct answer is (A)",
    "**The correct answer is (B)**",
    "  The correct answer is C.\n",
    "The correct answer is (E), or The correct answer is D",
    "I think (A)",
    "",
    "the correct answer is (B)",
    "The correct answer is **(C)**",
]
REASONING = "  Step 1: the passage opens with a word.\nSo the answer is the first choice.\n"


def reasoning(k: int) -> str:
    """The CoT first step's response for item k: every 7th empty (pred.py drops that item)."""
    return REASONING if k % 7 != 6 else ""


def import_reference(ref: Path):
    """pred.py of the checkout's top level (v2), imported from its folder."""
    for name in ("openai", "tiktoken"):
        if not importable(name):
            stand_in(name, OpenAI=None)  # replaced by the recording client below
    return load_file("longbench_v2_pred", ref / "pred.py", chdir=True)


class FakeClient:
    """pred.py's OpenAI client: records each request's messages, answers from a script."""

    def __init__(self, answers: list[str], calls: list[dict]):
        self.answers, self.calls = answers, calls
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self.create))

    def create(self, model, messages, temperature, max_tokens):
        self.calls.append({"messages": messages, "max_tokens": max_tokens})
        msg = types.SimpleNamespace(content=self.answers.pop(0))
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=msg)])


def reference_run(pred, items: list[dict], variant: str, cap: int, tokenizer_dir: str) -> tuple[list[dict], list[dict]]:
    """pred.py's get_pred over `items`: the requests it sent, and the results lines it wrote."""
    answers: list[str] = []
    for k in range(len(items)):
        if variant == "cot":
            answers.append(reasoning(k))
            if not answers[-1]:
                continue  # an empty reasoning: pred.py drops the item, asks nothing more
        answers.append(RESPONSES[k % len(RESPONSES)])
    calls: list[dict] = []
    pred.model_map = {MODEL: tokenizer_dir}
    pred.maxlen_map = {MODEL: abs(cap)}
    pred.OpenAI = lambda base_url, api_key: FakeClient(list(answers), calls)
    args = types.SimpleNamespace(model=MODEL, rag=0, no_context=variant == "nocontext", cot=variant == "cot")
    # ("untruncated": pred.py's 0-shot run, its max_len above set to the context)
    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        pred.get_pred([dict(it) for it in items], args, out)
    return calls, [json.loads(line) for line in out.getvalue().splitlines()]


def result_py(ref: Path, lines: list[dict]) -> dict[str, float]:
    """result.py on one results file: {"Overall": ..., "Easy": ..., ...}."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results").mkdir()
        (Path(tmp) / "results" / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            runpy.run_path(str(ref / "result.py"))
        finally:
            os.chdir(cwd)
        head, row = (Path(tmp) / "result.txt").read_text().splitlines()
    return {k: float(v) for k, v in zip(head.split("\t")[1:], row.split("\t")[1:])}


def our_tasks(variant: str) -> list:
    from tasks.longbench_v2.prompts import DIFFICULTIES, LENGTHS
    from tasks.longbench_v2.tasks import task_name
    from tasks.registry import get_task

    return [get_task(task_name(variant, d, length)) for d in DIFFICULTIES for length in LENGTHS]


def our_samples(items: list[dict], variant: str, cap: int, tok) -> list:
    """(task, sample) per item of data.json, in file order, at the length that gives `cap`."""
    tasks = {(t.difficulty, t.length_class): t for t in our_tasks(variant)}
    seen: dict[tuple, int] = {}
    out = []
    for it in items:
        cell = (it["difficulty"], it["length"])
        task = tasks[cell]
        task.set_protocol("reference")
        k = seen[cell] = seen.get(cell, -1) + 1
        if task.no_context:
            length = 0
        elif variant != "untruncated" and cap in (120000, -SCALED):
            length = 131072  # a 128K model: pred.py's own cap (or SCALED's) cuts, not the context
        else:
            length = cap + task.max_new_tokens  # the context sets the cut
        out.append((task, task.sample(length, k, 42, tok)))
    return out


def compare(ref: Path, data: Path, tokenizer_dir: str, tok) -> dict:
    from tasks.longbench_v2 import data as v2_data
    from tasks.longbench_v2.tasks import suite_name
    from tasks.registry import suite_headline

    os.environ[v2_data.ENV_VAR] = str(data)
    v2_data.clear_cache()
    items = list(v2_data.load_items())
    pred = import_reference(ref)
    cases, scores, headlines = [], [], []
    from tasks.longbench_v2 import tasks as v2_tasks

    for variant, cap in RUNS:
        calls, lines = reference_run(pred, items, variant, cap, tokenizer_dir)
        v2_tasks.REFERENCE_CAP = SCALED if cap == -SCALED else 120000
        try:
            ours = our_samples(items, variant, cap, tok)
        finally:
            v2_tasks.REFERENCE_CAP = 120000
        kept = {x["_id"]: x for x in lines}
        requests = iter(calls)
        our_scores: dict[str, float] = {}
        for k, (task, s) in enumerate(ours):
            first = next(requests)
            steps = [(first, s)]
            thought = reasoning(k) if variant == "cot" else None
            if thought:
                steps.append((next(requests), task.follow_up(s, thought)))
            response: str | None = RESPONSES[k % len(RESPONSES)]
            for step, (call, sample) in enumerate(steps):
                if step == 1 and cap != 120000:  # (cap < 0: SCALED)
                    continue  # pred.py cuts the answer step too; it has no document (see the docstring)
                (msg,) = call["messages"]
                # pred.py's cut can re-encode a token or two over the cap (a merge at the seam). At its
                # own 120000 that is sent as it is (and so is ours); at a cap the context sets, it would
                # not fit, and ours trims it (refit_tokens): counted apart, not as a mismatch.
                limit = sample.length - sample.max_new_tokens
                over = step == 0 and cap > 0 and cap != 120000 and len(tok(msg["content"])["input_ids"]) > limit
                cases.append(
                    {
                        "variant": variant, "cap": cap, "id": items[k]["_id"], "step": step, "prompt_sha256": sha(msg["content"]),
                        "role": msg["role"], "max_new_tokens": call["max_tokens"],
                        "truncated": bool(sample.metadata.get("truncation", {}).get("truncated")),
                        "over_context": over, "prompt_match": over or msg["content"] == sample.prompt, "chat_match": msg["role"] == "user" and task.uses_chat_template(),
                        "max_new_tokens_match": call["max_tokens"] == sample.max_new_tokens,
                    }
                )  # fmt: skip
            if variant == "cot" and not thought:
                response = None  # the reference dropped the item before its answer step
            mine = task.score(response, s) if response is not None else 0.0
            ref_line = kept.get(items[k]["_id"])
            scores.append(
                {
                    "variant": variant, "cap": cap, "id": items[k]["_id"], "response": response,
                    "reference": None if ref_line is None else bool(ref_line["judge"]), "ours": mine,
                    "match": ref_line is None or float(ref_line["judge"]) == mine,
                }
            )  # fmt: skip
            if ref_line is not None:
                our_scores[items[k]["_id"]] = mine
        # result.py's six columns against our headline groups, pooled over the items pred.py kept
        theirs = result_py(ref, lines)
        groups = suite_headline(suite_name(variant)).groups  # type: ignore[union-attr]
        cell_of = {t.name: (t.difficulty, t.length_class) for t in our_tasks(variant)}
        for name, cats in groups.items():
            (tasks,) = cats.values()
            cells = {cell_of[t] for t in tasks}
            vals = [
                v
                for it in items
                if (it["difficulty"], it["length"]) in cells and (v := our_scores.get(it["_id"])) is not None
            ]
            mine_pct = round(100 * sum(vals) / len(vals), 1)
            headlines.append(
                {"variant": variant, "cap": cap, "group": name, "reference": theirs[name], "ours": mine_pct}
            )
    totals = {
        "prompts_compared": len(cases),
        "prompts_truncated": sum(c["truncated"] for c in cases),
        "prompt_mismatches": sum(not c["prompt_match"] for c in cases),
        "reference_over_context": sum(c["over_context"] for c in cases),
        "chat_mismatches": sum(not c["chat_match"] for c in cases),
        "max_new_tokens_mismatches": sum(not c["max_new_tokens_match"] for c in cases),
        "scores_compared": sum(s["reference"] is not None for s in scores),
        "dropped_by_reference": sum(s["reference"] is None for s in scores),
        "metric_mismatches": sum(not s["match"] for s in scores),
        "headlines_compared": len(headlines),
        "headline_mismatches": sum(h["reference"] != h["ours"] for h in headlines),
    }
    return {"cases": cases, "scores": scores, "headlines": headlines, "totals": totals}


def report(result: dict) -> None:
    rows: dict[tuple, list[dict]] = {}
    for c in result["cases"]:
        rows.setdefault((c["variant"] or "0shot", c["cap"]), []).append(c)
    print(f"{'variant':10} {'cap':>7} {'prompts':>7} {'cut':>4} {'prompt':>6} {'chat':>4} {'gen':>4}  (mismatches)")
    for (variant, cap), cs in rows.items():
        bad = [sum(not c[k] for c in cs) for k in ("prompt_match", "chat_match", "max_new_tokens_match")]
        print(
            f"{variant:10} {cap:>7} {len(cs):>7} {sum(c['truncated'] for c in cs):>4} {bad[0]:>6} {bad[1]:>4} {bad[2]:>4}"
        )
    print("\nresult.py vs our headline groups (pooled over the items pred.py kept):")
    for h in result["headlines"]:
        print(f"  {h['variant'] or '0shot':10} {h['cap']:>7} {h['group']:8} {h['reference']:>6} {h['ours']:>6}")
    print("\ntotals:", json.dumps(result["totals"]))


def pins(result: dict) -> dict:
    keep = ("variant", "cap", "id", "step", "prompt_sha256", "role", "max_new_tokens", "over_context")
    return {
        "_source": "benchmarks/longbench_v2_parity.py --write-pins, THUDM/LongBench 2e00731 (pred.py get_pred with a "
        "recording client, result.py) on tests/longbench_v2/fixtures/data.json with the tests' BPE tokenizer",
        "cases": [{k: c[k] for k in keep} for c in result["cases"]],
        "scores": [{k: s[k] for k in ("variant", "cap", "id", "response", "reference")} for s in result["scores"]],
        "headlines": [{k: h[k] for k in ("variant", "cap", "group", "reference")} for h in result["headlines"]],
        "totals": result["totals"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, type=Path, help="a checkout of THUDM/LongBench (v2 at its top level)")
    ap.add_argument("--data", type=Path, default=DATA, help="data.json (the hub file's layout)")
    ap.add_argument("--tokenizer", help="tokenizer folder (default: the tests' BPE, built in a temp folder)")
    ap.add_argument("--write-pins", type=Path, help="write the reference's results here (JSON)")
    args = ap.parse_args(argv)
    from harness.models.tokenization import load_tokenizer

    args.tokenizer = tokenizer_folder(args.tokenizer, "lbv2-parity-tok-")
    tok = load_tokenizer(args.tokenizer)
    result = compare(args.reference.resolve(), args.data.resolve(), args.tokenizer, tok)
    report(result)
    if args.write_pins:
        write_json(args.write_pins, pins(result))
    return mismatch_status(result["totals"])


if __name__ == "__main__":
    sys.exit(main())
