"""Prompt, bin and score parity of our OpenAI-MRCR suite with the references' own code; no model, no server.

    python benchmarks/mrcr_parity.py --nemo-skills /tmp/ref/Skills --lm-eval /tmp/ref/lm-eval-mrcr \\
        --evalscope /tmp/ref/evalscope [--write-pins tests/mrcr/parity_pins.json]

OpenAI-MRCR has no code repository: its dataset card (huggingface.co/datasets/openai/mrcr) gives a
grade() function and the bins. This script runs, from the checkouts named on the command line, the
code of the harnesses that implement it (files loaded by path, none copied here):
- NeMo-Skills (NVIDIA-NeMo/Skills, 8b18f39): nemo_skills/dataset/mrcr/prepare.py's write_data_to_file
  (the released prompt column parsed into the messages its generation step sends with
  ++prompt_format=openai) and nemo_skills/evaluation/evaluator/mrcr.py's eval_mrcr (the card's grade,
  which it cites as the official grading function) run on a jsonl of canned predictions;
- lm-eval's MRCR task, as written by the author of lm-eval issue 3370 (jannalulu/lm-evaluation-harness,
  branch mrcr, 48ac0fb; lm-eval pull request 3754's own code is not public in a form we could fetch):
  lm_eval/tasks/mrcr/utils.py's doc_to_text (the one published text rendering, our "completion"
  protocol's) and process_results (the card's grade again);
- evalscope (modelscope/evalscope, fde259d): evalscope/benchmarks/openai_mrcr/utils.py's
  get_chatml_tok_cnt, get_token_count and bin_index_for (the card's bins: prompt + answer tokens).
Their imports that are no part of the rules (nemo_skills.utils' logger and file helpers, evalscope's
message classes, tiktoken) are replaced by small stand-ins. tiktoken's o200k_base file cannot be had
offline, so both sides count bin tokens with one stand-in counter (COUNT: 2 x UTF-8 bytes): the check
is of what is counted and where the edges fall, not of o200k_base itself.

Compared, on tests/mrcr/fixtures (the released layout), for each item of the three files:
- messages: NeMo-Skills' messages against ours (tasks.mrcr.data), as JSON, byte for byte;
- the chat prompt: NeMo-Skills' messages through the tokenizer's chat template as a chat server
  applies it (apply_chat_template(messages, tokenize=False, add_generation_prompt=True): the reference
  sends messages and renders nothing itself) against our "reference" sample as the pipeline renders it
  under --chat (harness.pipeline.reasoning.chat_prompt), byte for byte, and the turns it sends to a
  served model (chat_messages) against NeMo-Skills' messages;
- the completion prompt: lm-eval's doc_to_text against our "completion" sample's input (ours adds the
  answer prefix "\\n\\nAssistant:" after it, compared apart);
- bins: evalscope's bin_index_for against our record length;
- scores: 11 canned predictions per item (the answer; without its prefix; with a space before it; a
  space after the prefix; empty; the prefix alone; the wrong needle; the prefix in lower case; a
  trailing newline; half the answer; a 300-character text past the prefix) scored by NeMo-Skills'
  eval_mrcr, lm-eval's process_results and our reference-protocol score(); under our completion
  protocol our score of " " + prediction (the space "Assistant: " leaves) against lm-eval's;
- the headline: the mean of NeMo-Skills' scores per needle count and evalscope bin against the mean of
  ours per task and length.
Also reported, not counted as mismatches: the edge values where evalscope's bin_index_for (middle
bins [lo, hi)) and the card's text ((lo, hi], which we follow) disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import (  # after the sys.path lines above
    CountingEncoding,
    load_file,
    mismatch_status,
    sha,
    stand_in,
    tokenizer_folder,
    write_json,
)

DATA = ROOT / "tests" / "mrcr" / "fixtures"
NEEDLES = (2, 4, 8)
WINDOW = 1 << 21  # nothing of the fixtures is left out: the parity is of prompts, bins and scores
# A chat template with system turns, for the tests' BPE tokenizer (which has none)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def count(text: str) -> int:
    """The stand-in bin counter both sides use (o200k_base cannot be had offline)."""
    return 2 * len(text.encode("utf-8"))


def _stand_ins() -> None:
    """The references' imports that are no part of the rules."""
    stand_in("tiktoken", get_encoding=lambda name: CountingEncoding(count))
    stand_in("nemo_skills")
    stand_in("nemo_skills.utils", get_logger_name=lambda file: "mrcr-parity", unroll_files=lambda files: list(files))
    stand_in("evalscope")
    stand_in("evalscope.api")
    classes = ("ChatMessage", "ChatMessageAssistant", "ChatMessageSystem", "ChatMessageUser")
    stand_in("evalscope.api.messages", **{c: type(c, (), {"__init__": lambda self, content: None}) for c in classes})


