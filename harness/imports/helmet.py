"""HELMET's per-dataset outputs (princeton-nlp/HELMET eval.py `run_test`, read by
scripts/collect_results.py).

eval.py writes `<output_dir>/<dataset>_<tag>_<test_name>_in<L>_size<N>_shots<k>_samp<bool>max<G>min<g>
t<T>p<P>_chat<bool>_<seed>.json` = {"args": {...}, "data": [...], "metrics": {...}, "averaged_metrics":
{metric: mean x100}, "throughput": ...} and, beside it (not for ALCE), `<same>.json.score` = the
averaged_metrics alone; the GPT-4 judged datasets add `<same>-gpt4eval_o.json`. collect_results.py
takes each dataset's metric from `dataset_to_metrics` and scales "gpt-4-score" (0-3) by 100/3 and
"gpt-4-f1" (0-1) by 100; the dataset is matched by substring (`kilt_nq` is nq, `icl_trec_coarse_6600shot_balance`
is trec_coarse). The length is `input_max_length` (`_in<L>_`), in Llama-2 tokens for HELMET's data.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.errors import UserError
from harness.imports.cells import Cell, Source, loads_json, number, percent, read_text
from harness.imports.helmet_samples import attach

_WHAT = "a HELMET output <dataset>_..._in<L>_...json or its .json.score (written by HELMET's eval.py)"

# HELMET dataset -> [(metric, suite, our task)]: collect_results.py's dataset_to_metrics, our names.
_DATASETS: dict[str, list[tuple[str, str, str]]] = {
    "json_kv": [("substring_exact_match", "helmet", "helmet_json_kv")],
    "nq": [("substring_exact_match", "helmet", "helmet_nq")],
    "popqa": [("substring_exact_match", "helmet", "helmet_popqa")],
    "triviaqa": [("substring_exact_match", "helmet", "helmet_triviaqa")],
    "hotpotqa": [("substring_exact_match", "helmet", "helmet_hotpotqa")],
    "narrativeqa": [("gpt-4-score", "helmet", "helmet_narrativeqa")],
    "msmarco_rerank_psg": [("NDCG@10", "helmet", "helmet_msmarco")],
    "trec_coarse": [("exact_match", "helmet", "helmet_icl_trec_coarse")],
    "trec_fine": [("exact_match", "helmet", "helmet_icl_trec_fine")],
    "banking77": [("exact_match", "helmet", "helmet_icl_banking77")],
    "clinic150": [("exact_match", "helmet", "helmet_icl_clinic150")],
    "nlu": [("exact_match", "helmet", "helmet_icl_nlu")],
    "multi_lexsum": [("gpt-4-f1", "helmet", "helmet_multi_lexsum")],
    "infbench_qa": [("rougeL_f1", "helmet", "helmet_infbench_qa")],
    "infbench_choice": [("exact_match", "helmet", "helmet_infbench_choice")],
    "infbench_sum": [("gpt-4-f1", "helmet", "helmet_infbench_sum")],
    "alce_asqa": [
        ("str_em", "helmet", "helmet_alce_asqa"),
        ("citation_rec", "helmet", "helmet_alce_asqa_citation_rec"),
        ("citation_prec", "helmet", "helmet_alce_asqa_citation_prec"),
    ],
    "alce_qampari": [
        ("qampari_rec_top5", "helmet", "helmet_alce_qampari"),
        ("citation_rec", "helmet", "helmet_alce_qampari_citation_rec"),
        ("citation_prec", "helmet", "helmet_alce_qampari_citation_prec"),
    ],
}
# HELMET's RULER datasets (configs/ruler.yaml): the three of its Recall category stay in the helmet
# suite as well; all of them form a RULER row made the HELMET way.
_RULER = {
    "ruler_niah_s_1": "niah_single_1",
    "ruler_niah_s_2": "niah_single_2",
    "ruler_niah_s_3": "niah_single_3",
    "ruler_niah_mk_1": "niah_multikey_1",
    "ruler_niah_mk_2": "niah_multikey_2",
    "ruler_niah_mk_3": "niah_multikey_3",
    "ruler_niah_mq": "niah_multiquery",
    "ruler_niah_mv": "niah_multivalue",
    "ruler_cwe": "cwe",
    "ruler_fwe": "fwe",
    "ruler_vt": "vt",
    "ruler_qa_1": "qa_1",
    "ruler_qa_2": "qa_2",
}
for _d, _ours in _RULER.items():
    metric = "substring_exact_match" if "qa" in _d else "ruler_recall"
    _DATASETS[_d] = [(metric, "ruler", _ours)]
_DATASETS["ruler_niah_mk_2"].append(("ruler_recall", "helmet", "helmet_niah_mk_2"))
_DATASETS["ruler_niah_mk_3"].append(("ruler_recall", "helmet", "helmet_niah_mk_3"))
_DATASETS["ruler_niah_mv"].append(("ruler_recall", "helmet", "helmet_niah_mv"))

_NAME = re.compile(
    r"(?P<stem>.+?)_in(?P<L>\d+)_size(?P<size>\d+)_shots\d+_samp(?:True|False)max\d+min\d+t[^_]*p[^_]*"
    r"_chat(?P<chat>True|False)_\d+(?:-gpt4eval_o)?\.json(?:\.score)?"
)

_HELMET_PROTOCOL = {
    "length rule": "input_max_length L: HELMET's data prepared at L in Llama-2 tokens; a prompt longer than "
    "L - generation_max_length in the model's tokens has its context cut",
    "truncation": "the end of the context field (model_utils: the context's last tokens are dropped)",
}


def _dataset(stem: str) -> str | None:
    """collect_results.py's substring match, longest name first (`ruler_niah_mk_2` before `nq`)."""
    for d in sorted(_DATASETS, key=len, reverse=True):
        if d in stem:
            return d
    return None


