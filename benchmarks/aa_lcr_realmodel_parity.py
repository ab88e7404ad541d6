"""AA-LCR on a real model behind `vllm serve`: NeMo-Skills' own client and judge step beside `harness eval`.

    python benchmarks/aa_lcr_realmodel_parity.py --nemo-skills /tmp/ref/Skills-8b18f39 --model MODEL_DIR \\
        --ref-site /tmp/aalcr-refsite
    python benchmarks/aa_lcr_realmodel_parity.py ... --report      # re-print the tables from the cache

MODEL_DIR is a transformers folder of SmolLM2-135M-Instruct (`harness convert smollm2-135m-instruct
--out DIR`, 8192 positions). One vLLM server (benchmarks/parity_kit.py's VLLMServer) serves it under
its path; both pipelines reach it through a recording proxy, and the same served model answers the
questions and judges the answers on both sides. SmolLM2 as a judge is there for parity only (the same
judge requests must get the same replies and the same grades): its verdicts are no meaningful grade.

Data: AA-LCR's real document sets are ~100K tokens, far beyond SmolLM2's 8192 positions, and the hub
is not reachable; the run writes small fixtures in the released layout (AA-LCR_Dataset.csv and
extracted_text/AA-LCR_extracted-text.zip, lcr/<category>/<set id>/<file>) to out/data: the committed
tests/aa_lcr/fixtures (4 short sets, one set longer than the served context) plus 5 invented sets
of about 1,000 to 5,000 SmolLM2 tokens (the last one too long for our 4096-token answer budget).
input_tokens is the stand-in cl100k_base count of benchmarks/aa_lcr_parity.py, as for the fixtures.

The reference side runs the code of a NeMo-Skills checkout (NVIDIA-NeMo/Skills 8b18f39), loaded by
path, nothing of it copied or edited: dataset/aalcr/prepare.py's write_data_to_file on the rows (via
benchmarks/aa_lcr_parity.py), prompt/utils.py's get_prompt(...).fill with generic/default (the answer
step) and judge/aalcr (the judge step, ++generation_key=judgement), inference/model/vllm.py's
VLLMModel with base.py's generate_async under inference/generate.py's InferenceConfig defaults
(temperature 0, top_p 0.95, seed 0, no max_tokens), all items at once as GenerationTask's async loop
sends them, then evaluation/metrics/aalcr_metrics.py's AALCRMetrics (pass@1 judge_correct). What is
set from outside, and only that:
- the server entries: model = MODEL_DIR (the served name), base_url = the proxy, server_type vllm for
  both steps (the benchmark's JUDGE_PIPELINE_ARGS name gpt-4.1 behind api.openai.com; a self-hosted
  judge is a vllm server_type);
- litellm (not installed) is replaced by the real `openai.AsyncOpenAI` (--ref-site DIR, e.g.
  `pip install --target DIR openai httpx`): base.py's request fields are sent as built, the ones set to None
  left out as litellm leaves them out, the provider prefix ("openai/") taken off the model name;
- GenerationTask's loop (generate.py, which needs hydra and a cluster config) is this script's:
  fill the prompt, generate_async with the config's fields, one job for answers, one for the judge;
  a request the server refuses raises in generate_async (no soft fail by default), which stops a real
  NeMo-Skills job; here the item is recorded as refused and the others go on.
Our side: `harness eval --backend openai --base-url PROXY --model MODEL_DIR --tokenizer MODEL_DIR
--suite aa-lcr --chat --aa-lcr-data out/data --judge-base-url PROXY --judge-model MODEL_DIR`.

Printed per document category: questions, those each side leaves unscored, both scores, ours - ref
over the questions both scored with a 95% paired bootstrap interval, and the counts of the same answer
messages, server-side ids (vLLM's /tokenize of each side's messages), answer text, judge request,
judge reply and score; then every question side by side, and the request fields of each side.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import copy
import csv
import dataclasses
import io
import json
import os
import random
import sys
import time
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py and the scripts beside this one, imported by name

import aa_lcr_parity as offline  # after the sys.path lines above
from parity_kit import (
    BenchError,
    RecordingProxy,
    VLLMServer,
    add_served_arguments,
    cached_result,
    chat_records,
    check_model_folder,
    checkout_commit,
    exit_code,
    fmt,
    importable,
    load_file,
    log,
    paired_interval,
    served_eval,
    server_ids,
    sha,
    short,
    stand_in,
    write_json,
)

FIXTURES = ROOT / "tests" / "aa_lcr" / "fixtures"
CSV_NAME = "AA-LCR_Dataset.csv"
ZIP_NAME = "extracted_text/AA-LCR_extracted-text.zip"
JUDGE_HEAD = "Assess whether the following CANDIDATE ANSWER"  # judge/aalcr.yaml's first words
REFERENCE = "NVIDIA-NeMo/Skills 8b18f39"

# ---------------------------------------------------------------------------------------------
# Data: the committed fixtures plus invented sets of a few thousand tokens, in the released layout

SUBJECTS = ["the board", "the audit team", "the regional office", "the survey panel", "the harbour authority"]
VERBS = ["reviewed", "recorded", "summarised", "compared", "published", "revised"]
OBJECTS = ["the maintenance schedule", "staff rotas", "supplier contracts", "energy use", "the safety log"]
PLACES = ["in the northern depot", "at the main site", "across all branches", "in the annex", "at the port"]

# (question id, category, set id, [(file, [fact sentences], filler sentences)], question, answer)
SETS = [
    ("6", "Industry Reports", "21", [("Tidewell Ferries 2021.txt", ["Tidewell operated 14 ferries in 2021."], 18),
                                     ("Tidewell Ferries 2022.txt", ["Tidewell operated 18 ferries in 2022."], 18)],
     "How many ferries did Tidewell add between 2021 and 2022?", "4"),
    ("7", "Academia", "31", [("Study A.txt", ["Study A enrolled 240 participants."], 28),
                             ("Study B.txt", ["Study B enrolled 310 participants."], 28),
                             ("Study C.txt", ["Study C enrolled 120 participants."], 28)],
     "How many participants did the three studies enrol in total?", "670"),
    ("8", "Marketing Materials", "41", [("Aurora X2 brochure.txt", ["The Aurora X2 kettle costs 89 euros."], 60),
                                        ("Aurora X3 brochure.txt", ["The Aurora X3 kettle costs 119 euros."], 60)],
     "Which Aurora kettle is cheaper, and by how much?", "The Aurora X2, by 30 euros"),
    ("9", "Industry Reports", "22", [("Grain exports 2020.txt", ["Grain exports were 3.2 million tonnes in 2020."], 78),
                                     ("Grain exports 2021.txt", ["Grain exports were 2.7 million tonnes in 2021."], 78)],
     "Did grain exports rise or fall from 2020 to 2021, and by how much?", "They fell by 0.5 million tonnes"),
    ("10", "Academia", "32", [("Survey methods.txt", ["The survey's response rate was 62 percent."], 104),
                              ("Survey results.txt", ["Most respondents preferred the evening timetable."], 104)],
     "What was the survey's response rate?", "62 percent"),
]  # fmt: skip


def document(name: str, facts: list[str], fillers: int, rng: random.Random) -> str:
    """A report: `fillers` invented sentences in paragraphs of four, the facts among them."""
    lines = [f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)} "
             f"in week {rng.randint(1, 52)}, noting {rng.randint(2, 90)} open items." for _ in range(fillers)]  # fmt: skip
    for k, fact in enumerate(facts):
        lines.insert(rng.randint(0, len(lines)) if k else len(lines) // 3, fact)
    paragraphs = [" ".join(lines[i : i + 4]) for i in range(0, len(lines), 4)]
    return f"# {name.removesuffix('.txt')}\n\n" + "\n\n".join(paragraphs) + "\n"


def write_data(folder: Path) -> list[dict]:
    """out/data in the released layout; returns the question rows in CSV order."""
    from harness.core.atomic import atomic_write
    from tasks.aa_lcr.prompts import question_prompt

    with open(FIXTURES / CSV_NAME, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    src = zipfile.ZipFile(FIXTURES / ZIP_NAME)
    members = {info.filename: src.read(info) for info in src.infolist()}
    rng = random.Random(48)
    for qid, category, set_id, docs, question, answer in SETS:
        texts = [document(name, facts, n, rng) for name, facts, n in docs]
        for (name, _, _), text in zip(docs, texts):
            members[f"lcr/{category}/{set_id}/{name}"] = text.encode("utf-8")
        rows.append({"document_category": category, "document_set_id": set_id, "question_id": qid,
                     "question": question, "answer": answer, "data_source_filenames": ";".join(d[0] for d in docs),
                     "data_source_urls": ";".join(f"https://example.org/{set_id}/{i}" for i in range(len(docs))),
                     "input_tokens": str(offline.count(question_prompt(texts, question)))})  # fmt: skip
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=offline_columns(), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in sorted(members.items()):
            z.writestr(zipfile.ZipInfo(name, date_time=(2025, 8, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    (folder / ZIP_NAME).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / CSV_NAME, buf.getvalue().encode("utf-8"))
    atomic_write(folder / ZIP_NAME, zbuf.getvalue())
    return rows


def offline_columns() -> tuple[str, ...]:
    from tasks.aa_lcr.data import COLUMNS

    return COLUMNS


# ---------------------------------------------------------------------------------------------
# The reference side: NeMo-Skills' client (base.py + vllm.py) and its two generation steps


class _NeverRaised(Exception):
    """litellm's ContextWindowExceededError, only looked at under soft fail (off by default)."""


