"""HELMET's categories that need no judge.

    harness eval --suite helmet --helmet-data DIR ...                             (HELMET's own inputs)
    harness eval --suite helmet --protocol exact-length --lengths 4k-64k --helmet-data DIR ...

Two protocols (tasks.helmet.reference): "reference", the default, shows the model HELMET's released
per-length files at HELMET's lengths 8K-128K (tasks.helmet.released builds those samples); the
"exact-length" protocol, described below, fills any length in the evaluated model's tokens.

Reference: princeton-nlp/HELMET at 4526dfb (data.py, utils.py, eval_alce.py, configs/*_short.yaml).
HELMET fixes each length by a count (passages, pairs, demos) that fits in Llama-2 tokens and cuts
the context's end when a model's tokens overflow; here the count itself is chosen per sample, in
the evaluated model's tokens: the largest count whose prompt + the task's tokens to generate fits
the length L exactly (metadata records the count). Task by task:

  helmet_json_kv      synthetic JSON key-value retrieval (lost-in-the-middle's format: random UUID
                      keys and values): as many pairs as fit, the asked pair at one of 6 depths
                      (index mod 6), 2 demos from the same object; SubEM; 100 new tokens
  helmet_niah_mk_2/   HELMET's RULER subsets: our RULER niah_multikey_2/_3 and niah_multivalue
  _mk_3 / _mv         haystacks and needles with HELMET's prompt (the answer prefix on its own
                      line) and budget (50/100/50 new tokens); ruler_recall
  helmet_nq, _triviaqa, _hotpotqa, _popqa
                      RAG over HELMET's retrieved passages (kilt files): the gold passages
                      (`has_answer`) stay at their relative depth, the leading other passages fill
                      the rest; 2 demos seeded by the question's sha256 as HELMET draws them;
                      SubEM; 20 new tokens, stop at newline (exact-length only: HELMET's
                      released code never stops at one); PopQA keeps log10(s_pop) < 3
  helmet_msmarco      re-ranking: the first passages of the item that fit, 2 demos; NDCG@10 of
                      the parsed ranking against the shown passages' labels; 200 new tokens
  helmet_alce_asqa / _qampari
                      ALCE with citations: the first documents that fit, HELMET's demos (2,
                      drawn from the prompt file with random.Random(seed) in file order);
                      correctness (ASQA str_em, QAMPARI rec@5); 300 new tokens
  helmet_alce_*_citation_rec / _prec
                      citation recall / precision need ALCE's NLI model
                      (google/t5_xxl_true_nli_mixture): unavailable unless HARNESS_ALCE_NLI
                      names a local copy (tasks.helmet.alce)
Item order follows HELMET's sampling: the items HELMET's max_test_samples=100 picks for the
seed come first (random.Random(seed).sample over the sorted keys; ALCE: datasets' shuffle order),
then the rest, so --samples 100 evaluates HELMET's items.
"""

from __future__ import annotations

import random
import uuid
from typing import ClassVar

from harness.core.errors import UserError
from harness.models.tokenization import count_tokens
from tasks.base import Sample
from tasks.helmet import data, metrics, reference
from tasks.helmet import prompts as P
from tasks.helmet.draws import SHOTS, _rag_data, _rerank_data, hf_shuffle, question_seed, rerank_demo_text
from tasks.helmet.reference import ReferenceProtocol
from tasks.icl.tasks import largest_fitting
from tasks.registry import register_task
from tasks.ruler.niah import NIAH_TASKS, NiahTask


def fit_count(render, n_max: int, length: int, max_new_tokens: int, tokenizer, what: str) -> tuple[int, str, int]:
    """Largest k in 0..n_max with tokens(render(k)) + max_new_tokens <= length: (k, prompt, tokens)."""
    budget = length - max_new_tokens
    counted: dict[int, tuple[int, str]] = {}

    def fits(k: int) -> bool:
        if k not in counted:
            prompt = render(k)
            counted[k] = (count_tokens(tokenizer, prompt), prompt)
        return counted[k][0] <= budget

    # a guess from the cost of one item (cheap), then the exact search
    fits(0)
    probe = min(n_max, 4)
    fits(probe)
    per = max(1.0, (counted[probe][0] - counted[0][0]) / probe) if probe else 1.0
    guess = int((budget - counted[0][0]) / per)
    k = largest_fitting(n_max, fits, guess)
    if k < 0:
        raise UserError(
            f"{what}: length {length} is below the prompt's fixed parts ({counted[0][0]} tokens + "
            f"{max_new_tokens} to generate): use a longer length"
        )
    fits(k)
    return k, counted[k][1], counted[k][0]


