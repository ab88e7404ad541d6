"""GraphWalks on a real model behind `vllm serve`: lm-eval's own client beside `harness eval --backend openai`.

    python benchmarks/graphwalks_realmodel_parity.py --reference /tmp/ref/lm-evaluation-harness \\
        --model MODEL_DIR --ref-site /tmp/gw-refsite --concurrency 1     # the 128k fixture rows + 2 over the window
    python benchmarks/graphwalks_realmodel_parity.py ... --report              # re-print the tables from the cache

MODEL_DIR: SmolLM2-135M-Instruct (`harness convert smollm2-135m-instruct --out DIR`), served by one
`vllm serve MODEL_DIR` (benchmarks/parity_kit.py: float32, eager, no prefix caching, context 8192)
under its path; both pipelines reach it through a recording proxy in this process.

Data, in the released layout (graphwalks_128k_and_shorter.parquet, the shortest set): the first
--samples rows of --data's file (default: the 9 rows of tests/graphwalks/fixtures), then
--over-window rows built here by the fixtures' own script (make_fixtures.row: a bfs and a parents
row of 150 nodes, about 10,500 SmolLM2 tokens, over the 8192 window whatever is generated).

The reference is lm-eval's graphwalks_128k task run by lm-eval itself: `lm_eval.simple_evaluate`
(what `lm_eval run` calls) with model `local-chat-completions` (its real aiohttp/requests client;
tenacity, which this environment lacks, from --ref-site), `apply_chat_template=True`, log_samples,
its own generation kwargs, parse and metrics (utils.process_results: f1 and flexible_f1). The task is
loaded by lm_eval's TaskManager from the checkout's lm_eval/tasks/graphwalks folder (no default
tasks), as benchmarks/graphwalks_parity.py does. What is set from outside, and only that:

- the data: datasets.load_dataset("openai/graphwalks", data_files=F) reads F from the folder built
  here (datasets' parquet builder; the hub is offline);
- the model arguments: model = MODEL_DIR (the served name), base_url = the proxy's
  /v1/chat/completions, timeout = 3600 s (its 300 s default would retry an 8K-token prefill on a
  shared 2-core CPU); num_concurrent (1) and max_retries (3) are its defaults;
- `gen_kwargs={"max_gen_toks": N}` (lm-eval's `--gen_kwargs max_gen_toks=N`), N = --max-gen-toks
  (default 512): the task's 16384 does not fit SmolLM2's 8192-token window (below);
- which docs run: lm-eval's `samples` argument (`--samples '{"graphwalks_128k": [...]}'`): the
  rows of the fixture in one run; each over-window row in a run of its own, since a refused request
  ends lm-eval's whole run (it retries 3 times and raises).

Our side: `harness eval --backend openai --base-url PROXY --model MODEL_DIR --tokenizer MODEL_DIR
--suite graphwalks --chat --graphwalks-data DIR --max-new-tokens N` under --protocol reference; its
flexible parse is our graphwalks-flexible tasks' scorer (tasks.graphwalks.grading.f1, flexible=True)
on the same predictions (greedy: the suite would generate the same answers again).

At the task's own budget (--own-budget-rows, default rows 2 and 3, both ending on their own):
lm-eval sends max_tokens 16384 and vLLM cuts the generation at the window; ours refuses to plan
(16384 to generate leave no prompt in 8192 tokens) in one line. Both are run and shown.

Printed per problem type, for f1 and flexible_f1: rows each side scored, both means, ours - ref over
rows both scored (95% paired bootstrap), identical messages, server-side ids (vLLM's /tokenize) and
generated text; then every row side by side, lm-eval's process_results on our text included.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
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
    harness_eval,
    importable,
    load_file,
    log,
    paired_interval,
    sample_records,
    server_ids,
    short,
    write_json,
)

DATA = ROOT / "tests" / "graphwalks" / "fixtures"
SET_FILE = "graphwalks_128k_and_shorter.parquet"  # the shortest set (lm-eval's graphwalks_128k)
REF_TASK = "graphwalks_128k"
TASK_DIR = Path("lm_eval") / "tasks" / "graphwalks"
OWN_BUDGET = 16384  # graphwalks_128k.yaml generation_kwargs.max_gen_toks
# rows over the window, built by tests/graphwalks/fixtures/make_fixtures.row (kind, nodes, degree, depth)
OVER_WINDOW = [("bfs", 150, 4, 2), ("parents", 150, 4, None)]
KINDS = ("bfs", "parents")


# ---------------------------------------------------------------------------------------------
# Data


def prepare_data(args, out: Path) -> tuple[Path, list[dict]]:
    """The released-layout file both sides read: --data's first --samples rows, then the
    over-window rows; written to out/data/SET_FILE. Rows carry "row" (the file row) and "origin"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(args.data) / SET_FILE
    if not src.is_file():
        raise BenchError(f"{src} does not exist: pass --data DIR holding {SET_FILE} (openai/graphwalks' layout)")
    table = pq.read_table(src)
    rows = table.to_pylist()[: args.samples or None]
    make = load_file("graphwalks_make_fixtures", DATA / "make_fixtures.py")
    built = [make.row(7000 + k, kind, n, d, depth, "11-28-2026") for k, (kind, n, d, depth) in enumerate(OVER_WINDOW)]
    built = built[: args.over_window]
    folder = out / "data"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{SET_FILE}.tmp"
    pq.write_table(pa.Table.from_pylist(rows + built, schema=table.schema), tmp)
    tmp.replace(folder / SET_FILE)  # written whole, then renamed into place
    origins = ["fixture"] * len(rows) + ["over-window"] * len(built)
    return folder, [{**r, "row": i, "origin": o} for i, (r, o) in enumerate(zip(rows + built, origins))]