async def _acompletion(*, model, api_key, base_url, max_retries, api_base=None, timeout=None, extra_body=None, **p):
    """litellm.acompletion for base.py's chat request, over the real openai client: the request
    fields as base.py built them, None ones left out, the "openai/" provider prefix taken off."""
    import openai  # type: ignore[import-not-found]

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=max_retries)
    body = {k: v for k, v in p.items() if v is not None}
    try:
        name = model.split("/", 1)[1]
        return await client.chat.completions.create(model=name, extra_body=extra_body, timeout=timeout, **body)
    finally:
        await client.close()


def _definition(path: Path, name: str, namespace: dict):
    """One top-level class or function of a source file, executed alone (its module imports hydra,
    litellm and a cluster's worth of modules that are no part of the request)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace[name]


def load_client(nemo: Path) -> types.SimpleNamespace:
    """VLLMModel (the checkout's base.py and vllm.py) and InferenceConfig (generate.py's defaults);
    after offline.load_references, whose stand-ins (nemo_skills.utils, tiktoken) these files share."""
    if not (importable("openai") and importable("httpx")):  # base.py imports both (httpx: litellm's session)
        raise BenchError(
            "the reference's client needs openai and httpx: pass --ref-site DIR (pip install --target DIR openai httpx)"
        )
    stand_in(
        "litellm", acompletion=_acompletion, exceptions=types.SimpleNamespace(ContextWindowExceededError=_NeverRaised)
    )
    stand_in("nemo_skills.inference")
    stand_in("nemo_skills.inference.patch_litellm_logging", patch_litellm_logging_worker=lambda: None)
    stand_in("nemo_skills.inference.model")  # its __init__ imports every server type's client
    folder = nemo / "nemo_skills" / "inference" / "model"
    mods = {n: load_file(f"nemo_skills.inference.model.{n}", folder / f"{n}.py", register=True)
            for n in ("utils", "context_retry", "base", "vllm")}  # fmt: skip
    namespace = {"nested_dataclass": sys.modules["nemo_skills.utils"].nested_dataclass,
                 "field": dataclasses.field, "EndpointType": mods["base"].EndpointType}  # fmt: skip
    config = _definition(nemo / "nemo_skills" / "inference" / "generate.py", "InferenceConfig", namespace)
    return types.SimpleNamespace(VLLMModel=mods["vllm"].VLLMModel, InferenceConfig=config)


async def _generation_job(llm, prompt, data_points: list[dict], inference) -> list[dict]:
    """GenerationTask's async loop: every data point at once, prompt.fill then generate_async with the
    InferenceConfig fields (process_single_datapoint); a raised error is kept as the item's result."""
    params = dataclasses.asdict(inference)

    async def one(point: dict) -> dict:
        messages = prompt.fill(copy.deepcopy(point), start_assistant_response_key=None, chat_template_kwargs={})
        try:
            return await llm.generate_async(**{**params, "prompt": messages, "stop_phrases": None})
        except Exception as exc:  # noqa: BLE001  (generate_async re-raises: a real job stops here)
            return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}

    return list(await asyncio.gather(*(one(p) for p in data_points)))