class HelmetTask(ReferenceProtocol):
    family: ClassVar[str] = "helmet"
    version: ClassVar[str] = "1"
    kind = "generate"
    system: ClassVar[str] = ""  # HELMET's system template: prepended to the output before scoring

    def _output(self, prediction: str, sample: Sample) -> str:
        """HELMET prepends the system template to a completion (no chat template) before scoring."""
        return prediction if "answer_prefix_removed" in sample.metadata else sample.metadata["system"] + prediction


# ----------------------------------------------------------------------------------------------
# Synthetic recall


@register_task
class HelmetJsonKV(HelmetTask):
    """HELMET JSON KV: the value of one key among random UUID pairs (lost-in-the-middle format)."""

    name = "helmet_json_kv"
    category = "Recall"
    metric = "substring_exact_match"
    max_new_tokens = 100
    system = P.JSON_KV_SYSTEM
    DEPTHS: ClassVar[list[float]] = [i / 5 for i in range(6)]  # "dep6"

    def check_available(self) -> None:
        if self.protocol == "reference":
            data.find("json_kv/test_k*_dep6.jsonl", "recall (JSON KV)")

    def dataset_hash(self) -> str:
        return (
            "synthetic:uuid4"
            if self.protocol != "reference"
            else data.find("json_kv/test_k*_dep6.jsonl", "JSON KV").name
        )

    @staticmethod
    def render(pairs: list[tuple[str, str]], demos: list[tuple[str, str]], key: str) -> str:
        records = "".join(
            ("{" if i == 0 else " ") + f'"{k}": "{v}"' + (",\n" if i != len(pairs) - 1 else "}")
            for i, (k, v) in enumerate(pairs)
        )
        demo_text = "\n\n".join(P.JSON_KV_DEMO.format(key=f'"{k}"', value=" " + v) for k, v in demos)
        demo_text += "\n\n" if demos else ""
        return P.JSON_KV_USER.format(context="JSON data:\n" + records, demos=demo_text, question=f'"{key}"')

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        from tasks.helmet import released

        return released.json_kv_sample(self, length, index, seed, tokenizer, budget)

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        rng = random.Random(f"{self.name}|{self.version}|{length}|{index}|{seed}")
        depth = self.DEPTHS[index % len(self.DEPTHS)]
        n_max = max(8, length // 8)  # a UUID pair costs well over 8 tokens in any tokenizer

        def uid() -> str:
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))

        gold = (uid(), uid())
        pool = [(uid(), uid()) for _ in range(n_max + 2)]
        demos, others = pool[:2], pool[2:]

        def pairs(k: int) -> list[tuple[str, str]]:
            rest = demos + others[: max(0, k - 3)]  # the demo pairs are in the object too
            at = round(depth * len(rest))
            return rest[:at] + [gold] + rest[at:]

        def prompt(k: int) -> str:
            return self.render(pairs(max(k, 3)), demos, gold[0]) + "\n" + self.system

        k, text, num = fit_count(prompt, n_max, length, self.max_new_tokens, tokenizer, self.name)
        k = max(k, 3)
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=text[: -len("\n" + self.system)],
            answer_prefix="\n" + self.system,
            references=(gold[1],),
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=self.dataset_hash(),
            metadata={"num_kvs": k, "depth": depth, "system": self.system, "category": self.category},
        )

    def score(self, prediction: str, sample: Sample) -> float:
        out = self._output(prediction, sample)
        return metrics.best_of_raw_and_parsed(
            metrics.substring_exact_match, out, list(sample.references), "corresponding value:"
        )


