"""Prompt and metric parity with adobe-research/NoLiMa: the reference's own code beside our tasks.

    python benchmarks/nolima_parity.py --reference /tmp/ref/NoLiMa                 # print the table
    python benchmarks/nolima_parity.py --reference /tmp/ref/NoLiMa --write-pin tests/nolima/parity_pin.json

The reference side runs evaluation/run_tests.py unmodified (its argument filling, per-test seeds,
async_evaluate.NoLiMa_Tester.evaluate with its np.random character draws, data/book_haystack.py's
placement, its "contains" metric), once per length with the checkout's own run config
(run_config/multi_test_config_book_<L>.yaml: context_length, 26 depths, metric, default system
prompt), on the fixture folder of tests/nolima/fixtures.py and the test BPE tokenizer
(harness.models.embedded.build_tokenizer) as its "vllm" provider's tokenizer. No model, hub or server:
the OpenAI client is a stand-in that records each chat request (system and user turns) and
answers with a prediction made from the request (see `prediction`), which the reference then
scores. Modules it imports for other providers (tiktoken, vertexai, langchain_aws, google.genai)
get empty stand-ins; jsonargparse and tenacity are used when importable (--ref-site DIR adds a
folder holding them), else minimal stand-ins (argparse reading the YAML config; a retry
decorator that calls once). The reference numbers the books in os.listdir order, a file-system
accident; it is given sorted order, the order our tasks use (docs/nolima-parity.md).

Our side builds every cell of both tasks under --protocol reference (tasks x lengths x tests x
books x depths) and scores the same predictions. Printed per task and length: cells on each side,
and mismatches of the user prompt (byte for byte), the system turn, the token budget, the gold
character and the metric. --write-pin stores, per task and length, the cell count, a digest of
the reference's prompts in cell order and its metric bits, which tests/nolima/test_nolima_parity.py
checks against our tasks without the checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import os
import runpy
import sys
import tempfile
import types
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "benchmarks"))  # parity_kit.py beside this script, imported by name

from parity_kit import importable, stand_in, write_json  # after the sys.path lines above

LENGTHS = (250, 500, 1000, 2000, 4000, 8000)  # the fixture books hold ~11K tokens
CONFIG_NAME = {250: "250", 500: "500", 1000: "1K", 2000: "2K", 4000: "4K", 8000: "8K", 16000: "16K", 32000: "32K"}
TASKS = ("nolima", "nolima_direct")
OTHER = "Zed"  # a name no fixture book or needle holds


def prediction(depth_no: int, gold: str) -> str:
    """The model's answer at a depth: a mix the "contains" metric scores 1 and 0 (case, prefixes,
    an empty answer, another name, the name inside a sentence)."""
    forms = [
        gold,
        f"The answer is {gold}.",
        gold.lower(),
        gold + "ko",
        "",
        OTHER,
        f"{OTHER} or {gold}",
        "I don't know",
        gold.upper(),
        f" {gold}\n",
        gold[:-1],
    ]
    return forms[depth_no % len(forms)]


def fixture(folder: Path) -> tuple[Path, Path]:
    """The fixture data folder (the reference's layout) and the test tokenizer, both built here."""
    sys.path.insert(0, str(ROOT / "tests"))
    from harness.models.embedded import build_tokenizer

    write_nolima = importlib.import_module("nolima.fixtures").write_nolima  # tests/nolima/fixtures.py

    data_dir = write_nolima(folder / "data")
    return data_dir, Path(build_tokenizer(folder / "tokenizer"))


# --------------------------------------------------------------------------------------------
# our side
# --------------------------------------------------------------------------------------------
def our_cells(data_dir: Path, tokenizer, lengths) -> dict:
    """{(task, length): {(test, book, depth_no): (system, prompt, max_tokens, gold, score)}}."""
    from tasks.nolima import data
    from tasks.nolima.tasks import NoLiMaTask
    from tasks.registry import get_task

    data.set_data_dir(data_dir)
    out: dict = {}
    try:
        for name in TASKS:
            task = get_task(name)
            assert isinstance(task, NoLiMaTask)
            task.set_protocol("reference")
            for L in lengths:
                cells = out.setdefault((name, L), {})
                for index in range(task.default_samples(L) or 0):
                    test, _, depth_no = task.cell(index)
                    s = task.sample(L, index, 42, tokenizer)
                    gold = s.references[0]
                    score = task.score(prediction(depth_no, gold), s)
                    key = (test.name, s.metadata["book"], depth_no)
                    cells[key] = (task.reference_system_prompt, s.prompt, s.max_new_tokens, gold, int(score))
    finally:
        data.set_data_dir(None)
    return out


def digest(cells: dict) -> dict:
    """The pinned form of one (task, length): count, prompt digest and metric bits in key order."""
    keys = sorted(cells)
    h = hashlib.sha256()
    for k in keys:
        h.update(hashlib.sha256(cells[k][1].encode()).digest())
    return {
        "cells": len(keys),
        "prompts_sha256": h.hexdigest(),
        "metric": "".join(str(cells[k][4]) for k in keys),
        "system": sorted({str(cells[k][0]) for k in keys}),
        "max_tokens": sorted({cells[k][2] for k in keys}),
    }


# --------------------------------------------------------------------------------------------
# the reference's side
# --------------------------------------------------------------------------------------------
def _standins() -> None:
    """Empty modules for the API providers the parity never calls; minimal jsonargparse/tenacity
    when they are not installed."""

    class _Any:
        def __init__(self, *a, **k):
            pass

    def _absent(name: str) -> bool:
        return not importable(name)

    if _absent("openai"):
        stand_in(
            "openai", AsyncOpenAI=_Any, AsyncAzureOpenAI=_Any, RateLimitError=type("RateLimitError", (Exception,), {})
        )
    if _absent("tiktoken"):
        stand_in("tiktoken", encoding_for_model=lambda *a, **k: None)
    for name in ("vertexai", "vertexai.preview", "vertexai.preview.tokenization"):
        if name not in sys.modules and _absent(name):
            stand_in(name, get_tokenizer_for_model=lambda *a, **k: None)
    if _absent("vertexai.preview.generative_models"):
        sys.modules["vertexai.preview"].generative_models = stand_in("vertexai.preview.generative_models")  # type: ignore[attr-defined]
    if _absent("langchain_aws"):
        stand_in("langchain_aws", ChatBedrockConverse=_Any)
    if _absent("google.genai"):
        google: Any = importlib.import_module("google")  # protobuf's namespace package (transformers' deps)

        errors = stand_in("google.genai.errors", ClientError=type("ClientError", (Exception,), {}))
        genai = stand_in("google.genai", Client=_Any, types=stand_in("google.genai.types"), errors=errors)
        google.genai = genai
    if _absent("tenacity"):

        def retry(*a, **k):
            return lambda f: f

        nothing = lambda *a, **k: None
        stand_in(
            "tenacity",
            retry=retry,
            wait_random_exponential=nothing,
            stop_after_delay=nothing,
            retry_if_exception_type=nothing,
            retry_if_exception_message=nothing,
            wait_random=nothing,
        )
    if _absent("jsonargparse"):
        yaml = importlib.import_module("yaml")

        class ActionConfigFile(argparse.Action):
            def __call__(self, parser, namespace, values, option_string=None):
                for key, value in (yaml.safe_load(Path(values).read_text()) or {}).items():
                    setattr(namespace, key, value)

        stand_in("jsonargparse", ArgumentParser=argparse.ArgumentParser, ActionConfigFile=ActionConfigFile)


class _Recorder:
    """The stand-in AsyncOpenAI client: records each chat request and answers it."""

    calls: ClassVar[list[dict]] = []
    tester = None  # the NoLiMa_Tester whose evaluate() is running
    names: ClassVar[set[str]] = set()

    def __init__(self, *a, **k):
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    async def _create(self, model, messages, **kwargs):
        t = _Recorder.tester
        depth_no = sum(1 for c in _Recorder.calls if c["tester"] is t)
        user = messages[-1]["content"]
        found = [n for n in sorted(_Recorder.names) if n in user]
        gold = found[0] if len(found) == 1 else ""
        serial = len(_Recorder.calls)
        _Recorder.calls.append(
            {"tester": t, "depth_no": depth_no, "messages": messages, "kwargs": kwargs, "gold": gold, "serial": serial}
        )
        usage = types.SimpleNamespace(prompt_tokens=serial, completion_tokens=0, total_tokens=serial)
        message = types.SimpleNamespace(content=prediction(depth_no, gold))
        return types.SimpleNamespace(
            choices=[types.SimpleNamespace(message=message, finish_reason="stop")], usage=usage
        )


def reference_cells(checkout: Path, data_dir: Path, tokenizer_dir: Path, lengths, work: Path) -> dict:
    """Run run_tests.py per length; {(task, length): {(test, book, depth_no): (...)}} as ours."""
    _standins()
    sys.path[:0] = [str(checkout / "evaluation"), str(checkout)]
    async_api_connector: Any = importlib.import_module("async_api_connector")  # the checkout's
    async_evaluate: Any = importlib.import_module("async_evaluate")
    async_api_connector.AsyncOpenAI = _Recorder
    needle_set = json.loads((data_dir / "needlesets" / "needle_set.json").read_text())
    _Recorder.names = {c for exp in needle_set for c in exp.get("character_set", [])}
    original = async_evaluate.NoLiMa_Tester.evaluate

    def evaluate(self):
        _Recorder.tester = self
        asyncio.set_event_loop(asyncio.new_event_loop())  # get_event_loop() needs one on 3.12+
        return original(self)

    async_evaluate.NoLiMa_Tester.evaluate = evaluate
    # Its result files are named by int(time.time()): two testers in one second (instant answers)
    # would share a name and the second be skipped as "already exists". A clock that ticks a second
    # per call keeps every file.
    clock = iter(range(1_700_000_000, 1_800_000_000))
    async_evaluate.time = types.SimpleNamespace(time=lambda: next(clock))
    configs = work / "model_configs"
    configs.mkdir(parents=True, exist_ok=True)
    model: dict[str, object] = {
        "model": str(tokenizer_dir),
        "api_key": "EMPTY",
        "api_url": "http://127.0.0.1:9/v1",
        "api_provider": "vllm",
    }
    model.update({"max_tokens": 192, "temperature": 0.0, "top_p": 1.0, "timeout": 700, "max_retries": 3})
    (configs / "parity.json").write_text(json.dumps(model))
    haystack_dir = str(data_dir / "haystack" / "rand_shuffle")
    listdir = os.listdir

    def sorted_listdir(path="."):  # the reference's book numbering, made the file-name order
        names = listdir(path)
        return sorted(names) if os.path.abspath(path) == os.path.abspath(haystack_dir) else names

    out: dict = {}
    os.listdir = sorted_listdir
    try:
        for L in lengths:
            results = work / f"CL{L}"
            # the checkout's config of that length; another length: the 1K config, context_length set
            name = CONFIG_NAME.get(L, "1K")
            config = checkout / "evaluation" / "run_config" / f"multi_test_config_book_{name}.yaml"
            argv = ["run_tests.py", "--config", str(config), "--model_name", "parity"]
            argv += [
                "--model_configs_dir",
                str(configs),
                "--needle_set_path",
                str(data_dir / "needlesets" / "needle_set.json"),
            ]
            argv += ["--haystack_dir", haystack_dir, "--parent_results_dir", str(results)]
            if L not in CONFIG_NAME:
                argv += ["--context_length", str(L)]
            _Recorder.calls = []
            sys.argv = argv
            with open(work / f"run_tests_{L}.log", "w") as log, redirect_stdout(log), redirect_stderr(log):
                runpy.run_path(str(checkout / "evaluation" / "run_tests.py"), run_name="__main__")
            by_serial = {c["serial"]: c for c in _Recorder.calls}
            for path in sorted(results.rglob("*.json")):
                res = json.loads(path.read_text())
                task = "nolima_direct" if res["test_name"].endswith("_direct") else "nolima"
                if res["context_length"] != L:
                    raise SystemExit(f"{path}: context_length {res['context_length']} != {L}")
                cells = out.setdefault((task, L), {})
                for depth_no, r in enumerate(res["results"]):
                    call = by_serial[r["prompt_tokens"]]
                    assert call["depth_no"] == depth_no, (path, depth_no)
                    msgs = call["messages"]
                    system = msgs[0]["content"] if msgs[0]["role"] == "system" else None
                    key = (res["test_name"], os.path.basename(res["haystack_path"]), depth_no)
                    gold = r.get("selected_character", "")
                    cells[key] = (system, msgs[-1]["content"], call["kwargs"].get("max_tokens"), gold, int(r["metric"]))
    finally:
        os.listdir = listdir
    return out


# --------------------------------------------------------------------------------------------
def compare(ref: dict, ours: dict) -> tuple[list[str], dict]:
    """Per (task, length): cell counts and mismatches per field; the lines to print and the pin."""
    fields = ("system", "prompt", "max_tokens", "gold", "metric")
    lines = [f"{'task':14} {'length':>6} {'ref':>5} {'ours':>5} " + " ".join(f"{f:>10}" for f in fields) + "  hits"]
    pin: dict = {}
    for task, L in sorted(set(ref) | set(ours)):
        r, o = ref.get((task, L), {}), ours.get((task, L), {})
        bad = {f: 0 for f in fields}
        for key in set(r) | set(o):
            if key not in r or key not in o:
                bad = {f: n + 1 for f, n in bad.items()}
                continue
            for i, f in enumerate(fields):
                bad[f] += r[key][i] != o[key][i]
        hits = sum(c[4] for c in r.values())
        lines.append(
            f"{task:14} {L:>6} {len(r):>5} {len(o):>5} " + " ".join(f"{bad[f]:>10}" for f in fields) + f"  {hits}"
        )
        pin.setdefault(task, {})[str(L)] = {**digest(r), "mismatches": bad}
    return lines, pin


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=True, help="a checkout of adobe-research/NoLiMa (7532e4e)")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="haystack sizes (reference units)")
    ap.add_argument("--ref-site", help="a folder holding the reference's jsonargparse/tenacity (else stand-ins)")
    ap.add_argument("--write-pin", help="write the pinned output (JSON) here")
    args = ap.parse_args(argv)
    if args.ref_site:
        sys.path.insert(0, args.ref_site)
    lengths = [int(x) for x in args.lengths.split(",")]
    checkout = Path(args.reference).resolve()
    if not (checkout / "evaluation" / "run_tests.py").is_file():
        raise SystemExit(f"{checkout} is not a NoLiMa checkout (no evaluation/run_tests.py): pass --reference DIR")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_dir, tok_dir = fixture(work)
        from harness.models.tokenization import load_tokenizer

        ours = our_cells(data_dir, load_tokenizer(str(tok_dir)), lengths)
        cwd = os.getcwd()
        os.chdir(work)
        try:
            ref = reference_cells(checkout, data_dir, tok_dir, lengths, work / "ref")
        finally:
            os.chdir(cwd)
    lines, pin = compare(ref, ours)
    print("\n".join(lines))
    total = sum(sum(v["mismatches"].values()) for t in pin.values() for v in t.values())
    cells = sum(v["cells"] for t in pin.values() for v in t.values())
    print(f"{cells} cells, {total} mismatches")
    if args.write_pin:
        write_json(args.write_pin, {"lengths": lengths, "tasks": pin}, ensure_ascii=True, sort_keys=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