def _scale(metric: str, value: float) -> float:
    return value * (100 if metric == "gpt-4-f1" else 1) * (100 / 3 if metric == "gpt-4-score" else 1)


def read(path: Path, text: str, length: int | None = None) -> tuple[list[Cell], Source]:
    """The file's cells, with their samples from the output json (the file itself, or the one beside a
    `.json.score`), and the run's source."""
    data = loads_json(text, path, _WHAT)
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object: pass {_WHAT}")
    full, full_path, entry = _full_output(path, data)
    m = _NAME.fullmatch(path.name)
    args: dict = _obj(full, "args") or _obj(data, "args")
    metrics = _averaged_metrics(path, data)
    dataset_name = str(args.get("dataset") or (m.group("stem") if m else ""))
    dataset = _dataset(dataset_name) if dataset_name else None
    if dataset is None:
        raise UserError(
            f"{path}: no HELMET dataset named in {'its args' if args else 'its file name'} "
            f"({dataset_name[:40] or 'none'}): pass {_WHAT}"
        )
    L = _input_length(path, args, m, length)
    count = len(full["data"]) if isinstance(full.get("data"), list) else None
    source = _source(path, args, m)
    if entry is not None:
        source.files.append(entry)
    prompt = metrics.get("input_len")
    prompt = float(prompt) if isinstance(prompt, (int, float)) and not isinstance(prompt, bool) and prompt > 0 else None
    cells = []
    for metric, suite, task in _DATASETS[dataset]:
        if metric not in metrics:
            if suite == "ruler" and dataset in ("ruler_niah_mk_2", "ruler_niah_mk_3", "ruler_niah_mv"):
                continue
            raise UserError(f'{path}: no "{metric}" among its metrics ({dataset}\'s metric in HELMET): pass {_WHAT}')
        v = _scale(metric, number(metrics[metric], path, f'"{metric}"'))
        score = percent(v, path, f'"{metric}" (as HELMET reports it)')
        cells.append((metric, Cell(suite, task, L, score, count, str(path), prompt_tokens=prompt)))
    if path.name.endswith("-gpt4eval_o.json"):  # judged scores: no per-sample metric to pair
        return [c for _, c in cells], source
    return attach(full_path or path, full, cells, _count(args.get("generation_max_length"))), source