def load_references(nemo: Path, lm_eval: Path, evalscope: Path) -> types.SimpleNamespace:
    _stand_ins()
    return types.SimpleNamespace(
        prepare=load_file("ns_mrcr_prepare", nemo / "nemo_skills" / "dataset" / "mrcr" / "prepare.py"),
        evaluator=load_file("ns_mrcr_evaluator", nemo / "nemo_skills" / "evaluation" / "evaluator" / "mrcr.py"),
        lm_eval=load_file("lm_eval_mrcr_utils", lm_eval / "lm_eval" / "tasks" / "mrcr" / "utils.py"),
        evalscope=load_file(
            "evalscope_mrcr_utils", evalscope / "evalscope" / "benchmarks" / "openai_mrcr" / "utils.py"
        ),
    )


def released_rows(needles: int, data: Path = DATA) -> list[dict]:
    """The file's rows as the hub's loader gives them (dicts of the released columns)."""
    import pyarrow.parquet as pq

    return pq.read_table(data / f"{needles}needle.parquet").to_pylist()


def predictions(row: dict) -> dict[str, str]:
    """The canned predictions for one released row (the grader's edge cases)."""
    prefix, answer = row["random_string_to_prepend"], row["answer"]
    rest = answer.removeprefix(prefix)
    messages = json.loads(row["prompt"])
    wrong = next((m["content"] for m in messages if m["role"] == "assistant" and m["content"] != rest), "another piece")
    return {
        "exact": answer,
        "no_prefix": rest,
        "space_before_prefix": " " + answer,
        "space_after_prefix": prefix + " " + rest,
        "empty": "",
        "prefix_only": prefix,
        "wrong_needle": prefix + wrong,
        "prefix_lowercase": prefix.lower() + rest,
        "trailing_newline": answer + "\n",
        "half": prefix + rest[: len(rest) // 2],
        "long_other": prefix + ("tapirs wander quietly through the misty forest " * 7)[:300],
    }


def reference_messages(refs, rows: list[dict]) -> list[list[dict]]:
    """NeMo-Skills' prepare.py write_data_to_file on the rows: each entry's "messages"."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "all.jsonl"
        refs.prepare.write_data_to_file(out, [dict(r) for r in rows], None, list(NEEDLES))
        return [json.loads(line)["messages"] for line in out.read_text(encoding="utf-8").splitlines()]


def nemo_scores(refs, rows: list[dict], preds: list[dict[str, str]]) -> list[dict[str, float]]:
    """NeMo-Skills' eval_mrcr over a jsonl of (generation, expected_answer, random_string_to_prepend)."""
    lines = [
        {"kind": k, "row": n, "generation": p, "expected_answer": r["answer"], "random_string_to_prepend": r["random_string_to_prepend"]}
        for n, (r, ps) in enumerate(zip(rows, preds))
        for k, p in ps.items()
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "output.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        refs.evaluator.eval_mrcr(types.SimpleNamespace(input_files=[str(path)]))
        graded = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    out: list[dict[str, float]] = [{} for _ in rows]
    for g in graded:
        out[g["row"]][g["kind"]] = float(g["seq_match_ratio"])
    return out


def reference_bin(refs, row: dict) -> int:
    """evalscope's bin of a row (its record_to_sample: prompt tokens + answer tokens), as an upper edge."""
    es, enc = refs.evalscope, CountingEncoding(count)
    total = es.get_chatml_tok_cnt(row["prompt"], enc) + es.get_token_count(row["answer"], enc)
    return es.OPENAI_MRCR_BINS[es.bin_index_for(total)][1]


def tokenizer_with_template(tokenizer_dir: str):
    from harness.models.tokenization import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def our_samples(needles: int, protocol: str, tok) -> dict[int, tuple]:
    """Our sample of every fixture row under a protocol, by row: (task, sample)."""
    from tasks.mrcr import bins
    from tasks.mrcr.tasks import TASKS

    task = TASKS[needles]()
    task.set_protocol(protocol)
    task.task_lengths(list(bins.BINS), WINDOW, None)
    out = {}
    for length in bins.BINS:
        if task.num_samples_available(length):
            for k in range(task.num_samples_with_tokenizer(length, tok)):
                s = task.sample(length, k, 42, tok)
                out[s.metadata["row"]] = (task, s)
    return out


def use_stand_in_counter() -> None:
    """Our bins counted with the references' stand-in counter (see the docstring); the counts our
    side keeps on disk go to a temporary cache, never beside real o200k_base counts."""
    import os

    from tasks.mrcr import bins, tasks

    os.environ["HARNESS_CACHE"] = tempfile.mkdtemp(prefix="mrcr-parity-cache-")
    bins.reference_counter = lambda: count
    tasks._BIN_TOKENS.clear()
    tasks._PROMPT_TOKENS.clear()


def _prompt_cases(refs, needles: int, rows: list[dict], tok, chat: dict, comp: dict) -> list[dict]:
    from harness.pipeline.reasoning import chat_messages, chat_prompt
    from tasks.mrcr import data

    ours_messages = data.load_items(needles)
    ref_messages = reference_messages(refs, rows)
    cases = []
    for n, row in enumerate(rows):
        (_, cs), (_, ps) = chat[n], comp[n]
        ref_chat = tok.apply_chat_template(ref_messages[n], tokenize=False, add_generation_prompt=True)
        ref_text = refs.lm_eval.doc_to_text(dict(row))
        ref_json = json.dumps(ref_messages[n], ensure_ascii=False)
        mine = json.dumps(list(ours_messages[n].messages), ensure_ascii=False)
        sent = json.dumps(list(chat_messages(cs, None)), ensure_ascii=False)
        cases.append(
            {
                "needles": needles, "row": n,
                "messages_sha256": sha(ref_json), "chat_sha256": sha(ref_chat), "completion_sha256": sha(ref_text),
                "bin": reference_bin(refs, row), "our_bin": cs.length,
                "messages_match": mine == ref_json == sent,
                "chat_match": chat_prompt(tok, cs, None) == ref_chat and cs.answer_prefix == "" and cs.metadata["conversation"],
                "completion_match": ps.input == ref_text and ps.answer_prefix == "\n\nAssistant:",
            }
        )  # fmt: skip
    return cases


def _score_cases(refs, needles: int, rows: list[dict], chat: dict, comp: dict) -> list[dict]:
    preds = [predictions(r) for r in rows]
    nemo = nemo_scores(refs, rows, preds)
    out = []
    for n, row in enumerate(rows):
        (task, cs), (ctask, ps) = chat[n], comp[n]
        for kind, pred in preds[n].items():
            lm = float(refs.lm_eval.process_results(dict(row), [pred])["mrcr_score"])
            ours, ours_completion = task.score(pred, cs), ctask.score(" " + pred, ps)
            out.append(
                {
                    "needles": needles, "row": n, "kind": kind, "reference": nemo[n][kind], "lm_eval": lm,
                    "ours": ours, "ours_completion": ours_completion,
                    "match": ours == nemo[n][kind] == lm, "completion_match": ours_completion == lm,
                }
            )  # fmt: skip
    return out


def _headlines(cases: list[dict], scores: list[dict]) -> list[dict]:
    ref_bin = {(c["needles"], c["row"]): c["bin"] for c in cases}
    our_bin = {(c["needles"], c["row"]): c["our_bin"] for c in cases}
    out = []
    for needles in NEEDLES:
        for b in sorted({b for (n, _), b in ref_bin.items() if n == needles}):
            theirs = [s["reference"] for s in scores if s["needles"] == needles and ref_bin[needles, s["row"]] == b]
            mine = [s["ours"] for s in scores if s["needles"] == needles and our_bin[needles, s["row"]] == b]
            t, m = sum(theirs) / len(theirs), (sum(mine) / len(mine) if mine else None)
            out.append(
                {"needles": needles, "bin": b, "reference": t, "ours": m, "match": m is not None and abs(t - m) < 1e-12}
            )
    return out


def edge_disagreements(refs) -> list[int]:
    """Token counts at the bins' edges where evalscope's code and the card's text ((lo, hi]) differ."""
    from tasks.mrcr import bins

    es = refs.evalscope
    values = sorted({v for hi in bins.BINS for v in (hi - 1, hi, hi + 1)} | {1, 4095, 4096})
    return [v for v in values if es.OPENAI_MRCR_BINS[es.bin_index_for(v)][1] != (bins.bin_of(v) or 0)]


def compare(refs, tokenizer_dir: str, data: Path = DATA) -> dict:
    import os

    from tasks.mrcr import data as mrcr_data

    os.environ[mrcr_data.ENV_VAR] = str(data)
    mrcr_data.clear_cache()
    use_stand_in_counter()
    tok = tokenizer_with_template(tokenizer_dir)
    cases: list[dict] = []
    scores: list[dict] = []
    for needles in NEEDLES:
        rows = released_rows(needles, data)
        chat, comp = our_samples(needles, "reference", tok), our_samples(needles, "completion", tok)
        cases += _prompt_cases(refs, needles, rows, tok, chat, comp)
        scores += _score_cases(refs, needles, rows, chat, comp)
    heads = _headlines(cases, scores)
    totals = {
        "prompts_compared": len(cases),
        "bins_seen": len({c["bin"] for c in cases}),
        "messages_mismatches": sum(not c["messages_match"] for c in cases),
        "chat_prompt_mismatches": sum(not c["chat_match"] for c in cases),
        "completion_prompt_mismatches": sum(not c["completion_match"] for c in cases),
        "bin_mismatches": sum(c["bin"] != c["our_bin"] for c in cases),
        "scores_compared": len(scores),
        "score_mismatches": sum(not s["match"] for s in scores),
        "completion_score_mismatches": sum(not s["completion_match"] for s in scores),
        "headlines_compared": len(heads),
        "headline_mismatches": sum(not h["match"] for h in heads),
    }
    return {"cases": cases, "scores": scores, "headlines": heads, "edges": edge_disagreements(refs), "totals": totals}


def report(result: dict) -> None:
    print(f"{'needles':>7} {'row':>3} {'bin':>7} {'ours':>7}  messages chat completion")
    for c in result["cases"]:
        flags = " ".join("ok" if c[k] else "MISMATCH" for k in ("messages_match", "chat_match", "completion_match"))
        print(f"{c['needles']:>7} {c['row']:>3} {c['bin']:>7} {c['our_bin']:>7}  {flags}")
    print("\nheadline (mean score per needle count and bin):")
    for h in result["headlines"]:
        print(f"  {h['needles']} needles, bin {h['bin']:>7}: reference {h['reference']:.6f}  ours {h['ours']:.6f}")
    print("\nedge counts where evalscope's bins ([lo, hi) in the middle) and the card's text differ:", result["edges"])
    print("\ntotals:", json.dumps(result["totals"]))


def pins(result: dict) -> dict:
    return {
        "_source": "benchmarks/mrcr_parity.py --write-pins: NeMo-Skills 8b18f39 (prepare.py write_data_to_file, "
        "evaluator eval_mrcr), lm-eval MRCR task of jannalulu/lm-evaluation-harness 48ac0fb (doc_to_text, "
        "process_results), evalscope fde259d (bin_index_for) on tests/mrcr/fixtures with the tests' BPE tokenizer "
        "and CHAT_TEMPLATE, bin tokens counted by the stand-in count()",
        "cases": [
            {k: c[k] for k in ("needles", "row", "messages_sha256", "chat_sha256", "completion_sha256", "bin")}
            for c in result["cases"]
        ],
        "scores": [{k: s[k] for k in ("needles", "row", "kind", "reference", "lm_eval")} for s in result["scores"]],
        "headlines": [{k: h[k] for k in ("needles", "bin", "reference")} for h in result["headlines"]],
        "edges": result["edges"],
        "totals": result["totals"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nemo-skills", required=True, type=Path, help="a checkout of NVIDIA-NeMo/Skills")
    ap.add_argument("--lm-eval", required=True, type=Path, help="jannalulu/lm-evaluation-harness, branch mrcr")
    ap.add_argument("--evalscope", required=True, type=Path, help="a checkout of modelscope/evalscope")
    ap.add_argument("--data", type=Path, default=DATA, help="a folder with <n>needle.parquet (the released layout)")
    ap.add_argument("--tokenizer", help="tokenizer folder (default: the tests' BPE, built in a temp folder)")
    ap.add_argument("--write-pins", type=Path, help="write the references' results here (JSON)")
    args = ap.parse_args(argv)
    args.tokenizer = tokenizer_folder(args.tokenizer, "mrcr-parity-tok-")
    refs = load_references(args.nemo_skills.resolve(), args.lm_eval.resolve(), args.evalscope.resolve())
    result = compare(refs, args.tokenizer, args.data.resolve())
    report(result)
    if args.write_pins:
        write_json(args.write_pins, pins(result))
    return mismatch_status(result["totals"])


if __name__ == "__main__":
    sys.exit(main())