def row_of(content: str | None, rows: list[dict]) -> int | None:
    """The file row whose prompt a user turn holds (verbatim, or stripped of outer whitespace)."""
    if content is None:
        return None
    hits = [r["row"] for r in rows if r["prompt"] == content] or [
        r["row"] for r in rows if r["prompt"].strip() == content.strip()
    ]
    return hits[0] if len(hits) == 1 else None


# ---------------------------------------------------------------------------------------------
# The reference side: lm_eval.simple_evaluate with local-chat-completions, in this process


@contextlib.contextmanager
def fixture_hub(data_dir: Path):
    """datasets.load_dataset("openai/graphwalks", data_files=F) reads data_dir/F: the one hub read."""
    import datasets

    original = datasets.load_dataset

    def load(path, *a, data_files=None, split=None, **kw):
        if path != "openai/graphwalks" or a or kw:
            raise BenchError(f"unexpected dataset read {path!r} {a} {kw}")
        return original("parquet", data_files=str(data_dir / data_files), split=split)

    datasets.load_dataset = load
    try:
        yield
    finally:
        datasets.load_dataset = original


def lm_eval_run(checkout: Path, data_dir: Path, model: str, url: str, docs: list[int], max_gen_toks: int | None):
    """One simple_evaluate of graphwalks_128k on `docs`: (per-doc samples, lm-eval's metrics, error)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    folder = checkout / TASK_DIR
    manager = TaskManager(include_path=str(folder), include_defaults=False)
    model_args = {"model": model, "base_url": url + "/chat/completions", "timeout": 3600}
    gen_kwargs = None if max_gen_toks is None else {"max_gen_toks": max_gen_toks}
    sink = io.StringIO()
    try:
        with fixture_hub(data_dir), contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            res = lm_eval.simple_evaluate(
                model="local-chat-completions",
                model_args=model_args,
                tasks=[REF_TASK],
                task_manager=manager,
                apply_chat_template=True,
                gen_kwargs=gen_kwargs,
                samples={REF_TASK: list(docs)},
                log_samples=True,
            )
    except Exception as exc:  # noqa: BLE001 (the reference's own failure is what is reported)
        return [], None, f"{type(exc).__name__}: {str(exc)[:300]}"
    assert res is not None
    fn = res["samples"][REF_TASK]
    samples = [
        {
            "row": s["doc_id"],
            "doc_prompt": s["doc"]["prompt"],
            "response": s["resps"][0][0],
            "f1": float(s["f1"]),
            "flexible_f1": float(s["flexible_f1"]),
        }
        for s in fn
    ]
    metrics = {
        k.split(",")[0]: v for k, v in res["results"][REF_TASK].items() if k.split(",")[0] in ("f1", "flexible_f1")
    }
    return samples, metrics, None


def run_reference(args, data_dir: Path, rows: list[dict], proxy: RecordingProxy) -> dict:
    """lm-eval on the fixture rows in one run, each over-window row in a run of its own, and the
    own-budget rows at the task's 16384; each run's requests are told apart by proxy.side."""
    checkout = Path(args.reference).resolve()
    if not importable("tenacity"):
        raise BenchError("lm-eval's API models need tenacity: pass --ref-site DIR (pip install --target DIR tenacity)")
    model = str(Path(args.model).resolve())
    runs = [("reference", [r["row"] for r in rows if r["origin"] == "fixture"], args.max_gen_toks)]
    runs += [
        (f"reference-over-{r['row']}", [r["row"]], args.max_gen_toks) for r in rows if r["origin"] == "over-window"
    ]
    if args.own_budget_rows:
        runs.append(("reference-own-budget", args.own_budget_rows, None))
    out: dict = {"runs": {}}
    t0 = time.perf_counter()
    for side, docs, budget in runs:
        proxy.side = side
        log(f"reference ({side}): lm-eval graphwalks_128k docs {docs}, max_gen_toks {budget or OWN_BUDGET}")
        t = time.perf_counter()
        samples, metrics, error = lm_eval_run(checkout, data_dir, model, proxy.url, docs, budget)
        out["runs"][side] = {
            "docs": docs,
            "max_gen_toks": budget or OWN_BUDGET,
            "samples": samples,
            "metrics": metrics,
            "error": error,
            "wall_s": round(time.perf_counter() - t, 1),
        }
        log(f"reference ({side}): {len(samples)} samples, error {error}")
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


# ---------------------------------------------------------------------------------------------
# Our side: harness eval --backend openai in a subprocess


def our_eval(args, data_dir: Path, url: str, run: Path, max_new_tokens: int | None) -> tuple[int, str, float]:
    """One harness eval run into `run`, its output in run.log beside it: (status, command, wall)."""
    model = str(Path(args.model).resolve())
    flags = ["--backend", "openai", "--base-url", url, "--model", model, "--tokenizer", model]
    flags += ["--suite", "graphwalks", "--chat", "--graphwalks-data", str(data_dir)]
    if max_new_tokens is not None:
        flags += ["--max-new-tokens", str(max_new_tokens)]
    flags += ["--cache-dir", "none", "--no-progress", "--concurrency", str(args.concurrency)]
    return harness_eval(flags, run, run.parent / f"{run.name}.log", threads=args.threads)


def run_ours(args, data_dir: Path, rows: list[dict], proxy: RecordingProxy, out: Path) -> dict:
    """The run at --max-gen-toks (its records, flexible F1 by our scorer), then the own-budget run."""
    from tasks.graphwalks.grading import f1

    proxy.side = "ours"
    rc, command, wall = our_eval(args, data_dir, proxy.url, out / "ours-run", args.max_gen_toks)
    if rc != 0:
        raise BenchError(f"harness eval exited {rc}; see {out / 'ours-run.log'}")
    recs = {}
    for r in sample_records(out / "ours-run"):
        m = r["metadata"]
        recs[m["row"]] = {
            "prediction": r["prediction"],
            "f1": float(r["score"]),
            "flexible_f1": f1(r["prediction"], list(rows[m["row"]]["answer_nodes"]), flexible=True),
            "num_tokens": r["num_tokens"],
            "task": r["task"],
        }
    results = json.loads((out / "ours-run" / "results.json").read_text(encoding="utf-8"))
    block = results["suites"]["graphwalks"]
    own = {}
    if args.own_budget_rows:
        proxy.side = "ours-own-budget"
        rc_own, command_own, _ = our_eval(args, data_dir, proxy.url, out / "ours-own-budget", None)
        said = (out / "ours-own-budget.log").read_text(encoding="utf-8").strip().splitlines()
        own = {"rc": rc_own, "command": command_own, "said": [x for x in said if x.startswith("error:")][:1]}
    proxy.side = ""
    return {
        "records": recs,
        "unavailable": block.get("unavailable", {}),
        "command": command,
        "wall_s": wall,
        "own_budget": own,
    }


# ---------------------------------------------------------------------------------------------
# Comparison


def calls_by_row(records: list[dict], side: str, rows: list[dict]) -> dict:
    out: dict = {}
    for c in chat_records(records, side):
        msgs = c["messages"] or [{}]
        out.setdefault(row_of(msgs[-1].get("content"), rows), []).append(c)
    return out


def reference_side(row: int, ref: dict, records: list[dict], rows: list[dict]) -> dict:
    """The lm-eval run that held the row: its requests for it, its sample (None when the run failed)."""
    side, run = next((k, v) for k, v in ref["runs"].items() if row in v["docs"] and k != "reference-own-budget")
    calls = calls_by_row(records, side, rows).get(row, [])
    sample = next((s for s in run["samples"] if row_of(s["doc_prompt"], rows) == row), None)
    ok = [c for c in calls if c["status"] == 200]
    return {
        "ref_run": side,
        "ref_requests": len(calls),
        "ref_refused": sum(c["status"] != 200 for c in calls),
        "ref_run_error": run["error"],
        "ref_server_said": next((c["error"] for c in calls if c["error"]), None),
        "ref_msgs": (ok or calls or [{"messages": None}])[0]["messages"],
        "ref_fields": calls[0]["fields"] if calls else None,
        "ref_text": ok[0]["text"] if ok else None,
        "ref_finish": ok[0]["finish_reason"] if ok else None,
        "ref_response": None if sample is None else sample["response"],
        "ref_f1": None if sample is None else sample["f1"],
        "ref_flexible_f1": None if sample is None else sample["flexible_f1"],
    }


def per_row(rows: list[dict], ref: dict, ours: dict, records: list[dict], process_results) -> list[dict]:
    """One row per file row: both sides' requests, texts and scores; lm-eval's process_results on
    our text too (its scorer on real outputs against ours)."""
    our_calls = calls_by_row(records, "ours", rows)
    out = []
    for r in rows:
        i = r["row"]
        rec = ours["records"].get(i)
        mine = our_calls.get(i, [])
        cross = None if rec is None else process_results(dict(r), [rec["prediction"]])
        out.append(
            {
                "row": i,
                "origin": r["origin"],
                "kind": r["problem_type"],
                "gold": len(r["answer_nodes"]),
                **reference_side(i, ref, records, rows),
                "our_requests": len(mine),
                "our_msgs": mine[0]["messages"] if mine else None,
                "our_fields": mine[0]["fields"] if mine else None,
                "our_text": mine[0]["text"] if mine else None,
                "our_finish": mine[0]["finish_reason"] if mine else None,
                "our_prediction": None if rec is None else rec["prediction"],
                "our_f1": None if rec is None else rec["f1"],
                "our_flexible_f1": None if rec is None else rec["flexible_f1"],
                "lm_eval_on_ours": cross and {k: float(cross[k]) for k in ("f1", "flexible_f1")},
            }
        )
    return out


def add_server_ids(rows: list[dict], base: str, model: str) -> None:
    for r in rows:
        ref_ids = server_ids(base, model, r["ref_msgs"]) if r["ref_msgs"] else None
        our_ids = server_ids(base, model, r["our_msgs"]) if r["our_msgs"] else None
        r["ref_ids_len"] = None if ref_ids is None else len(ref_ids)
        r["our_ids_len"] = None if our_ids is None else len(our_ids)
        r["same_ids"] = ref_ids is not None and ref_ids == our_ids


def summarize(rows: list[dict], metric: str) -> list[dict]:
    """Per problem type and all: both sides' mean of `metric` over the rows each scored, ours - ref
    over the rows both scored with its paired interval, and the identical-request counts."""
    out = []
    for name, rs in [(k, [r for r in rows if r["kind"] == k]) for k in KINDS] + [("**all**", rows)]:
        ref = [r[f"ref_{metric}"] for r in rs if r[f"ref_{metric}"] is not None]
        ours = [r[f"our_{metric}"] for r in rs if r[f"our_{metric}"] is not None]
        both = [r for r in rs if r[f"ref_{metric}"] is not None and r[f"our_{metric}"] is not None]
        lo, hi = paired_interval(
            [r[f"our_{metric}"] for r in both], [r[f"ref_{metric}"] for r in both], f"{metric}-{name}"
        )
        out.append(
            {
                "cell": name,
                "n": len(rs),
                "ref_scored": len(ref),
                "our_scored": len(ours),
                "ref": round(100 * sum(ref) / len(ref), 2) if ref else None,
                "ours": round(100 * sum(ours) / len(ours), 2) if ours else None,
                "both": len(both),
                "diff": round(100 * sum(r[f"our_{metric}"] - r[f"ref_{metric}"] for r in both) / len(both), 2)
                if both
                else None,
                "low": lo,
                "high": hi,
                "same_prompt": sum(r["ref_msgs"] is not None and r["ref_msgs"] == r["our_msgs"] for r in rs),
                "same_ids": sum(r["same_ids"] for r in rs),
                "same_text": sum(r["ref_text"] is not None and r["ref_text"] == r["our_text"] for r in rs),
            }
        )
    return out


def own_budget_rows(ref: dict, records: list[dict], rows: list[dict], by_row: list[dict]) -> list[dict]:
    """lm-eval at the task's 16384: what it sent, what the server did, against its N-budget text."""
    run = ref["runs"].get("reference-own-budget")
    calls = calls_by_row(records, "reference-own-budget", rows)
    low = {r["row"]: r["ref_text"] for r in by_row}
    out = []
    for i in run["docs"] if run else []:
        c = (calls.get(i) or [{}])[0]
        sample = next((s for s in run["samples"] if row_of(s["doc_prompt"], rows) == i), None)
        out.append(
            {"row": i, "max_tokens": (c.get("fields") or {}).get("max_tokens"), "status": c.get("status")}
            | {"prompt_tokens": c.get("prompt_tokens"), "finish": c.get("finish_reason")}
            | {"same_as_low_budget": bool(c) and c["text"] == low[i], "f1": sample and sample["f1"]}
        )
    return out


