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
from harness.imports.cells import Cell, Source, loads_json, number, percent

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
    data = loads_json(text, path, _WHAT)
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object: pass {_WHAT}")
    m = _NAME.fullmatch(path.name)
    args: dict = _obj(data, "args")
    metrics = _averaged_metrics(path, data)
    dataset_name = str(args.get("dataset") or (m.group("stem") if m else ""))
    dataset = _dataset(dataset_name) if dataset_name else None
    if dataset is None:
        raise UserError(
            f"{path}: no HELMET dataset named in {'its args' if args else 'its file name'} "
            f"({dataset_name[:40] or 'none'}): pass {_WHAT}"
        )
    L = _input_length(path, args, m, length)
    count = len(data["data"]) if isinstance(data.get("data"), list) else None
    source = _source(path, args, m)
    cells = []
    for metric, suite, task in _DATASETS[dataset]:
        if metric not in metrics:
            if suite == "ruler" and dataset in ("ruler_niah_mk_2", "ruler_niah_mk_3", "ruler_niah_mv"):
                continue
            raise UserError(f'{path}: no "{metric}" among its metrics ({dataset}\'s metric in HELMET): pass {_WHAT}')
        v = _scale(metric, number(metrics[metric], path, f'"{metric}"'))
        cells.append(Cell(suite, task, L, percent(v, path, f'"{metric}" (as HELMET reports it)'), count, str(path)))
    return cells, source


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
    )


def _obj(data: dict, key: str) -> dict:
    """data[key] when it is an object, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}