def run_reference(nemo: Path, data_dir: Path, model: str, url: str) -> dict:
    refs = offline.load_references(nemo)
    client = load_client(nemo)
    entries = offline.reference_entries(refs, data_dir)
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        llm = client.VLLMModel(model=model, base_url=url)
        answers = asyncio.run(_generation_job(llm, refs.question_prompt, entries, client.InferenceConfig()))
        answered = [{**e, "generation": a["generation"]} for e, a in zip(entries, answers) if "error" not in a]
        judged = asyncio.run(_generation_job(llm, refs.judge_prompt, answered, client.InferenceConfig()))
    wall = time.perf_counter() - t0
    verdicts = {p["index"]: j for p, j in zip(answered, judged)}
    items, metrics = {}, refs.metrics.AALCRMetrics()
    for e, a in zip(entries, answers):
        qid, j = str(e["index"]), verdicts.get(e["index"], {})
        item = {"generation": a.get("generation"), "finish_reason": a.get("finish_reason"), "error": a.get("error"),
                "judgement": j.get("generation"), "judge_error": j.get("error"), "score": None}  # fmt: skip
        if item["judgement"] is not None:  # summarize_results: the predictions holding a judgement
            pred = {**e, "generation": item["generation"], "judgement": item["judgement"]}
            item["score"] = float(metrics._get_score_dict(pred)["judge_correct"])
            metrics.update([pred])
        items[qid] = item
    with contextlib.redirect_stdout(io.StringIO()):  # (it prints its category tables)
        headline = metrics.get_metrics()["pass@1"]["judge_correct"] if metrics.max_k else None
    return {"items": items, "headline": headline, "wall_s": round(wall, 1),
            "inference": {k: str(v) for k, v in dataclasses.asdict(client.InferenceConfig()).items()}}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Our side: harness eval --backend openai, the judge at the same proxy