# ---------------------------------------------------------------------------------------------
# Tables


def print_cells(res: dict, metric: str) -> None:
    print(
        "| problem type | rows | scored by lm-eval / ours | lm-eval | ours | ours − ref (both scored) | paired 95% | "
        "same messages | same server ids | same output |"
    )
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---:|")
    for c in res["summary"][metric]:
        print(
            f"| {c['cell']} | {c['n']} | {c['ref_scored']} / {c['our_scored']} | {fmt(c['ref'])} | {fmt(c['ours'])} | "
            f"{fmt(c['diff'], '+.2f')} (n={c['both']}) | [{fmt(c['low'], '+.1f')}, {fmt(c['high'], '+.1f')}] | "
            f"{c['same_prompt']}/{c['n']} | {c['same_ids']}/{c['n']} | {c['same_text']}/{c['n']} |"
        )


def print_rows(rows: list[dict]) -> None:
    print("\n## Row by row (generated text as JSON strings, cut to 40 characters)\n")
    print(
        "| row | type | gold | lm-eval requests (refused) | server ids ref / ours | lm-eval output | our output | same | "
        "finish ref / ours | f1 ref / ours | flexible ref / ours | lm-eval's scorer on ours |"
    )
    print("|---:|---|---:|---:|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = "same" if r["ref_text"] is not None and r["ref_text"] == r["our_text"] else "**differs**"
        if r["ref_text"] is None and r["our_text"] is None:
            same = "neither ran"
        x = r["lm_eval_on_ours"]
        print(
            f"| {r['row']} | {r['kind']} | {r['gold']} | {r['ref_requests']} ({r['ref_refused']}) | "
            f"{fmt(r['ref_ids_len'], 'd')} / {fmt(r['our_ids_len'], 'd')} | `{short(r['ref_text'])}` | "
            f"`{short(r['our_text'])}` | {same} | {r['ref_finish'] or '—'} / {r['our_finish'] or '—'} | "
            f"{fmt(r['ref_f1'], '.3f')} / {fmt(r['our_f1'], '.3f')} | "
            f"{fmt(r['ref_flexible_f1'], '.3f')} / {fmt(r['our_flexible_f1'], '.3f')} | "
            f"{'—' if x is None else format(x['f1'], '.3f') + ', ' + format(x['flexible_f1'], '.3f')} |"
        )


def print_tables(res: dict) -> None:
    s, ref, ours = res["settings"], res["reference"], res["ours"]
    print(
        f"\n## GraphWalks (128k set) on {Path(s['model']).name} behind vllm serve: lm-eval's graphwalks_128k with "
        f"local-chat-completions (lm-evaluation-harness {s['reference_commit']}) vs harness eval --backend openai\n"
    )
    print(
        f"{s['dtype']}, served context {s['max_model_len']}, greedy, tokens to generate {s['max_gen_toks']} on both "
        f"sides (lm-eval gen_kwargs max_gen_toks, ours --max-new-tokens), {len(res['rows'])} rows of {s['data']} "
        f"(+{s['over_window']} over the window); lm-eval wall {ref['wall_s']:.0f} s, ours {ours['wall_s']:.0f} s "
        f"(--concurrency {s['concurrency']})\n"
    )
    for metric, what in (("f1", "f1 (last-line parse)"), ("flexible_f1", "flexible_f1 (flexible parse)")):
        print(f"\n### {what}\n")
        print_cells(res, metric)
    head = ref["runs"]["reference"]["metrics"] or {}
    print(
        f"\nlm-eval's own graphwalks_128k metrics (its run over the fixture rows): f1 {fmt(head.get('f1'), '.4f')}, "
        f"flexible_f1 {fmt(head.get('flexible_f1'), '.4f')}; ours (results.json Overall, every row kept): "
        f"{fmt(res['our_overall'], '.2f')}"
    )
    fields = {json.dumps(r["ref_fields"], sort_keys=True) for r in res["rows"] if r["ref_fields"]}
    ofields = {json.dumps(r["our_fields"], sort_keys=True) for r in res["rows"] if r["our_fields"]}
    print(f"\nrequest fields besides model and messages: lm-eval {sorted(fields)}; ours {sorted(ofields)}")
    for side, run in ref["runs"].items():
        if run["error"]:
            print(f"\nlm-eval run {side} (docs {run['docs']}) ended in: {run['error']}")
    refused = next((r["ref_server_said"] for r in res["rows"] if r["ref_server_said"]), None)
    if refused:
        print(f"\nthe server's answer to a refused request (first): {refused}")
    print(f"\nours, rows left out per task: {json.dumps(ours['unavailable'])}")
    print_rows(res["rows"])
    if res["own_budget"]:
        print(f"\n## At the task's own budget ({OWN_BUDGET} tokens to generate)\n")
        print("| row | lm-eval max_tokens | status | prompt tokens | finish | same text as at the lower budget | f1 |")
        print("|---:|---:|---:|---:|---|---|---:|")
        for o in res["own_budget"]:
            print(
                f"| {o['row']} | {o['max_tokens']} | {o['status']} | {o['prompt_tokens']} | {o['finish']} | "
                f"{o['same_as_low_budget']} | {fmt(o['f1'], '.3f')} |"
            )
        own = ours["own_budget"]
        print(f"\nours at the task's own budget: exit {own.get('rc')}: {' '.join(own.get('said') or [])}")


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reference", required=True, help="a checkout of EleutherAI/lm-evaluation-harness (its task folder)"
    )
    ap.add_argument("--model", required=True, help="the transformers folder the server serves (SmolLM2)")
    ap.add_argument("--data", default=str(DATA), help=f"a folder holding {SET_FILE} (the released layout)")
    ap.add_argument("--samples", type=int, help="the first N rows of the set (default: all)")
    ap.add_argument("--over-window", type=int, default=2, choices=[0, 1, 2], help="rows added over the window")
    ap.add_argument(
        "--max-gen-toks", type=int, default=512, help="tokens to generate on both sides (default 512; the task's 16384)"
    )
    ap.add_argument(
        "--own-budget-rows",
        type=lambda v: [int(x) for x in v.split(",") if x.strip()],
        default=[2, 3],
        help="rows lm-eval also runs at the task's 16384 (default 2,3; '' for none)",
    )
    add_served_arguments(
        ap,
        "a folder holding tenacity (lm-eval's API models need it), added to sys.path",
        "runs/graphwalks-realmodel-parity",
    )
    args = ap.parse_args(argv)
    if args.max_gen_toks < 1 or (args.samples is not None and args.samples < 1):
        ap.error("--max-gen-toks and --samples must be at least 1")
    return args


