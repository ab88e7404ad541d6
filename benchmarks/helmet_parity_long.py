"""HELMET parity for LongQA and Summ: NarrativeQA, InfiniteBench En.QA / En.MC / En.Sum and
Multi-LexSum, through HELMET's own data.py loaders (load_narrativeqa, load_infbench,
load_multi_lexsum, via load_data with configs/longqa*.yaml's and summ*.yaml's dataset names).

Their data are hub datasets and their filters count Llama-2 tokens, so both sides run on
tests/helmet/long_documents.py: rows in the hub layout (served to HELMET by
benchmarks/helmet_parity_hub.py, written in --helmet-data's layout for ours) and a character-level
stand-in for Llama-2's tokenizer (HELMET's data.AutoTokenizer; ours HARNESS_LLAMA2_TOKENIZER), so
documents sit a token above and below each bound. Per task and length:

  prompts  HELMET's loader (eval.py's seeding, shots 2, max_test_samples 100): its choice and order
           of items, demos, length filter and truncate_llama2 to the dataset's Llama-2 budget, then
           model_utils.tokenize's overflow cut in the evaluated model's tokens (the test BPE);
           prompt_template.format(**item) against our Sample.prompt at the same index, and the
           item after HELMET's last one must not exist on our side either;
  metrics  the same predictions scored by HELMET's post_process and by our Task.score, as a
           completion (system template prepended, eval.py without a chat template) and as a chat
           reply (configs' use_chat_template: true): En.QA's rougeL_f1 and En.MC's exact_match.
           NarrativeQA, Multi-LexSum and En.Sum count in HELMET's table by the GPT-4o judge's
           score (out of scope here); the rouge / F1 / SubEM its post_process also computes for
           them are not computed by our tasks, whose score is the judge's: nothing to compare.

NarrativeQA and Multi-LexSum draw their demos with an unseeded shuffle in HELMET; the hub module
seeds that shuffle as ours is seeded (the question's / case id's sha256), so both use the same demos.
One more case runs Multi-LexSum with max_test_samples 2 on both sides (CAPPED), for the shuffle
load_multi_lexsum applies only when more cases than that pass its filter.
"""

from __future__ import annotations

import os
import random
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import helmet_parity_hub as hub  # beside this module (benchmarks/ on sys.path)
from parity_kit import sha  # beside this module too

SEED = 42
# (our task, HELMET's dataset name at Llama-2 budget k, what seeds its unseeded demo draw)
CASES = [
    ("helmet_narrativeqa", "narrativeqa_{k}", lambda ex: ex["question"]["text"]),
    ("helmet_infbench_qa", "infbench_qa_eng_{k}", None),
    ("helmet_infbench_choice", "infbench_choice_eng_{k}", None),
    ("helmet_infbench_sum", "infbench_sum_eng_{k}", None),
    ("helmet_multi_lexsum", "multi_lexsum_{k}", lambda ex: ex["id"]),
]
TEST_SAMPLES = 100  # configs/longqa*.yaml, summ*.yaml: max_test_samples
# Multi-LexSum shuffles its cases only when more than max_test_samples pass the filter; with the
# configs' 100 that takes 101 documents of 65K tokens, so this case sets it to 2 on both sides
# (HELMET's args.max_test_samples, our tasks.helmet.reference.SAMPLES): 3 cases pass, 2 are drawn.
CAPPED = ("helmet_multi_lexsum", 8192, 2)
METRICS = {"helmet_infbench_qa": "rougeL_f1", "helmet_infbench_choice": "exact_match"}  # collect_results.py's
PREDICTIONS = [
    "",
    " nobody",
    " A",
    " B. The castle",
    " The answer is C.\nmore text",
    " Answer: past the river, I think",
    " (D)",
    " the keeper walked past the violin at dawn",
]


def prepare(work: Path) -> tuple[Path, Path, dict]:
    """The stand-in tokenizer and our data folder under `work`, and the hub rows."""
    from tests.helmet.long_documents import build_llama2_standin, hub_rows, write_local

    rows = hub_rows()
    llama2 = build_llama2_standin(work / "llama2-standin")
    folder = write_local(work / "helmet-long", rows)
    return llama2, folder, rows


def serve_rows(hdata, rows: dict, llama2: Path, extra: dict | None = None) -> None:
    hub.serve(
        hdata,
        {
            "narrativeqa": hub.rows_hub(rows["narrativeqa"]),
            "allenai/multi_lexsum": hub.rows_hub(rows["allenai/multi_lexsum"], config="v20230518"),
            "xinrongzhang2022/infinitebench": hub.rows_hub(rows["xinrongzhang2022/infinitebench"]),
            **(extra or {}),
        },
        llama2,
    )


def _helmet_items(hdata, dataset: str, demo_key, cap: int):
    args = SimpleNamespace(max_test_samples=cap, shots=2, seed=SEED)
    random.seed(SEED)  # eval.run_test, before load_data
    if demo_key is None:
        return hdata.load_data(args, dataset, "", "")
    with hub.seeded_demos(demo_key):
        return hdata.load_data(args, dataset, "", "")


def _sample(task, length: int, index: int, tok):
    """Our sample `index`, or None where our filters leave fewer items (a UserError)."""
    from harness.core.errors import UserError

    try:
        return task.sample(length, index, SEED, tok)
    except UserError:
        return None


def predictions(answers) -> list[str]:
    """The outputs both metric codes score for an item: its answers, then PREDICTIONS."""
    return [f" {a}" for a in answers] + PREDICTIONS


MODES = ("completion", "chat")  # eval.py without / with the chat template


