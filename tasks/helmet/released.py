"""HELMET samples under the "reference" protocol: HELMET's released per-length files as released.

Each builder makes sample `index` of a task at one of HELMET's lengths exactly as HELMET's data.py
loader and model_utils.tokenize make it: the config's file for that length (tasks.helmet.reference
.RUNS), HELMET's choice and order of the max_test_samples items for the seed, its demos, its
prompt (user + joiner + system, the system template being the answer prefix), and its one-pass cut
of the context's end when the prompt overflows the length in the evaluated model's tokens
(metadata "context_tokens_cut"; 0 when it fits, which is how HELMET's files are sized).
Index i is the i-th item HELMET evaluates; indices past its 100 continue in the same order.

RELEASED_STOP: no sample here stops at a newline. HELMET's RAG, re-rank and ICL configs say
`stop_new_line: true`, but its argument is `--stop_newline` (arguments.py:47, default False) and
parse_arguments passes the config through parser.set_defaults (arguments.py:64-66), which sets an
attribute nothing reads; load_LLM passes args.stop_newline (model_utils.py:1290), so the released
code generates up to the whole budget (20 tokens for RAG and ICL, 200 for re-rank; only EOS stops it
earlier) and scores all of it. The exact-length protocol keeps its stop at the first newline.
"""

from __future__ import annotations

from functools import lru_cache

from harness.core.errors import TaskUnavailable, UserError
from tasks.base import Sample
from tasks.helmet import data, reference
from tasks.helmet import prompts as P
from tasks.helmet.draws import hf_shuffle