def run_tag(args) -> str:
    return f"{args.dtype}-{args.max_model_len}-g{args.max_gen_toks}-o{args.over_window}" + (
        f"-s{args.samples}" if args.samples else ""
    )


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def run(args) -> int:
    out = Path(args.out).resolve() / run_tag(args)
    if args.report:
        print_tables(cached_result(out))
        return 0
    checkout = Path(args.reference).resolve()
    if not (checkout / TASK_DIR / "utils.py").is_file():
        raise BenchError(f"{checkout} is not an lm-evaluation-harness checkout (no {TASK_DIR}/utils.py)")
    check_model_folder(args.model)
    if args.ref_site:
        sys.path.append(str(Path(args.ref_site).resolve()))
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    data_dir, rows = prepare_data(args, out)
    if any(i >= len(rows) for i in args.own_budget_rows):
        raise BenchError(f"--own-budget-rows {args.own_budget_rows}: the file has {len(rows)} rows")
    model = str(Path(args.model).resolve())
    utils = load_file("graphwalks_reference_utils", checkout / TASK_DIR / "utils.py")
    server = VLLMServer(model, args.max_model_len, args.dtype, args.vllm_python, out / "vllm.log", args.threads)
    proxy = RecordingProxy(server.url)
    try:
        ref = run_reference(args, data_dir, rows, proxy)
        ours = run_ours(args, data_dir, rows, proxy, out)
        by_row = per_row(rows, ref, ours, proxy.records, utils.process_results)
        add_server_ids(by_row, server.url, model)
    finally:
        proxy.close()
        server.stop()
    write_json(out / "proxy.json", proxy.records)
    results = json.loads((out / "ours-run" / "results.json").read_text(encoding="utf-8"))
    overall = results["suites"]["graphwalks"]["headline"]["groups"]["Overall"]["per_length"]
    res = {
        "settings": {
            "model": model,
            "data": str(Path(args.data).resolve()),
            "samples": args.samples,
            "over_window": args.over_window,
            "max_gen_toks": args.max_gen_toks,
            "dtype": args.dtype,
            "max_model_len": args.max_model_len,
            "concurrency": args.concurrency,
            "reference_commit": checkout_commit(checkout, "4e7e0d4 (no .git; the task folder of that commit)"),
            "server": server.command,
        },
        "reference": ref,
        "ours": {k: v for k, v in ours.items() if k != "records"},
        "our_overall": next(iter(overall.values()))["mean"] if overall else None,
        "rows": by_row,
        "summary": {m: summarize(by_row, m) for m in ("f1", "flexible_f1")},
        "own_budget": own_budget_rows(ref, proxy.records, rows, by_row),
    }
    write_json(out / "result.json", res)
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
