"""HELMET parity: our "reference" protocol against princeton-nlp/HELMET's own code, byte for byte.

    .venv/bin/python benchmarks/helmet_parity.py --helmet /tmp/ref/HELMET [--data tests/helmet/fixtures]
        [--pins tests/helmet/parity_pins.json]

Given a checkout of HELMET (4526dfb; its utils.py needs pytrec_eval: `pip install --target DIR
pytrec-eval-terrier` and put DIR on PYTHONPATH), for every task and length that the data folder
(HELMET's data.tar.gz layout; default: the fixture files) holds:

  prompts  HELMET's data.load_data(args, dataset, test_file, demo_file) with eval.py's seeding
           (random.seed(seed) first, max_test_samples=100, shots=2), each item through
           model_utils.tokenize at the config's input_max_length / generation_max_length with a
           local tokenizer (the test BPE of harness.models.embedded: no model, no hub), which cuts the
           context's end in place when the prompt overflows; the item's prompt_template.format(**item)
           is compared with our Sample.prompt at the same index;
  metrics  the same predictions scored by HELMET's post_process (RAG, JSON KV, RULER, MS MARCO's
           NDCG@10) or eval_alce (str_em, qampari_rec_top5) and by our Task.score.

ICL runs HELMET's load_icl on tests/helmet/icl_fixture (tasks.icl's layout, handed to it in place
of the hub's CogComp/trec). LongQA and Summ (NarrativeQA, InfiniteBench, Multi-LexSum: hub datasets,
Llama-2 length filters) run HELMET's loaders on generated rows with a stand-in Llama-2 tokenizer:
benchmarks/helmet_parity_long.py; what is patched inside HELMET's process for the hub datasets,
that tokenizer and the unseeded demo draws: benchmarks/helmet_parity_hub.py.

It prints one line per task and length and every mismatch, and with --pins writes the counts and
the sha256 of HELMET's prompts, which tests/helmet/test_reference.py (released files) and
tests/helmet/test_long_parity.py (LongQA / Summ) pin without the checkout.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

# the modules beside this script (its folder is sys.path's first entry when it runs)
import helmet_parity_hub as hub
import helmet_parity_long as long_docs
from parity_kit import sha, write_json  # after the sys.path lines above

# (our task, HELMET dataset name, length) -> compared when the length's file is in the data folder
CASES = [
    ("helmet_json_kv", "json_kv"),
    ("helmet_niah_mk_2", "ruler_niah_mk_2"),
    ("helmet_niah_mk_3", "ruler_niah_mk_3"),
    ("helmet_niah_mv", "ruler_niah_mv"),
    ("helmet_nq", "kilt_nq"),
    ("helmet_triviaqa", "kilt_triviaqa"),
    ("helmet_hotpotqa", "kilt_hotpotqa"),
    ("helmet_popqa", "kilt_popqa_3"),
    ("helmet_msmarco", "msmarco_rerank_psg"),
    ("helmet_alce_asqa", "alce_asqa_{k}"),
    ("helmet_alce_qampari", "alce_qampari_{k}"),
    ("helmet_icl_trec_coarse", "icl_trec_coarse_{k}shot_balance"),
]
ICL_LENGTHS = (8192, 16384)  # the ICL fixture's train split is small: 400 and 800 shots reuse rows
ICL_ITEMS = 20  # of HELMET's 500 test items (each is a few thousand tokens)
# predictions scored by both metric codes (the item's own answer is added as the first one)
PREDICTIONS = [
    " Person1 Smith",
    " The answer is P. 2 Smith.\nmore text",
    " nobody",
    "",
    " 1 > 4 > 10 > 3",
    " [ID: 2] > [ID: 1]",
    " River 1 [1], Castle 1 [2]. Comet 2 [3].",
]
SEED = 42


def _tokenizer(path: str | None):
    from harness.models.tokenization import load_tokenizer

    if path is None:
        from harness.models.embedded import build_tokenizer

        path = str(build_tokenizer(Path(os.environ.get("TMPDIR", "/tmp")) / "helmet-parity-tok"))
    return load_tokenizer(path)


def _helmet(checkout: Path):
    sys.path.insert(0, str(checkout))
    import data as hdata  # type: ignore[import-not-found, unused-ignore]  # HELMET's data.py
    import eval_alce  # type: ignore[import-not-found]
    import model_utils  # type: ignore[import-not-found]

    return hdata, model_utils, eval_alce


def _our_truth(task, item, sample) -> list[str]:
    return [f" {sample.references[0]}"] if sample.references else []


def _helmet_score(name: str, hdata_out: dict, item: dict, output: str, eval_alce) -> float:
    """HELMET's per-sample metric in [0, 1] for `output` (the system template already prepended
    where eval.py prepends it)."""
    if name.startswith("helmet_icl"):
        mets, _ = hdata_out["post_process"]({"output": output}, item)
        return float(mets["exact_match"])
    if name.startswith("helmet_alce"):
        from tasks.helmet.metrics import alce_clean

        clean = eval_alce.remove_citations(alce_clean(output))
        row = {**item, "output": clean}
        if name == "helmet_alce_asqa":
            return eval_alce.compute_str_em([row])[0] / 100
        return eval_alce.compute_qampari_f1([row])["qampari_rec_top5"] / 100
    mets, _ = hdata_out["post_process"]({"output": output}, item)
    key = {"helmet_msmarco": "NDCG@10"}.get(name, "ruler_recall" if "niah" in name else "substring_exact_match")
    return float(mets[key])


def run(
    checkout: Path, folder: Path, tokenizer_path: str | None, icl_folder: Path | None = None, hub_data: bool = True
) -> dict:
    """Both parts (released files, then LongQA / Summ unless hub_data is False); the report."""
    os.environ.setdefault("HF_DATASETS_CACHE", str(Path(os.environ.get("TMPDIR", "/tmp")) / "helmet-parity-ds"))
    hdata, model_utils, eval_alce = _helmet(checkout)
    tok = _tokenizer(tokenizer_path)
    trec = {"CogComp/trec": hub.trec_hub(icl_folder)} if icl_folder is not None else {}
    with tempfile.TemporaryDirectory(prefix="helmet-parity-") as work:
        if hub_data:
            llama2, long_folder, rows = long_docs.prepare(Path(work))
            long_docs.serve_rows(hdata, rows, llama2, trec)
        else:
            hub.serve(hdata, trec)
        parts = {"released": _released(hdata, model_utils, eval_alce, tok, folder, icl_folder)}
        if hub_data:
            parts["hub"] = long_docs.run(hdata, model_utils, tok, long_folder, llama2)
    report: dict = {"cases": {}}
    for part, counts in parts.items():
        report["cases"].update(counts.pop("cases"))
        report[part] = counts
        print(
            f"{part}: {counts['prompts']} prompts, {counts['prompt_mismatches']} prompt mismatches; "
            f"{counts['scores']} scores, {counts['metric_mismatches']} metric mismatches"
        )
    for key in ("prompts", "prompt_mismatches", "scores", "metric_mismatches"):
        report[key] = sum(counts[key] for counts in parts.values())
    print(
        f"total: {report['prompts']} prompts, {report['prompt_mismatches']} prompt mismatches; "
        f"{report['scores']} scores, {report['metric_mismatches']} metric mismatches"
    )
    return report


def _released(hdata, model_utils, eval_alce, tok, folder: Path, icl_folder: Path | None) -> dict:
    """HELMET's released files (data.tar.gz's layout) and ICL: every case whose file is in `folder`."""
    from tasks.helmet import reference
    from tasks.registry import get_task

    os.environ["HARNESS_HELMET"] = str(folder)
    if icl_folder is not None:
        os.environ["HARNESS_ICL_DATA"] = str(icl_folder)
    report: dict = {"cases": {}, "prompt_mismatches": 0, "metric_mismatches": 0, "prompts": 0, "scores": 0}
    for name, dataset in CASES:
        task = get_task(name)
        task.set_protocol("reference")
        for length, run_ in reference.RUNS[name].items():
            icl = name.startswith("helmet_icl")
            if icl and (icl_folder is None or length not in ICL_LENGTHS):
                continue
            if not icl and not (folder / run_.test).is_file():
                continue
            args = SimpleNamespace(max_test_samples=100, shots=2, seed=SEED, popularity_threshold=3)
            random.seed(SEED)  # eval.run_test, before load_data
            demo = str(folder / run_.demo) if run_.demo else ""
            if icl:
                args.max_test_samples = 500
            out = hdata.load_data(args, dataset.format(k=run_.k), str(folder / run_.test), demo)
            shas, bad, scored, bad_scores = [], [], 0, []
            for i, item in enumerate(out["data"]):
                if icl and i >= ICL_ITEMS:
                    break
                item = dict(item)
                model_utils.tokenize(item, out, tok, length, run_.gen)  # cuts item["context"] in place
                theirs = out["prompt_template"].format(**item)
                ours = task.sample(length, i, SEED, tok)
                shas.append(sha(theirs)[:24])
                if ours.prompt != theirs:
                    bad.append(i)
                    at = next((j for j, (a, b) in enumerate(zip(ours.prompt, theirs)) if a != b), None)
                    print(
                        f"  prompt mismatch {name} {length} #{i} at char {at}: ours {len(ours.prompt)}, HELMET {len(theirs)}"
                    )
                system = out["system_template"].format(**item)
                for pred in _our_truth(task, item, ours) + PREDICTIONS:
                    # no chat template: eval.py prepends the system template (ALCE's "Answer:" too)
                    theirs_score = _helmet_score(name, out, item, system + pred, eval_alce)
                    ours_score = task.score(pred, ours)
                    scored += 1
                    if abs(theirs_score - ours_score) > 1e-5:  # HELMET rounds NDCG to 5 decimals
                        bad_scores.append((i, pred, theirs_score, ours_score))
                        print(
                            f"  metric mismatch {name} {length} #{i} {pred!r}: HELMET {theirs_score}, ours {ours_score}"
                        )
            report["cases"][f"{name}@{length}"] = {
                "data": "released",
                "items": len(shas),
                "prompt_sha256": shas,
                "prompt_mismatches": len(bad),
                "scores": scored,
                "metric_mismatches": len(bad_scores),
            }
            report["prompts"] += len(shas)
            report["scores"] += scored
            report["prompt_mismatches"] += len(bad)
            report["metric_mismatches"] += len(bad_scores)
            print(
                f"{name:24s} {length:>6d}  {len(shas)} prompts, {len(bad)} mismatches; {scored} scores, {len(bad_scores)} mismatches"
            )
    return report


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--helmet", required=True, type=Path, help="a checkout of princeton-nlp/HELMET")
    p.add_argument("--data", type=Path, default=ROOT / "tests/helmet/fixtures", help="data in data.tar.gz's layout")
    p.add_argument("--tokenizer", help="a local tokenizer folder (default: the test BPE)")
    p.add_argument(
        "--icl-data", type=Path, default=ROOT / "tests/helmet/icl_fixture", help="tasks.icl's layout (trec_coarse)"
    )
    p.add_argument("--pins", type=Path, help="write the counts and HELMET's prompt hashes here (JSON)")
    p.add_argument("--no-hub-data", action="store_true", help="skip LongQA / Summ (generated hub rows, a few minutes)")
    a = p.parse_args()
    report = run(a.helmet.resolve(), a.data.resolve(), a.tokenizer, a.icl_data.resolve(), not a.no_hub_data)
    if a.pins:
        write_json(a.pins, report, ensure_ascii=True, sort_keys=True)
    return 1 if report["prompt_mismatches"] or report["metric_mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