def run_ours(args, data_dir: Path, url: str, out: Path) -> dict:
    model = str(Path(args.model).resolve())
    flags = [
        "--suite",
        "aa-lcr",
        "--chat",
        "--aa-lcr-data",
        str(data_dir),
        "--judge-base-url",
        url,
        "--judge-model",
        model,
    ]
    run = served_eval(url, model, flags, out, threads=args.threads, concurrency=args.concurrency)
    records = {str(r["metadata"]["question_id"]): {"prediction": r["prediction"], "score": float(r["score"])}
               for r in run["samples"]}  # fmt: skip
    return {"records": records, "command": run["command"], "wall_s": run["wall_s"],
            "left_out": [x for x in run["said"] if x.startswith("AA-LCR:")]}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Comparison


def split_calls(calls: list[dict], questions: dict[str, str]) -> tuple[dict, dict]:
    """A side's chat requests by question id: (answer requests, judge requests), found by the released
    question as the prompt holds it (START QUESTION ... END QUESTION, in both steps' prompts)."""
    answers: dict[str, list[dict]] = {}
    judges: dict[str, list[dict]] = {}
    for c in calls:
        text = c["messages"][-1]["content"]
        hits = [q for q, raw in questions.items() if f"START QUESTION\n\n{raw}\n\nEND QUESTION" in text]
        qid = hits[0] if len(hits) == 1 else "?"
        (judges if text.startswith(JUDGE_HEAD) else answers).setdefault(qid, []).append(c)
    return answers, judges


def item_rows(rows_csv: list[dict], ref: dict, ours: dict, records: list[dict]) -> list[dict]:
    """One row per question: both sides' requests, texts, judge requests and replies, scores."""
    questions = {r["question_id"]: r["question"] for r in rows_csv}
    ra, rj = split_calls(chat_records(records, "reference"), questions)
    oa, oj = split_calls(chat_records(records, "ours"), questions)
    out = []
    for row in rows_csv:
        qid = row["question_id"]
        r, o = ref["items"].get(qid, {}), ours["records"].get(qid)
        r_ans, o_ans, r_jud, o_jud = ra.get(qid, []), oa.get(qid, []), rj.get(qid, []), oj.get(qid, [])
        out.append({
            "qid": qid, "category": row["document_category"], "answer": row["answer"],
            "ref_requests": len(r_ans), "ref_error": r.get("error"), "our_requests": len(o_ans),
            "ref_msgs": r_ans[0]["messages"] if r_ans else None, "our_msgs": o_ans[0]["messages"] if o_ans else None,
            "ref_fields": r_ans[0]["fields"] if r_ans else None, "our_fields": o_ans[0]["fields"] if o_ans else None,
            "ref_output": r.get("generation"), "our_output": None if o is None else o["prediction"],
            "ref_finish": r.get("finish_reason"), "our_finish": o_ans[0]["finish_reason"] if o_ans else None,
            "ref_judge_msgs": r_jud[0]["messages"] if r_jud else None,
            "our_judge_msgs": o_jud[0]["messages"] if o_jud else None,
            "ref_judge_fields": r_jud[0]["fields"] if r_jud else None,
            "our_judge_fields": o_jud[0]["fields"] if o_jud else None,
            "ref_judge_requests": len(r_jud), "our_judge_requests": len(o_jud),
            "ref_verdict": r.get("judgement"), "our_verdict": o_jud[-1]["text"] if o_jud else None,
            "ref_score": r.get("score"), "our_score": None if o is None else o["score"],
        })  # fmt: skip
    return out