class HelmetRulerTask(ReferenceProtocol, NiahTask):
    """HELMET's RULER subset: HELMET's released files (reference), or our RULER haystack and
    needles with HELMET's prompt and budget (exact-length)."""

    family: ClassVar[str] = "helmet"
    metric = "ruler_recall"
    category = "Recall"
    ruler_task: ClassVar[str]

    def check_available(self) -> None:
        if self.protocol == "reference":  # HELMET's files: ruler/<task>/validation_<L>.jsonl
            folder = reference.run_for(self.name, reference.LENGTHS[0]).test.rsplit("/", 1)[0]
            data.find(f"{folder}/validation_*.jsonl", f"recall ({self.name})")
        else:
            NiahTask.check_available(self)

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        from tasks.helmet import released

        return released.ruler_sample(self, length, index, seed, tokenizer, budget)

    def plan(self, length, parts, counter, index):
        base = super().plan(length, parts, counter, index)
        return _NewlinePrefix(base)

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        s = NiahTask.sample(self, length, index, seed, tokenizer)
        meta = {**s.metadata, "system": s.answer_prefix.lstrip("\n"), "category": "Recall"}
        return Sample(**{**s.to_dict(), "references": s.references, "metadata": meta})

    def score(self, prediction: str, sample: Sample) -> float:
        out = prediction if "answer_prefix_removed" in sample.metadata else sample.metadata["system"] + prediction
        return metrics.ruler_recall(out, sample.references)


class _NewlinePrefix:
    """A RULER niah plan whose answer prefix goes on its own line (HELMET joins user and system
    templates with "\\n" where RULER joins them with a space)."""

    def __init__(self, plan):
        self._plan = plan

    def __getattr__(self, name):
        return getattr(self._plan, name)

    def render(self, n: int) -> tuple[str, str]:
        inp, pre = self._plan.render(n)
        return inp, "\n" + pre.lstrip(" ")


def _ruler_subset(name: str, ruler_name: str, tokens: int) -> type[HelmetRulerTask]:
    base = next(c for c in NIAH_TASKS if c.name == ruler_name)
    cls = type(
        f"Helmet_{name}",
        (HelmetRulerTask,),
        {
            "name": name,
            "config": base.config,
            "ruler_task": ruler_name,
            "max_new_tokens": tokens,
            "__doc__": f"HELMET recall: RULER {ruler_name} with HELMET's prompt and {tokens} new tokens.",
        },
    )
    return register_task(cls)


RULER_SUBSETS = [
    _ruler_subset("helmet_niah_mk_2", "niah_multikey_2", 50),
    _ruler_subset("helmet_niah_mk_3", "niah_multikey_3", 100),
    _ruler_subset("helmet_niah_mv", "niah_multivalue", 50),
]


# ----------------------------------------------------------------------------------------------
# RAG


def select_passages(ctxs: list[dict], n: int, answers) -> list[dict]:
    """n of the item's passages: the gold ones (`has_answer`, else those holding an answer) at their
    relative depth among the n, the leading non-gold passages around them, file order kept."""
    if n >= len(ctxs):
        return list(ctxs)
    if any("has_answer" in c for c in ctxs):
        gold = [i for i, c in enumerate(ctxs) if c.get("has_answer") is True]
    else:
        flat = [metrics.normalize_answer(a) for a in metrics._flat(answers)]
        gold = [
            i for i, c in enumerate(ctxs) if any(a and a in metrics.normalize_answer(c.get("text", "")) for a in flat)
        ]
    gold = gold[:n]
    gold_set = set(gold)
    out = [ctxs[i] for i in range(len(ctxs)) if i not in gold_set][: n - len(gold)]
    for g in gold:  # ascending: each lands at or after the previous
        at = round(g / max(1, len(ctxs) - 1) * (len(out)))
        out.insert(min(at, len(out)), ctxs[g])
    return out