def helmet_scores(name: str, out: dict, item: dict) -> list[float]:
    """HELMET's post_process metric for each prediction and mode (predictions x MODES): as a
    completion eval.py prepends the system template, as a chat reply it does not."""
    system = out["system_template"].format(**item)
    return [
        float(out["post_process"]({"output": output}, item)[0][METRICS[name]])
        for pred in predictions(item["answer"])
        for output in (system + pred, pred)
    ]


def our_scores(task, sample) -> list[float]:
    """Our Task.score in helmet_scores' order: the sample as built, then as sent to a chat model
    (the answer prefix left out, as the loop leaves it out for HELMET's chat tasks)."""
    chat = sample.without_answer_prefix(sample.num_tokens)
    return [task.score(pred, s) for pred in predictions(sample.references) for s in (sample, chat)]


def run(hdata, model_utils, tok, folder: Path, llama2: Path) -> dict:
    """Compare every case at HELMET's five lengths, and the capped one; the report part."""
    from tasks.helmet import reference

    os.environ["HARNESS_HELMET"] = str(folder)
    os.environ[reference.LLAMA2_ENV] = str(llama2)
    reference.llama2_tokenizer.cache_clear()
    reference.llama2_length.cache_clear()
    runs = [(name, dataset, key, L, TEST_SAMPLES) for name, dataset, key in CASES for L in reference.RUNS[name]]
    task, length, cap = CAPPED
    runs += [(name, dataset, key, length, cap) for name, dataset, key in CASES if name == task]
    report: dict = {"cases": {}, "prompt_mismatches": 0, "metric_mismatches": 0, "prompts": 0, "scores": 0}
    for name, dataset, demo_key, length, cap in runs:
        with max_test_samples(cap):
            case = _compare(hdata, model_utils, tok, name, dataset, demo_key, length, cap)
        report["cases"][f"{name}@{length}" + ("" if cap == TEST_SAMPLES else f"/max{cap}")] = case
        report["prompts"] += case["items"]
        report["scores"] += case["scores"]
        report["prompt_mismatches"] += case["prompt_mismatches"]
        report["metric_mismatches"] += case["metric_mismatches"]
    return report


@contextmanager
def max_test_samples(cap: int):
    """Our side of max_test_samples (tasks.helmet.reference.SAMPLES: the configs' 100) set to `cap`."""
    from tasks.helmet import reference

    configs, reference.SAMPLES = reference.SAMPLES, cap
    try:
        yield
    finally:
        reference.SAMPLES = configs


def _compare(hdata, model_utils, tok, name: str, dataset: str, demo_key, length: int, cap: int) -> dict:
    """One task at one length: HELMET's prompts and scores against ours, printed and counted."""
    from tasks.helmet import reference
    from tasks.helmet.prompts import TRUNCATION_POSTFIX
    from tasks.registry import get_task

    task = get_task(name)
    task.set_protocol("reference")
    run_ = reference.run_for(name, length)
    out = _helmet_items(hdata, dataset.format(k=run_.k), demo_key, cap)
    shas, bad, cut, truncated, theirs_scores, bad_scores = [], [], 0, 0, [], 0
    for i, row in enumerate(out["data"]):
        item = dict(row)
        truncated += item["context"].endswith(TRUNCATION_POSTFIX)
        model_utils.tokenize(item, out, tok, length, run_.gen)  # cuts item["context"] in place
        theirs = out["prompt_template"].format(**item)
        shas.append(sha(theirs)[:24])
        ours = _sample(task, length, i, tok)
        if ours is None:
            bad.append(i)
            print(f"  prompt mismatch {name} {length} #{i}: HELMET has it, ours has no item {i}")
            continue
        cut += ours.metadata["context_tokens_cut"] > 0
        if ours.prompt != theirs:
            bad.append(i)
            at = next((j for j, (a, b) in enumerate(zip(ours.prompt, theirs)) if a != b), None)
            print(f"  prompt mismatch {name} {length} #{i} at char {at}: ours {len(ours.prompt)}, HELMET {len(theirs)}")
        if name in METRICS:
            helmet = helmet_scores(name, out, dict(row))  # eval.py scores the item as loaded
            theirs_scores += helmet
            labels = [(p, m) for p in predictions(row["answer"]) for m in MODES]
            for (pred, mode), a, b in zip(labels, helmet, our_scores(task, ours), strict=True):
                if abs(a - b) > 1e-9:
                    bad_scores += 1
                    print(f"  metric mismatch {name} {length} #{i} {mode} {pred!r}: HELMET {a}, ours {b}")
    # fewer items than max_test_samples: the filters kept that many, and ours must not keep more
    if len(shas) < cap and _sample(task, length, len(shas), tok) is not None:
        bad.append(len(shas))
        print(f"  prompt mismatch {name} {length} #{len(shas)}: ours has it, HELMET keeps {len(shas)} items")
    capped = "" if cap == TEST_SAMPLES else f", max_test_samples {cap}"
    print(
        f"{name:24s} {length:>6d}  {len(shas)} prompts ({truncated} cut to the Llama-2 budget, {cut} by the "
        f"overflow rule{capped}), {len(bad)} mismatches; {len(theirs_scores)} scores, {bad_scores} mismatches"
    )
    return {
        "data": "hub",
        "task": name,
        "length": length,
        "max_test_samples": cap,
        "items": len(shas),
        "prompt_sha256": shas,
        "prompt_mismatches": len(bad),
        "truncated_llama2": truncated,
        "context_cut": cut,
        "scores": len(theirs_scores),
        "helmet_scores": [round(x, 9) for x in theirs_scores],
        "metric_mismatches": bad_scores,
    }


def our_samples(name: str, length: int, n: int, tok) -> list:
    """Our first n samples of a case under the reference protocol (data and stand-in from the env)."""
    from tasks.registry import get_task

    task = get_task(name)
    task.set_protocol("reference")
    return [task.sample(length, i, SEED, tok) for i in range(n)]