def mark_same(rows: list[dict]) -> None:
    """The side-by-side flags; the long messages are then kept as hashes only."""
    for r in rows:
        r["same_prompt"] = r["ref_msgs"] is not None and r["ref_msgs"] == r["our_msgs"]
        r["same_output"] = r["ref_output"] is not None and r["ref_output"] == r["our_output"]
        r["same_judge_request"] = r["ref_judge_msgs"] is not None and r["ref_judge_msgs"] == r["our_judge_msgs"]
        r["same_verdict"] = r["ref_verdict"] is not None and r["ref_verdict"] == r["our_verdict"]
        r["same_score"] = r["ref_score"] is not None and r["ref_score"] == r["our_score"]
        for k in ("ref_msgs", "our_msgs", "ref_judge_msgs", "our_judge_msgs"):
            r[k] = None if r[k] is None else sha(json.dumps(r[k], ensure_ascii=False))


def add_server_ids(rows: list[dict], base: str, model: str) -> None:
    """vLLM's /tokenize of each side's answer messages: the ids the server feeds."""
    for r in rows:
        ref = server_ids(base, model, r["ref_msgs"]) if r["ref_msgs"] else None
        ours = server_ids(base, model, r["our_msgs"]) if r["our_msgs"] else None
        r["ref_ids_len"], r["our_ids_len"] = (None if x is None else len(x) for x in (ref, ours))
        r["same_ids"] = ref is not None and ref == ours


SAME = ("same_prompt", "same_ids", "same_output", "same_judge_request", "same_verdict", "same_score")


def summarize(rows: list[dict]) -> list[dict]:
    cells = sorted({r["category"] for r in rows})
    out = []
    for name, rs in [(c, [r for r in rows if r["category"] == c]) for c in cells] + [("**all**", rows)]:
        ref = [r["ref_score"] for r in rs if r["ref_score"] is not None]
        ours = [r["our_score"] for r in rs if r["our_score"] is not None]
        both = [r for r in rs if r["ref_score"] is not None and r["our_score"] is not None]
        lo, hi = paired_interval([r["our_score"] for r in both], [r["ref_score"] for r in both], name)
        out.append({
            "cell": name, "n": len(rs), "ref_unscored": len(rs) - len(ref), "our_unscored": len(rs) - len(ours),
            "ref": round(100 * sum(ref) / len(ref), 2) if ref else None,
            "ours": round(100 * sum(ours) / len(ours), 2) if ours else None, "both": len(both),
            "diff": round(100 * sum(r["our_score"] - r["ref_score"] for r in both) / len(both), 2) if both else None,
            "low": lo, "high": hi, **{k: sum(bool(r[k]) for r in rs) for k in SAME},
        })  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Report