def _full_output(path: Path, data: dict) -> tuple[dict, Path | None, dict | None]:
    """(eval.py's output json, its path, its {"file", "sha256"} when read from beside): the file
    itself when it holds "data", else the json a `.json.score` was written from, when it is there."""
    if isinstance(data.get("data"), list):
        return data, path, None
    beside = path.with_name(path.name.removesuffix(".score")) if path.name.endswith(".json.score") else None
    if beside is None or not beside.is_file():
        return {}, None, None
    text, digest = read_text(beside)
    full = loads_json(text, beside, _WHAT)
    if not isinstance(full, dict):
        raise UserError(f"{beside} is not a JSON object: pass {_WHAT}")
    return full, beside, {"file": str(beside), "sha256": digest}


def _count(value) -> int | None:
    """A count from HELMET's args (an int, or the digits eval.py was given)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value > 0 else None
    return int(value) if isinstance(value, str) and value.isdigit() and int(value) > 0 else None


def _averaged_metrics(path: Path, data: dict) -> dict:
    """{metric: mean x100}: the output's "averaged_metrics", or the whole of a .json.score file."""
    if "averaged_metrics" in data:
        metrics = data["averaged_metrics"]
        if not isinstance(metrics, dict):
            raise UserError(f'{path}: "averaged_metrics" is not an object: pass {_WHAT}')
        return metrics
    if path.name.endswith(".score"):
        return data
    raise UserError(f'{path} has no "averaged_metrics": pass {_WHAT}')


def _input_length(path: Path, args: dict, m: re.Match | None, length: int | None) -> int:
    """L: --length, else args.input_max_length, else the name's _in<L>_."""
    L = length
    if L is None and isinstance(args.get("input_max_length"), int):
        L = int(args["input_max_length"])
    if L is None and m:
        L = int(m.group("L"))
    if not L:
        raise UserError(f"{path}: no input_max_length in its args or its name (_in<L>_): pass --length L")
    return L


def _source(path: Path, args: dict, m: re.Match | None) -> Source:
    """The run's model and tag, and HELMET's protocol with the chat template it was run with."""
    chat = args.get("use_chat_template")
    chat = chat if isinstance(chat, bool) else (m.group("chat") == "True" if m else None)
    # HELMET names its output folder by the model's basename (arguments.py): the same name either way
    model = str(args.get("model_name_or_path") or "").rstrip("/").split("/")[-1] or path.resolve().parent.name
    template = (
        "the model's chat template (use_chat_template True)"
        if chat
        else "none: HELMET's plain demo + input templates (use_chat_template False)"
        if chat is False
        else "as use_chat_template was set (not recorded)"
    )
    short_t = "chat template" if chat else "no chat template" if chat is False else "template not recorded"
    proto = {
        "summary": f"HELMET's data at L Llama-2 tokens, {short_t}, context cut at its end",
        **_HELMET_PROTOCOL,
        "template": template,
    }
    tag = args.get("tag")
    return Source(
        harness="HELMET",
        version=f"tag {tag}" if tag else None,
        model=str(model) if model else None,
        protocol={"helmet": proto, "ruler": proto},
        settings=_settings(args, chat),
    )


_API = (("gpt", "openai"), ("claude", "anthropic"), ("gemini", "gemini"), ("togetherapi", "together"))


def _settings(args: dict, chat: bool | None) -> dict[str, object]:
    """What HELMET's args say moves scores (arguments.py; model_utils.py loads HF and vLLM models in
    bfloat16 unless --no_bf16)."""
    if not args:
        return {}
    model = str(args.get("model_name_or_path") or "")
    api = next((name for key, name in _API if key in model), None)  # model_utils.load_LLM's order
    flags = (("use_vllm", "vllm"), ("use_tgi_or_vllm_serving", "tgi/vllm serving"), ("use_sglang", "sglang"))
    backend = api or next((name for flag, name in flags if args.get(flag)), "hf")
    seed = args.get("seed")
    return {
        "backend": backend,
        "dtype": None if api else "float32" if args.get("no_bf16") else "bfloat16",
        "max_model_len": _count(args.get("input_max_length")),
        "template": "chat template" if chat else "none" if chat is False else None,
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
    }


def _obj(data: dict, key: str) -> dict:
    """data[key] when it is an object, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}
