"""NoLiMa on a real model behind `vllm serve`: the reference's run_tests.py beside `harness eval --backend openai`.

    python benchmarks/nolima_realmodel_parity.py --reference /tmp/ref/NoLiMa --model MODEL_DIR --ref-site /tmp/refsite
    python benchmarks/nolima_realmodel_parity.py ... --lengths 250,500,1000 --books 1 --tests-per-set 1
    python benchmarks/nolima_realmodel_parity.py ... --report        # re-print the tables from the cache

MODEL_DIR is a transformers folder of SmolLM2-135M-Instruct (`harness convert smollm2-135m-instruct
--out DIR`). One vLLM server (see benchmarks/longbench_v2_realmodel_parity.py: `vllm serve MODEL_DIR`
from --vllm-python's environment, float32, eager, no prefix caching) serves it under its default
name, the path, as the reference's `vllm_serve.sh` serves `vllm serve "$MODEL_NAME"`; both pipelines
reach it through a recording proxy in this process.

The data is the tests' NoLiMa fixture (tests/nolima/fixtures.py: needle_set.json and
haystack/rand_shuffle/rand_book_<n>.txt, the released layout), cut to --books books and the first
--tests-per-set tests of each needle set (default 1 and 1: four tests, 0401 onehop/twohop/direct and
0502 onehop, 26 depths each, 104 cells per length), so that the grid fits a shared 2-core CPU.

The reference side runs evaluation/run_tests.py (runpy, as `python run_tests.py --config ...`) once
per length with the checkout's own run config (run_config/multi_test_config_book_<L>.yaml: 26 depths,
metric contains, default system prompt), nothing in it edited or copied. Its model is given the way
the reference takes one: a model config JSON (model_configs/llama_3.3_70b.json's fields, with "model"
= MODEL_DIR, the served name and the tokenizer its "vllm" provider loads, and "api_url" = the
proxy), named on the command line with --model_name and --model_configs_dir. Its real
`openai.AsyncOpenAI` client (--ref-site DIR holds openai, tenacity and jsonargparse when this
environment lacks them) is wrapped only to note, for each request, which tester and depth sent it
(the depth is the order of the calls within a tester, checked against the reply its result file
holds). Modules it imports for other providers only (vertexai, langchain_aws, google.genai) are empty
stand-ins when absent. With more than one book, the book numbering is made the sorted file order
(`os.listdir` order otherwise: docs/nolima-parity.md, difference 1).

Our side: `harness eval --backend openai --base-url PROXY --model MODEL_DIR --tokenizer MODEL_DIR
--tasks nolima,nolima_direct --chat --nolima-data DIR --lengths L,...` under --protocol reference.

Printed per task and length: cells, both scores (the reference: the mean of its result files' metric,
which gather_results.ipynb averages per file; ours: the task's mean), ours - ref with a 95% paired
bootstrap interval over the cells, identical prompts (system and user turns, byte for byte, as the
proxy received them), the same server-side prompt token count (usage.prompt_tokens of both replies)
and identical generated text; then every cell whose two outputs differ.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import runpy
import shutil
import sys
import time
import types
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from parity_kit import (  # the shared server, proxy and interval
    BenchError,
    RecordingProxy,
    VLLMServer,
    add_served_arguments,
    cached_result,
    chat_records,
    check_model_folder,
    exit_code,
    fmt,
    log,
    paired_interval,
    served_eval,
    short,
    write_json,
)

CONFIG_NAME = {250: "250", 500: "500", 1000: "1K", 2000: "2K", 4000: "4K", 8000: "8K", 16000: "16K", 32000: "32K"}
DEPTHS = 26  # the run configs' document_depth_percent_intervals
# `harness eval --lengths` under the reference protocol: 256 and 512 name its 250 and 500 (a length
# is at least 256), a multiple of 250 is taken as written (docs/nolima-parity.md)
OUR_LENGTH = {250: "256", 500: "512"}


def depth_no(depth_percent: float) -> int:
    """The index of a depth in np.linspace(0, 100, 26): 0, 4, 8, ... percent."""
    return round(depth_percent * (DEPTHS - 1) / 100)


def task_of(test_name: str) -> str:
    return "nolima_direct" if test_name.endswith("_direct") else "nolima"


def parse_lengths(spec: str) -> list[int]:
    lengths = [int(x) for x in spec.split(",") if x.strip()]
    bad = [x for x in lengths if x not in CONFIG_NAME]
    if bad or not lengths:
        raise BenchError(f"--lengths takes the reference's run-config lengths {sorted(CONFIG_NAME)}, not {bad or spec}")
    return lengths


def write_data(folder: Path, books: int, tests_per_set: int) -> Path:
    """The tests' fixture in the released layout, cut to `books` books and the first
    `tests_per_set` tests of each needle set."""
    sys.path.insert(0, str(ROOT / "tests"))
    fixtures = importlib.import_module("nolima.fixtures")
    needle_set = []
    for exp in fixtures.NEEDLE_SET:
        exp = dict(exp)
        exp["tests"] = dict(list(exp["tests"].items())[:tests_per_set])
        needle_set.append(exp)
    shutil.rmtree(folder, ignore_errors=True)
    return fixtures.write_nolima(folder, needle_set=needle_set, books=tuple(range(1, books + 1)))


# ---------------------------------------------------------------------------------------------
# The reference side


def _standins() -> None:
    """Empty modules for the providers the "vllm" path never calls, when they are not installed."""
    from nolima_parity import _standins as parity_standins

    for name in ("openai", "tenacity", "jsonargparse"):
        try:
            __import__(name)
        except ImportError:
            raise BenchError(
                f"the reference needs {name}: pass --ref-site DIR holding openai, tenacity and jsonargparse "
                "(pip install --target DIR openai tiktoken tenacity jsonargparse)"
            ) from None
    parity_standins()  # vertexai, langchain_aws, google.genai (and tiktoken) only where absent


class Calls:
    """Which tester and depth each request came from: the real client, its create() noted."""

    def __init__(self):
        self.tester = None
        self.rows: list[dict] = []


def run_reference(args, data_dir: Path, url: str, work: Path, lengths: list[int]) -> dict:
    checkout = Path(args.reference).resolve()
    # a fresh results folder: run_tests.py skips a tester whose result (or its hash) is already there
    shutil.rmtree(work, ignore_errors=True)
    _standins()
    sys.path[:0] = [str(checkout / "evaluation"), str(checkout)]
    connector: Any = importlib.import_module("async_api_connector")  # the checkout's
    evaluate_mod: Any = importlib.import_module("async_evaluate")
    calls = Calls()
    real_client = connector.AsyncOpenAI

    class NotedClient:
        def __init__(self, *a, **k):
            self._real = real_client(*a, **k)
            self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

        async def _create(self, **kw):
            t = calls.tester
            row = {
                "tester": t,
                "depth_no": sum(1 for c in calls.rows if c["tester"] == t),
                "messages": kw["messages"],
                "fields": {k: v for k, v in kw.items() if k not in ("messages", "model")},
            }
            calls.rows.append(row)
            completion = await self._real.chat.completions.create(**kw)
            row["reply"] = completion.choices[0].message.content
            return completion

    connector.AsyncOpenAI = NotedClient
    original = evaluate_mod.NoLiMa_Tester.evaluate

    def evaluate(self):
        calls.tester = (self.test_name, os.path.basename(self.haystack_path))
        return original(self)

    evaluate_mod.NoLiMa_Tester.evaluate = evaluate
    configs = work / "model_configs"
    configs.mkdir(parents=True, exist_ok=True)
    model: dict[str, object] = {"model": str(Path(args.model).resolve()), "api_key": "EMPTY", "api_url": url}
    model["api_provider"] = "vllm"
    model.update({"max_tokens": 192, "temperature": 0.0, "top_p": 1.0, "timeout": 700, "max_retries": 3})
    (configs / "smollm2.json").write_text(json.dumps(model, indent=1))
    haystack_dir = str(data_dir / "haystack" / "rand_shuffle")
    listdir = os.listdir

    def sorted_listdir(path="."):  # book numbering = sorted file names (one book: no change)
        names = listdir(path)
        return sorted(names) if os.path.abspath(path) == os.path.abspath(haystack_dir) else names

    cells: dict = {}
    lost = 0
    mapping_mismatches = 0
    t0 = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(checkout / "evaluation")  # run_tests.sh runs from there (PYTHONPATH=..)
    os.listdir = sorted_listdir
    try:
        for L in lengths:
            results = work / f"CL{L}"
            config = checkout / "evaluation" / "run_config" / f"multi_test_config_book_{CONFIG_NAME[L]}.yaml"
            sys.argv = ["run_tests.py", "--config", str(config), "--model_name", "smollm2"]
            sys.argv += ["--model_configs_dir", str(configs)]
            sys.argv += ["--needle_set_path", str(data_dir / "needlesets" / "needle_set.json")]
            sys.argv += ["--haystack_dir", haystack_dir, "--parent_results_dir", str(results)]
            calls.rows = []
            log(f"reference: run_tests.py --config {config.name}")
            with open(work / f"run_tests_{L}.log", "w") as f, redirect_stdout(f), redirect_stderr(f):
                asyncio.set_event_loop(asyncio.new_event_loop())
                runpy.run_path(str(checkout / "evaluation" / "run_tests.py"), run_name="__main__")
            by_tester: dict = {}
            for c in calls.rows:
                by_tester.setdefault(c["tester"], []).append(c)
            files = sorted(results.rglob("*.json"))
            for path in files:
                res = json.loads(path.read_text())
                book = os.path.basename(res["haystack_path"])
                # this tester's requests in call order, which is depth order: checked by their replies
                rows = by_tester.get((res["test_name"], book), [])
                for k, r in enumerate(res["results"]):
                    key = (task_of(res["test_name"]), L, res["test_name"], book, k)
                    call = rows[k] if k < len(rows) and rows[k].get("reply") == r["response"] else None
                    mapping_mismatches += call is None
                    cells[key] = {
                        "messages": None if call is None else call["messages"],
                        "fields": None if call is None else call["fields"],
                        "prediction": r["response"],
                        "score": int(r["metric"]),
                        "gold": r.get("selected_character"),
                        "prompt_tokens": r.get("prompt_tokens"),
                        "finish_reason": r.get("finish_reason"),
                    }
            lost += len(calls.rows) - sum(len(json.loads(p.read_text())["results"]) for p in files)
    finally:
        os.listdir = listdir
        os.chdir(cwd)
    return {
        "cells": cells,
        "lost_requests": lost,
        "mapping_mismatches": mapping_mismatches,
        "wall_s": round(time.perf_counter() - t0, 1),
        "model_config": model,
    }


# ---------------------------------------------------------------------------------------------
# Our side


def run_ours(args, data_dir: Path, url: str, out: Path, lengths: list[int]) -> dict:
    model = str(Path(args.model).resolve())
    spec = ",".join(OUR_LENGTH.get(L, str(L)) for L in lengths)
    flags = ["--tasks", "nolima,nolima_direct", "--chat", "--nolima-data", str(data_dir), "--lengths", spec]
    run = served_eval(url, model, flags, out, threads=args.threads, concurrency=args.concurrency)
    cells = {}
    for r in run["samples"]:
        m = r["metadata"]
        key = (r["task"], m.get("haystack_tokens", r["length"]), m["test"], m["book"], depth_no(m["depth"]))
        cells[key] = {"prediction": r["prediction"], "score": int(r["score"]), "gold": m.get("character")}
    return {"cells": cells, "command": run["command"], "wall_s": run["wall_s"]}


# ---------------------------------------------------------------------------------------------
# Comparison


def compare(ref: dict, ours: dict, records: list[dict]) -> list[dict]:
    """One row per cell of either side. The same prompt: our requests hold the reference's messages
    for the cell byte for byte, and the server's reply to them is our stored prediction of the same
    cell (our store keeps predictions, the proxy the messages)."""
    ours_sent = {json.dumps(c["messages"], sort_keys=True): c for c in chat_records(records, "ours")}
    rows = []
    for key in sorted(set(ref["cells"]) | set(ours["cells"])):
        r, o = ref["cells"].get(key), ours["cells"].get(key)
        mine = None
        if r is not None and r["messages"] is not None:
            mine = ours_sent.get(json.dumps(r["messages"], sort_keys=True))
        same_prompt = mine is not None and o is not None and mine["text"] == o["prediction"]
        rows.append(
            {
                "task": key[0],
                "length": key[1],
                "test": key[2],
                "book": key[3],
                "depth_no": key[4],
                "gold": (r or o or {}).get("gold"),
                "ref_prediction": None if r is None else r["prediction"],
                "our_prediction": None if o is None else o["prediction"],
                "ref_score": None if r is None else r["score"],
                "our_score": None if o is None else o["score"],
                "same_prompt": same_prompt,
                "same_count": r is not None and mine is not None and r["prompt_tokens"] == mine["prompt_tokens"],
                "same_text": r is not None and o is not None and r["prediction"] == o["prediction"],
                "ref_prompt_tokens": None if r is None else r["prompt_tokens"],
                "our_prompt_tokens": None if mine is None else mine["prompt_tokens"],
            }
        )
    return rows


def unmatched(ref: dict, records: list[dict]) -> int:
    """Our chat requests whose messages no reference cell sent."""
    theirs = {json.dumps(c["messages"], sort_keys=True) for c in ref["cells"].values() if c["messages"]}
    return sum(json.dumps(c["messages"], sort_keys=True) not in theirs for c in chat_records(records, "ours"))


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["task"], r["length"]), []).append(r)
    for (task, length), rs in sorted(groups.items()):
        both = [r for r in rs if r["ref_score"] is not None and r["our_score"] is not None]
        lo, hi = paired_interval([r["our_score"] for r in both], [r["ref_score"] for r in both], f"{task}-{length}")
        ref = [r["ref_score"] for r in rs if r["ref_score"] is not None]
        ours = [r["our_score"] for r in rs if r["our_score"] is not None]
        out.append(
            {
                "task": task,
                "length": length,
                "ref_cells": len(ref),
                "our_cells": len(ours),
                "ref": round(100 * sum(ref) / len(ref), 2) if ref else None,
                "ours": round(100 * sum(ours) / len(ours), 2) if ours else None,
                "diff": round(100 * sum(r["our_score"] - r["ref_score"] for r in both) / len(both), 2)
                if both
                else None,
                "low": lo,
                "high": hi,
                "n": len(rs),
                "same_prompt": sum(r["same_prompt"] for r in rs),
                "same_count": sum(r["same_count"] for r in rs),
                "same_text": sum(r["same_text"] for r in rs),
            }
        )
    return out


def print_tables(res: dict) -> None:
    s = res["settings"]
    print(
        f"\n## NoLiMa on {Path(s['model']).name} behind vllm serve: run_tests.py (adobe-research/NoLiMa 7532e4e) "
        f"vs harness eval --backend openai\n"
    )
    print(
        f"{s['dtype']}, served context {s['max_model_len']}, greedy (both: temperature 0; the reference top_p 1, "
        f"seed 43; ours seed 0), max_tokens 192, {s['books']} book(s), {s['tests_per_set']} test(s) per needle set, "
        f"26 depths; reference requests lost to its file naming: {res['reference']['lost_requests']}; "
        f"request-to-depth mapping misses: {res['reference']['mapping_mismatches']}\n"
    )
    print(
        "| task | length | cells ref / ours | reference | ours | ours − ref | paired 95% | same prompt | "
        "same server prompt tokens | same output |"
    )
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---:|")
    tot = [0, 0, 0, 0]
    for c in res["summary"]:
        tot = [tot[0] + c["n"], tot[1] + c["same_prompt"], tot[2] + c["same_count"], tot[3] + c["same_text"]]
        print(
            f"| {c['task']} | {c['length']} | {c['ref_cells']} / {c['our_cells']} | {fmt(c['ref'])} | {fmt(c['ours'])} | "
            f"{fmt(c['diff'], '+.2f')} | [{fmt(c['low'], '+.1f')}, {fmt(c['high'], '+.1f')}] | "
            f"{c['same_prompt']}/{c['n']} | {c['same_count']}/{c['n']} | {c['same_text']}/{c['n']} |"
        )
    print(f"| **all** | | | | | | | {tot[1]}/{tot[0]} | {tot[2]}/{tot[0]} | {tot[3]}/{tot[0]} |")
    print(f"\nour requests with messages the reference never sent: {res.get('unmatched_ours')}")
    fields = res.get("fields", {})
    print(
        f"\nrequest fields besides model and messages: reference {fields.get('reference')}; ours {fields.get('ours')}"
    )
    diff = [r for r in res["rows"] if not r["same_text"]]
    print(f"\n## Cells whose outputs differ: {len(diff)} (outputs as JSON strings, cut to 40 characters)\n")
    if diff:
        print("| task | length | test | book | depth | gold | reference output | our output | ref | ours |")
        print("|---|---:|---|---|---:|---|---|---|---:|---:|")
        for r in diff:
            print(
                f"| {r['task']} | {r['length']} | {r['test']} | {r['book']} | {4 * r['depth_no']}% | {r['gold']} | "
                f"`{short(r['ref_prediction'])}` | `{short(r['our_prediction'])}` | {fmt(r['ref_score'], 'd')} | "
                f"{fmt(r['our_score'], 'd')} |"
            )
    print(
        f"\ntime: the reference's run_tests.py {res['reference']['wall_s']:.0f} s wall (26 requests at a time per "
        f"tester); ours {res['ours']['wall_s']:.0f} s wall (harness eval, --concurrency {s['concurrency']})"
    )


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, help="a checkout of adobe-research/NoLiMa (7532e4e)")
    ap.add_argument("--model", required=True, help="the transformers folder the server serves (SmolLM2)")
    ap.add_argument("--lengths", default="250,500,1000", help="haystack sizes, the run configs' (default 250,500,1000)")
    ap.add_argument("--books", type=int, default=1, help="fixture books (default 1)")
    ap.add_argument("--tests-per-set", type=int, default=1, help="the first N tests of each needle set (default 1)")
    add_served_arguments(
        ap, "a folder holding openai, tenacity and jsonargparse, added to sys.path", "runs/nolima-realmodel-parity"
    )
    args = ap.parse_args(argv)
    if args.books < 1 or args.tests_per_set < 1:
        ap.error("--books and --tests-per-set must be at least 1")
    return args


def run_tag(args) -> str:
    return f"{args.dtype}-{args.max_model_len}-b{args.books}-t{args.tests_per_set}-{args.lengths.replace(',', '_')}"


def main(argv=None) -> int:
    return exit_code(run, parse_args(argv))


def run(args) -> int:
    out = Path(args.out).resolve() / run_tag(args)
    lengths = parse_lengths(args.lengths)
    if args.report:
        print_tables(cached_result(out))
        return 0
    checkout = Path(args.reference).resolve()
    if not (checkout / "evaluation" / "run_tests.py").is_file():
        raise BenchError(f"{checkout} is not a NoLiMa checkout (no evaluation/run_tests.py): pass --reference DIR")
    check_model_folder(args.model)
    if args.ref_site:
        sys.path.append(str(Path(args.ref_site).resolve()))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    data_dir = write_data(out / "data", args.books, args.tests_per_set)
    model = str(Path(args.model).resolve())
    server = VLLMServer(model, args.max_model_len, args.dtype, args.vllm_python, out / "vllm.log", args.threads)
    proxy = RecordingProxy(server.url)
    cache = out / "reference.json"
    key = {"model": model, "lengths": lengths, "books": args.books, "tests_per_set": args.tests_per_set}
    key.update(dtype=args.dtype, max_model_len=args.max_model_len, reference=str(checkout))
    try:
        old = json.loads(cache.read_text()) if cache.is_file() else None
        if old and old.get("key") == key:  # the reference side of the same settings (a later step failed)
            ref = old["reference"]
            ref["cells"] = {tuple(c["key"]): c for c in ref["cells"]}
            log(f"reference: {len(ref['cells'])} cells from {cache}")
        else:
            proxy.side = "reference"
            ref = run_reference(args, data_dir, proxy.url, out / "reference", lengths)
            ref["fields"] = sorted(
                {json.dumps(c["fields"], sort_keys=True) for c in chat_records(proxy.records, "reference")}
            )
            cells = [{"key": list(k), **c} for k, c in ref["cells"].items()]
            write_json(cache, {"key": key, "reference": {**ref, "cells": cells}})
            log(f"reference: {len(ref['cells'])} cells, {ref['wall_s']} s")
        proxy.side = "ours"
        ours = run_ours(args, data_dir, proxy.url, out, lengths)
        log(f"ours: {len(ours['cells'])} cells, {ours['wall_s']} s")
        proxy.side = ""
        rows = compare(ref, ours, proxy.records)
    finally:
        proxy.close()
        server.stop()
    write_json(out / "proxy.json", proxy.records)
    fields = {
        "reference": ref["fields"],
        "ours": sorted({json.dumps(c["fields"], sort_keys=True) for c in chat_records(proxy.records, "ours")}),
    }
    res = {
        "settings": {
            "model": model,
            "lengths": lengths,
            "books": args.books,
            "tests_per_set": args.tests_per_set,
            "dtype": args.dtype,
            "max_model_len": args.max_model_len,
            "concurrency": args.concurrency,
            "server": server.command,
        },
        "reference": {k: v for k, v in ref.items() if k != "cells"},
        "ours": {"command": ours["command"], "wall_s": ours["wall_s"]},
        "fields": fields,
        "unmatched_ours": unmatched(ref, proxy.records),
        "rows": rows,
        "summary": summarize(rows),
    }
    write_json(out / "result.json", res)
    print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