def _item(order: list[int], index: int, task: str) -> int:
    if not 0 <= index < len(order):
        raise UserError(f"{task} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
    return order[index]


def build(
    task,
    length: int,
    index: int,
    seed: int,
    tokenizer,
    *,
    render,
    context: str,
    tail: str,
    refs,
    digest: str,
    meta: dict,
    budget: int | None = None,
) -> Sample:
    """The sample of `render(context)` (the whole prompt, ending in `tail` = joiner + system),
    cut as model_utils.tokenize cuts it at this length. `budget`: the tokens the prompt and its
    generation fit in when below the length (the length less a chat template's tokens); the
    config, and so the file, is the length's all the same."""
    run = reference.run_for(task.name, length)
    fit = length if budget is None else budget
    prompt, _, num, cut = reference.fit_context(render, context, fit, run.gen, tokenizer)
    assert prompt.endswith(tail), "the system template ends every HELMET prompt"
    return Sample(
        task=task.name,
        version=task.version,
        length=fit,
        index=index,
        seed=seed,
        input=prompt[: len(prompt) - len(tail)],
        answer_prefix=tail,
        references=tuple(refs),
        max_new_tokens=run.gen,
        num_tokens=num,
        dataset_hash=digest,
        metadata={
            **meta,
            "protocol": "reference",
            "helmet_file": run.test,
            "helmet_k": run.k,
            "context_tokens_cut": cut,
            "system": tail.lstrip("\n"),
            "category": task.category,
        },
    )


def _path(task: str, length: int):
    run = reference.run_for(task, length)
    folder = data.data_dir()
    if folder is None:
        raise TaskUnavailable(f"HELMET {task} needs the file {run.test}: {data.FIX}")
    return folder / run.test


# ----------------------------------------------------------------------------------------------
# Recall: RULER subsets (data.load_ruler) and JSON KV (data.load_json_kv)


@lru_cache(maxsize=16)
def _rows(path, need: tuple[str, ...], mtime: float):
    rows, digest = data.read_records(path, need)
    return rows, digest


def ruler_sample(task, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
    path = _path(task.name, length)
    rows, digest = _rows(path, ("context", "query", "type_needle_v"), path.stat().st_mtime)
    row = rows[_item(hf_shuffle(len(rows), seed), index, task.name)]
    if "answer" not in row and "outputs" not in row:
        raise TaskUnavailable(f"{path}: a RULER record needs answer or outputs: {data.FIX}")
    answers = row["answer"] if "answer" in row else row["outputs"]
    multi = task.name == "helmet_niah_mv"  # load_ruler: "niah_mv" / "niah_mq" take the plural templates
    user = P.RULER_NIAH_MULTI_USER if multi else P.RULER_NIAH_USER
    system = (P.RULER_NIAH_MULTI_SYSTEM if multi else P.RULER_NIAH_SYSTEM).format(**row)
    tail = "\n" + system

    def render(context: str) -> str:
        return user.format(**{**row, "context": context}) + tail

    return build(
        task,
        length,
        index,
        seed,
        tokenizer,
        render=render,
        context=row["context"],
        tail=tail,
        refs=[answers] if isinstance(answers, str) else answers,
        digest=digest,
        meta={},
        budget=budget,
    )


def json_kv_sample(task, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
    path = _path(task.name, length)
    rows, digest = _rows(path, ("context", "question", "answer", "demos"), path.stat().st_mtime)
    row = rows[_item(hf_shuffle(len(rows), seed), index, task.name)]
    shots = 2  # configs/recall*.yaml
    demos = "\n\n".join(P.JSON_KV_DEMO.format(key=k, value=" " + v) for k, v in row["demos"][:shots]) + "\n\n"
    tail = "\n" + P.JSON_KV_SYSTEM

    def render(context: str) -> str:
        return P.JSON_KV_USER.format(context=context, demos=demos, question=row["question"]) + tail

    answer = row["answer"]
    return build(
        task,
        length,
        index,
        seed,
        tokenizer,
        render=render,
        context=row["context"],
        tail=tail,
        refs=[answer] if isinstance(answer, str) else answer,
        digest=digest,
        meta={"num_kvs": row.get("num_kvs"), "depth": row.get("depth")},
        budget=budget,
    )


# ----------------------------------------------------------------------------------------------
# RAG (data.load_qa) and re-ranking (data.load_msmarco_rerank): the item's passages, all of them


def rag_sample(task, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
    from tasks.helmet.draws import _rag_data

    run = reference.run_for(task.name, length)
    test, demos, key, order, digest = _rag_data(task.dataset, str(data.data_dir()), seed, run.test, run.demo)
    item = test[_item(order, index, task.name)]
    demo_text = task.demo_text(task.demos_for(item, demos, key))
    tail = "\n" + P.QA_SYSTEM

    def render(context: str) -> str:
        return P.QA_USER.format(demos=demo_text, context=context, question=item["question"]) + tail

    context = "\n\n".join(P.QA_PASSAGE.format(**c) for c in item["ctxs"])
    # no stop: HELMET's configs say stop_new_line but its argument is stop_newline (RELEASED_STOP)
    meta = {"passages": len(item["ctxs"]), "key": str(item[key])}
    return build(
        task,
        length,
        index,
        seed,
        tokenizer,
        render=render,
        context=context,
        tail=tail,
        refs=item["answers"],
        digest=digest,
        meta=meta,
        budget=budget,
    )


def rerank_sample(task, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
    from tasks.helmet.draws import _rerank_data, rerank_demo_text

    run = reference.run_for(task.name, length)
    test, demos, order, demo_filtered, picked, digest = _rerank_data(str(data.data_dir()), seed, run.test, run.demo)
    item = test[_item(order, index, task.name)]
    template = P.RERANK_PASSAGE_TITLE if "title" in item["ctxs"][0] else P.RERANK_PASSAGE
    demo_text = rerank_demo_text(item, demos, demo_filtered, picked, template)
    tail = "\n" + P.RERANK_SYSTEM

    def render(context: str) -> str:
        return P.RERANK_USER.format(demos=demo_text, context=context, question=item["query"]) + tail

    ctxs = item["ctxs"]
    gold = " > ".join(x["id"] for x in sorted(ctxs, key=lambda x: x["label"], reverse=True))
    meta = {
        "passages": len(ctxs),
        "qid": str(item["qid"]),
        # HELMET's qrel: every passage of the item, also those a cut removed from the prompt
        "qrels": {str(c["id"]): int(c["label"]) for c in ctxs},
        # no stop: all 200 tokens are generated and parsed, as HELMET's released code does (RELEASED_STOP)
    }
    context = "\n\n".join(template.format(**c) for c in ctxs)
    return build(
        task,
        length,
        index,
        seed,
        tokenizer,
        render=render,
        context=context,
        tail=tail,
        refs=[gold],
        digest=digest,
        meta=meta,
        budget=budget,
    )