def print_tables(res: dict) -> None:
    s, rows = res["settings"], res["rows"]
    print(f"\n## AA-LCR on {Path(s['model']).name} behind vllm serve: NeMo-Skills ({s['reference_commit'][:7]}) "
          "client + judge step vs harness eval --backend openai\n")  # fmt: skip
    print(f"{s['dtype']}, served context {s['max_model_len']}; the served model answers and judges on both sides "
          f"(a parity judge, not a meaningful grade); {len(rows)} questions from {s['data']}\n")  # fmt: skip
    print(
        "| category | n | unscored ref / ours | reference | ours | ours − ref (both scored) | paired 95% | "
        "same answer messages | same server ids | same answer | same judge request | same judge reply | same score |"
    )
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for c in res["summary"]:
        same = " | ".join(f"{c[k]}/{c['n']}" for k in SAME)
        print(f"| {c['cell']} | {c['n']} | {c['ref_unscored']} / {c['our_unscored']} | {fmt(c['ref'])} | "
              f"{fmt(c['ours'])} | {fmt(c['diff'], '+.2f')} (n={c['both']}) | "
              f"[{fmt(c['low'], '+.1f')}, {fmt(c['high'], '+.1f')}] | {same} |")  # fmt: skip
    print(
        f"\nheadline: AALCRMetrics pass@1 judge_correct {fmt(res['reference']['headline'])} (over the questions "
        f"it has a judgement for); ours {fmt(res['summary'][-1]['ours'])} (over the questions that fit)"
    )
    for side in ("ref", "our"):
        fields = sorted({json.dumps(r[f"{side}_{k}"], sort_keys=True) for r in rows for k in ("fields", "judge_fields")
                         if r[f"{side}_{k}"] is not None})  # fmt: skip
        print(f"\nrequest fields besides model and messages, {side} (answer, judge): {'; '.join(fields)}")
    print("\n## Question by question (texts as JSON strings, cut to 40 characters)\n")
    print(
        "| q | category | requests ref / ours | server ids ref / ours | finish ref / ours | reference answer | "
        "our answer | judge requests ref / ours | reference judge reply | our judge reply | score ref / ours |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['qid']} | {r['category']} | {r['ref_requests']} / {r['our_requests']} | "
              f"{fmt(r['ref_ids_len'], 'd')} / {fmt(r['our_ids_len'], 'd')} | {r['ref_finish'] or '—'} / "
              f"{r['our_finish'] or '—'} | `{short(r['ref_output'])}` | `{short(r['our_output'])}` | "
              f"{r['ref_judge_requests']} / {r['our_judge_requests']} | `{short(r['ref_verdict'])}` | "
              f"`{short(r['our_verdict'])}` | {fmt(r['ref_score'], '.0f')} / {fmt(r['our_score'], '.0f')} |")  # fmt: skip
    for r in rows:
        if r["ref_error"]:
            print(f"\nquestion {r['qid']}, the reference: {r['ref_error']}")
    for line in res["ours"]["left_out"]:
        print(f"\nours: {line}")
    print(
        f"\ntime: the reference {res['reference']['wall_s']:.0f} s wall (both steps, every request at once); "
        f"ours {res['ours']['wall_s']:.0f} s wall (harness eval, --concurrency {s['concurrency']})"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nemo-skills", required=True, help="a NeMo-Skills checkout (NVIDIA-NeMo/Skills 8b18f39)")
    ap.add_argument("--model", required=True, help="the transformers folder the server serves (SmolLM2)")
    add_served_arguments(
        ap, "a folder holding the reference's openai client, added to sys.path", "runs/aa-lcr-realmodel-parity"
    )
    return ap.parse_args(argv)


def run_tag(args) -> str:
    return f"{args.dtype}-{args.max_model_len}"


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def run(args) -> int:
    out = Path(args.out).resolve() / run_tag(args)
    if args.report:
        print_tables(cached_result(out))
        return 0
    nemo = Path(args.nemo_skills).resolve()
    if not (nemo / "nemo_skills" / "inference" / "model" / "vllm.py").is_file():
        raise BenchError(
            f"{nemo} is not a NeMo-Skills checkout (no nemo_skills/inference/model/vllm.py): pass --nemo-skills DIR"
        )
    check_model_folder(args.model)
    if args.ref_site:
        sys.path.append(str(Path(args.ref_site).resolve()))
    os.environ.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    data_dir = out / "data"
    rows_csv = write_data(data_dir)
    model = str(Path(args.model).resolve())
    server = VLLMServer(model, args.max_model_len, args.dtype, args.vllm_python, out / "vllm.log", args.threads)
    proxy = RecordingProxy(server.url)
    try:
        proxy.side = "reference"
        ref = run_reference(nemo, data_dir, model, proxy.url)
        log(f"reference: {sum(i['score'] is not None for i in ref['items'].values())} judged, {ref['wall_s']} s")
        proxy.side = "ours"
        ours = run_ours(args, data_dir, proxy.url, out)
        log(f"ours: {len(ours['records'])} records, {ours['wall_s']} s")
        proxy.side = ""
        rows = item_rows(rows_csv, ref, ours, proxy.records)
        add_server_ids(rows, server.url, model)
        mark_same(rows)
    finally:
        proxy.close()
        server.stop()
    write_json(out / "proxy.json", proxy.records)
    settings = {"model": model, "data": str(data_dir), "dtype": args.dtype, "max_model_len": args.max_model_len,
                "concurrency": args.concurrency, "server": server.command,
                "reference_commit": checkout_commit(nemo, "8b18f39 (an archive of that commit)")}  # fmt: skip
    res = {"settings": settings, "reference": {k: v for k, v in ref.items() if k != "items"},
           "ours": {k: v for k, v in ours.items() if k != "records"}, "rows": rows, "summary": summarize(rows)}  # fmt: skip
    write_json(out / "result.json", res)
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
