"""Prompt and grade parity of our AA-LCR suite with the reference's own code; no model, no server.

    python benchmarks/aa_lcr_parity.py --nemo-skills /tmp/ref/Skills [--write-pins tests/aa_lcr/parity_pins.json]

AA-LCR has no code repository: its dataset card (huggingface.co/datasets/ArtificialAnalysis/AA-LCR)
gives the data and describes the judge. This script runs, from a NeMo-Skills checkout
(NVIDIA-NeMo/Skills, 8b18f39; files loaded by path, none copied here), the code of its aalcr benchmark:
- nemo_skills/dataset/aalcr/prepare.py: write_data_to_file (documents found with find_actual_file,
  the prompt built with construct_prompt, the n_tokens == input_tokens check) on the fixtures'
  questions as the hub's CSV loader gives them and their zip unpacked by Python's zipfile, as
  prepare_aalcr_data does;
- nemo_skills/prompt/utils.py: get_prompt + Prompt.fill with the configs the benchmark names,
  generic/default (the question turn) and judge/aalcr (the judge turn), filled from the prepared
  entries as its generation and judge steps fill them;
- nemo_skills/evaluation/metrics/aalcr_metrics.py: AALCRMetrics (its _get_score_dict: an empty
  generation is INCORRECT, else is_aalcr_correct of the judgement) and its pass@1 judge_correct.
Imports that are no part of the rules are replaced by small stand-ins: tiktoken (cl100k_base cannot
be had offline; both sides count with one stand-in, count()), datasets, nemo_skills.utils' logger
helpers, the code-execution and few-shot modules prompt/utils.py imports. nested_dataclass is the
checkout's own function, taken from nemo_skills/utils.py (whose other imports are not installed).

Compared, on tests/aa_lcr/fixtures (the released layout), for each question:
- the question prompt: the prepared entry's "question" against our sample's input, both document
  layouts (the released zip, and it unpacked), and Prompt.fill's messages against the turns our
  pipeline sends (harness.pipeline.reasoning.chat_messages), byte for byte;
- the judge prompt: judge/aalcr's Prompt.fill for each canned answer against ours
  (tasks.aa_lcr.prompts.judge_prompt of the sample), byte for byte;
- grades: each canned answer (the answer, another answer, empty, whitespace) under each canned judge
  reply (CORRECT/INCORRECT in several casings and with trailing words, and malformed replies):
  AALCRMetrics' judge_correct against our score_cut with the judge replaced by the reply; the judge
  calls ours made are counted (none for an empty answer, one per readable reply, ATTEMPTS for a
  malformed one);
- the headline: AALCRMetrics' pass@1 judge_correct against our mean x100, per reply scenario.
Not compared, reported: an answer cut by the generation budget is INCORRECT here without a judge
call; NeMo-Skills has no such rule (it would ask its judge), so those grades are ours alone.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import sys
import tempfile
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import (  # after the sys.path lines above
    CountingEncoding,
    load_file,
    sha,
    stand_in,
    write_json,
)

DATA = ROOT / "tests" / "aa_lcr" / "fixtures"
WINDOW = 1 << 21  # nothing of the fixtures is left out: the parity is of prompts and grades
REFERENCE = "NVIDIA-NeMo/Skills 8b18f39"

# canned answers, by kind ("answer" is the released answer; "cut" is graded by us alone)
ANSWERS = ("answer", "other", "empty", "whitespace")
REPLIES = {
    "CORRECT": "CORRECT",
    "correct": "correct",
    "Correct.": "Correct.",
    "padded": "  CORRECT\n",
    "CORRECT+words": "CORRECT - consistent with the official answer",
    "INCORRECT": "INCORRECT",
    "incorrect": "incorrect",
    "Incorrect.": "Incorrect.",
    "bold": "**CORRECT**",
    "sentence": "The candidate answer is CORRECT.",
    "empty": "",
}


def count(text: str) -> int:
    """The stand-in cl100k_base counter both sides use (about 4 UTF-8 bytes a token)."""
    return len(text.encode("utf-8")) // 4 + 1


def _function_from(path: Path, name: str, namespace: dict):
    """One top-level function of a source file, executed alone (its module's imports are not installed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace[name]


def _stand_ins(nemo: Path) -> None:
    """The references' imports that are no part of the rules."""
    import dataclasses

    names = {n: getattr(dataclasses, n) for n in ("MISSING", "dataclass", "fields", "is_dataclass")}
    nested_dataclass = _function_from(nemo / "nemo_skills" / "utils.py", "nested_dataclass", names)
    stand_in("tiktoken", get_encoding=lambda name: CountingEncoding(count))
    stand_in("datasets", load_dataset=lambda *a, **k: None)
    stand_in("nemo_skills")
    stand_in(
        "nemo_skills.utils",
        get_logger_name=lambda file: "aa-lcr-parity",
        setup_logging=lambda **kw: None,
        nested_dataclass=nested_dataclass,
    )
    stand_in("nemo_skills.code_execution")
    stand_in("nemo_skills.code_execution.utils", format_code_output=lambda **kw: "")
    stand_in("nemo_skills.prompt")
    stand_in("nemo_skills.prompt.few_shot_examples", examples_map={})
    stand_in("nemo_skills.evaluation")
    stand_in("nemo_skills.evaluation.metrics")


def load_references(nemo: Path) -> types.SimpleNamespace:
    _stand_ins(nemo)
    ns = nemo / "nemo_skills"
    load_file("nemo_skills.evaluation.metrics.base", ns / "evaluation" / "metrics" / "base.py", register=True)
    prompt_utils = load_file("nemo_skills.prompt.utils", ns / "prompt" / "utils.py", register=True)
    config_dir = str(ns / "prompt" / "config")
    return types.SimpleNamespace(
        prepare=load_file("ns_aalcr_prepare", ns / "dataset" / "aalcr" / "prepare.py", register=True),
        settings=load_file("ns_aalcr_settings", ns / "dataset" / "aalcr" / "__init__.py", register=True),
        metrics=load_file("ns_aalcr_metrics", ns / "evaluation" / "metrics" / "aalcr_metrics.py", register=True),
        question_prompt=prompt_utils.get_prompt("generic/default", config_dir=config_dir),
        judge_prompt=prompt_utils.get_prompt("judge/aalcr", config_dir=config_dir),
    )


def released_rows(data: Path = DATA) -> list[dict]:
    """The questions as the hub's CSV loader gives them (datasets' csv builder reads with pandas)."""
    import pandas as pd  # type: ignore[import-untyped]

    return pd.read_csv(data / "AA-LCR_Dataset.csv").to_dict("records")


def reference_entries(refs, data: Path = DATA) -> list[dict]:
    """prepare.py's write_data_to_file on the rows, the zip unpacked by zipfile as prepare_aalcr_data does."""
    with tempfile.TemporaryDirectory() as tmp:
        zipfile.ZipFile(data / "extracted_text" / "AA-LCR_extracted-text.zip").extractall(tmp)
        out = Path(tmp) / "test.jsonl"
        refs.prepare.write_data_to_file(out, released_rows(data), str(Path(tmp) / "lcr"), None, "cl100k_base")
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def answers(answer: str) -> dict[str, str]:
    return {"answer": answer, "other": "I could not find it in the documents.", "empty": "", "whitespace": " \n\t "}


@contextlib.contextmanager
def our_task(folder: Path):
    """Our aa_lcr task on `folder`, its judge configured (never reached: ask is replaced per grade)."""
    from tasks.aa_lcr import data
    from tasks.aa_lcr.tasks import AALCR

    env = {data.ENV_VAR: str(folder), "HARNESS_JUDGE_BASE_URL": "http://judge.invalid/v1", "HARNESS_JUDGE_MODEL": "j"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    data.clear_cache()
    try:
        task = AALCR()
        task.task_lengths(None, WINDOW, None)
        yield task
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        data.clear_cache()


def our_samples(task, tokenizer) -> list:
    return [task.sample(WINDOW, i, 0, tokenizer) for i in range(task.num_samples_with_tokenizer(WINDOW, tokenizer))]


def our_grade(task, prediction: str, sample, reply: str, cut: bool = False) -> tuple[float, int]:
    """(our score, judge calls) with the judge replaced by one that always says `reply`."""
    from harness.models import judge as J

    calls: list[str] = []

    def ask(cfg, prompt, max_tokens):
        calls.append(prompt)
        return reply

    real, J.ask = J.ask, ask
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # (a malformed reply's line, once per grade)
            return task.score_cut(prediction, sample, cut), len(calls)
    finally:
        J.ask = real


def unpacked(tmp: Path) -> Path:
    """The fixtures with the zip unpacked beside the CSV (the other layout our loader reads)."""
    import shutil

    tmp.mkdir()
    shutil.copy(DATA / "AA-LCR_Dataset.csv", tmp / "AA-LCR_Dataset.csv")
    zipfile.ZipFile(DATA / "extracted_text" / "AA-LCR_extracted-text.zip").extractall(tmp)
    return tmp


def compare_prompts(refs, entries: list[dict], samples: list, unpacked_samples: list) -> tuple[list[dict], int]:
    """Per question: the prompt hashes, and the count of byte mismatches against the reference."""
    from harness.pipeline.reasoning import chat_messages
    from tasks.aa_lcr.prompts import judge_prompt

    cases, bad = [], 0
    for entry, s, u in zip(entries, samples, unpacked_samples):
        ref_messages = refs.question_prompt.fill(entry)
        ours_messages = list(chat_messages(s, None))
        bad += (entry["question"] != s.input) + (u.input != s.input) + (ref_messages != ours_messages)
        judge = {}
        for kind, text in answers(entry["expected_answer"]).items():
            ref_turn = refs.judge_prompt.fill({**entry, "generation": text})
            ours = judge_prompt(s.input, s.references[0], text)
            bad += ref_turn != [{"role": "user", "content": ours}]
            judge[kind] = sha(ours)
        cases.append({
            "index": s.index, "row": s.metadata["row"], "question_id": str(entry["index"]),
            "prompt_sha256": sha(s.input), "messages_sha256": sha(json.dumps(ours_messages, ensure_ascii=False)),
            "judge_sha256": judge,
        })  # fmt: skip
    return cases, bad


def compare_grades(refs, task, entries: list[dict], samples: list) -> tuple[list[dict], int]:
    scores, bad = [], 0
    for entry, s in zip(entries, samples):
        for kind, text in answers(entry["expected_answer"]).items():
            for reply_kind, reply in REPLIES.items():
                judged = refs.metrics.AALCRMetrics()._get_score_dict({"generation": text, "judgement": reply})
                ref = float(judged["judge_correct"])
                ours, calls = our_grade(task, text, s, reply)
                bad += ours != ref
                scores.append({"index": s.index, "answer": kind, "reply": reply_kind, "reference": ref, "ours": ours,
                               "judge_calls": calls})  # fmt: skip
    return scores, bad


def compare_headlines(refs, entries: list[dict], scores: list[dict]) -> tuple[list[dict], int]:
    """Per reply scenario (every question answered with its answer, the judge saying `reply`)."""
    out, bad = [], 0
    for reply_kind, reply in REPLIES.items():
        metrics = refs.metrics.AALCRMetrics()
        for entry in entries:
            metrics.update([{**entry, "generation": entry["expected_answer"], "judgement": reply}])
        with contextlib.redirect_stdout(None):  # (it prints its category tables)
            ref = float(metrics.get_metrics()["pass@1"]["judge_correct"])
        mine = [p["ours"] for p in scores if p["reply"] == reply_kind and p["answer"] == "answer"]
        ours = 100.0 * sum(mine) / len(mine)
        bad += abs(ours - ref) > 1e-9
        out.append({"reply": reply_kind, "reference": ref, "ours": ours})
    return out, bad


def cut_grades(task, samples: list) -> list[dict]:
    """Ours alone: the released answer cut by the budget, under a judge that would say CORRECT."""
    return [{"index": s.index, "ours": our_grade(task, s.references[0], s, "CORRECT", cut=True)} for s in samples]


def run(nemo: Path, tokenizer_dir: str | None) -> dict:
    from harness.models.embedded import build_tokenizer
    from harness.models.tokenization import load_tokenizer

    refs = load_references(nemo)
    entries = reference_entries(refs)
    with tempfile.TemporaryDirectory() as tmp:
        if tokenizer_dir is None:
            tokenizer_dir = str(build_tokenizer(Path(tmp) / "tok"))
        tok = load_tokenizer(tokenizer_dir)
        with our_task(unpacked(Path(tmp) / "unpacked")) as t:
            unpacked_samples = our_samples(t, tok)
    with our_task(DATA) as task:
        samples = our_samples(task, tok)
        cases, prompt_bad = compare_prompts(refs, entries, samples, unpacked_samples)
        scores, score_bad = compare_grades(refs, task, entries, samples)
        headlines, headline_bad = compare_headlines(refs, entries, scores)
        cut = cut_grades(task, samples)
    return {
        "_source": f"benchmarks/aa_lcr_parity.py --write-pins: {REFERENCE} (dataset/aalcr/prepare.py write_data_to_file, "
        "prompt/utils.py get_prompt generic/default and judge/aalcr, evaluation/metrics/aalcr_metrics.py AALCRMetrics) "
        "on tests/aa_lcr/fixtures, token counts by the stand-in count()",
        "judge_model_default": refs.settings.JUDGE_PIPELINE_ARGS["model"],
        "cases": cases,
        "scores": scores,
        "headlines": headlines,
        "cut": [{"index": c["index"], "ours": c["ours"][0], "judge_calls": c["ours"][1]} for c in cut],
        "totals": {
            "questions": len(entries),
            "prompts_compared": len(cases) * (3 + len(ANSWERS)),
            "scores_compared": len(scores),
            "headlines_compared": len(headlines),
            "prompt_mismatches": prompt_bad,
            "score_mismatches": score_bad,
            "headline_mismatches": headline_bad,
            "question_count": len(samples) - len(entries),
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nemo-skills", required=True, type=Path, help="a NeMo-Skills checkout (8b18f39)")
    p.add_argument("--tokenizer", help="a tokenizer folder for our samples' token counts (default: the tests' BPE)")
    p.add_argument("--write-pins", type=Path, help="write the results here (tests/aa_lcr/parity_pins.json)")
    args = p.parse_args(argv)
    out = run(args.nemo_skills, args.tokenizer)
    t = out["totals"]
    print(
        f"AA-LCR parity against {REFERENCE}: {t['questions']} questions, {t['prompts_compared']} prompts "
        f"({t['prompt_mismatches']} mismatches), {t['scores_compared']} grades ({t['score_mismatches']} mismatches), "
        f"{t['headlines_compared']} headlines ({t['headline_mismatches']} mismatches); questions ours minus "
        f"reference: {t['question_count']}"
    )
    print(
        f"cut answers (ours alone): {[c['ours'] for c in out['cut']]} with {sum(c['judge_calls'] for c in out['cut'])} judge calls"
    )
    if args.write_pins:
        write_json(args.write_pins, out)
    mismatches = t["prompt_mismatches"] + t["score_mismatches"] + t["headline_mismatches"] + abs(t["question_count"])
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