class HelmetRAGTask(HelmetTask):
    # 2: under the reference protocol no stop at a newline, as HELMET's released code (released.RELEASED_STOP)
    version: ClassVar[str] = "2"
    category = "RAG"
    metric = "substring_exact_match"
    max_new_tokens = 20
    system = P.QA_SYSTEM
    dataset: ClassVar[str]

    def _data(self, seed: int = 42):
        return _rag_data(self.dataset, str(data.data_dir()), seed)

    def check_available(self) -> None:
        self._data()

    def dataset_hash(self) -> str:
        return self._data()[4]

    def num_samples_available(self, length: int) -> int | None:
        return len(self._data()[0])

    def demos_for(self, item: dict, demos: tuple[dict, ...], key: str) -> list[dict]:
        pool = [d for d in demos if d.get(key) != item[key]] if self.dataset == "popqa" else list(demos)
        chosen, seen = [], set()
        for i in hf_shuffle(len(pool), question_seed(item[key])):
            if pool[i].get(key) in seen:
                continue
            seen.add(pool[i].get(key))
            chosen.append(pool[i])
            if len(chosen) == SHOTS:
                break
        return chosen

    @staticmethod
    def demo_text(demos: list[dict]) -> str:
        if not demos:
            return ""
        blocks = [
            P.QA_DEMO.format(
                documents="\n\n".join(P.QA_PASSAGE.format(**c) for c in d["ctxs"]),
                question=d["question"],
                answer=d["answers"][0],
            )
            for d in demos
        ]
        return "\n\n".join(blocks) + "\n\n"

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        from tasks.helmet import released

        return released.rag_sample(self, length, index, seed, tokenizer, budget)

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        test, demos, key, order, digest = self._data(seed)
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        item = test[order[index]]
        demo_text = self.demo_text(self.demos_for(item, demos, key))
        ctxs = list(item["ctxs"])

        def user(k: int) -> str:
            context = "\n\n".join(P.QA_PASSAGE.format(**c) for c in select_passages(ctxs, k, item["answers"]))
            return P.QA_USER.format(demos=demo_text, context=context, question=item["question"])

        k, prompt, num = fit_count(
            lambda k: user(k) + "\n" + self.system, len(ctxs), length, self.max_new_tokens, tokenizer, self.name
        )
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=prompt[: -len("\n" + self.system)],
            answer_prefix="\n" + self.system,
            references=tuple(item["answers"]),
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=digest,
            metadata={
                "passages": k,
                "passages_available": len(ctxs),
                "key": str(item[key]),
                "system": self.system,
                "stop": ["\n"],
                "category": self.category,
            },
        )

    def score(self, prediction: str, sample: Sample) -> float:
        out = self._output(prediction, sample)
        return metrics.best_of_raw_and_parsed(metrics.substring_exact_match, out, list(sample.references))


def _rag(dataset: str) -> type[HelmetRAGTask]:
    cls = type(
        f"Helmet_rag_{dataset}",
        (HelmetRAGTask,),
        {"name": f"helmet_{dataset}", "dataset": dataset, "__doc__": f"HELMET RAG: {dataset} with retrieved passages."},
    )
    return register_task(cls)


RAG_TASKS = [_rag(d) for d in ("nq", "triviaqa", "hotpotqa", "popqa")]


# ----------------------------------------------------------------------------------------------
# Re-ranking


@register_task
class HelmetMsMarco(HelmetTask):
    """HELMET re-ranking: rank MS MARCO passages; NDCG@10."""

    name = "helmet_msmarco"
    version: ClassVar[str] = "2"  # 2: no stop at a newline under the reference protocol (released.RELEASED_STOP)
    category = "Re-rank"
    metric = "ndcg_at_10"
    max_new_tokens = 200
    system = P.RERANK_SYSTEM

    def _data(self, seed: int = 42):
        return _rerank_data(str(data.data_dir()), seed)

    def check_available(self) -> None:
        self._data()

    def dataset_hash(self) -> str:
        return self._data()[5]

    def num_samples_available(self, length: int) -> int | None:
        return len(self._data()[0])

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        from tasks.helmet import released

        return released.rerank_sample(self, length, index, seed, tokenizer, budget)

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        test, demos, order, demo_filtered, picked, digest = self._data(seed)
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        item = test[order[index]]
        template = P.RERANK_PASSAGE_TITLE if "title" in item["ctxs"][0] else P.RERANK_PASSAGE
        demo_text = rerank_demo_text(item, demos, demo_filtered, picked, template)
        ctxs = list(item["ctxs"])

        def prompt(k: int) -> str:
            context = "\n\n".join(template.format(**c) for c in ctxs[: max(k, 1)])
            return P.RERANK_USER.format(demos=demo_text, context=context, question=item["query"]) + "\n" + self.system

        k, text, num = fit_count(prompt, len(ctxs), length, self.max_new_tokens, tokenizer, self.name)
        k = max(k, 1)
        shown = ctxs[:k]
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=text[: -len("\n" + self.system)],
            answer_prefix="\n" + self.system,
            references=(" > ".join(x["id"] for x in sorted(shown, key=lambda x: x["label"], reverse=True)),),
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=digest,
            metadata={
                "passages": k,
                "passages_available": len(ctxs),
                "qid": str(item["qid"]),
                "qrels": {str(c["id"]): int(c["label"]) for c in shown},
                "system": self.system,
                "stop": ["\n"],
                "category": self.category,
            },
        )

    def score(self, prediction: str, sample: Sample) -> float:
        ranking = metrics.parse_rankings(self._output(prediction, sample))
        return metrics.ndcg_at_k({k: float(v) for k, v in ranking.items()}, sample.metadata["qrels"], 10)
