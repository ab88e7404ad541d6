"""HELMET's citation category (ALCE: ASQA and QAMPARI), at lengths controlled in model tokens.

Correctness (helmet_alce_asqa: str_em; helmet_alce_qampari: qampari_rec_top5) needs no model.
Citation recall and precision (helmet_alce_*_citation_rec / _prec) need ALCE's NLI model
(google/t5_xxl_true_nli_mixture, an 11B T5 that HELMET loads in bf16): those tasks are available
only when HARNESS_ALCE_NLI names a local copy of it; otherwise they are reported unavailable
with one line saying so, never scored 0. The scoring follows eval_alce.compute_autoais
(at_most_citations=3; sentences of fewer than 5 characters dropped; QAMPARI's comma items
prefixed with the question); `citation_scores` takes the NLI as a function so its plumbing is
tested without the model.

Sentences: eval_alce splits ASQA outputs with nltk.sent_tokenize (punkt's English model), and so do
these tasks; without punkt's data the ASQA citation tasks are unavailable with one line naming the
download (another splitter would change the scores silently). An ASQA output with no sentence of 5
characters or more is left out of eval_alce's citation means ("if len(sents) == 0: continue"), not
scored 0: `unscored_reason` says so for such a sample (the loop leaves it out of the averages).
"""

from __future__ import annotations

import os
import random
from functools import lru_cache
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from tasks.base import Sample
from tasks.helmet import data, metrics
from tasks.helmet import prompts as P
from tasks.helmet.draws import SHOTS, hf_shuffle
from tasks.helmet.tasks import HelmetTask, fit_count
from tasks.registry import register_task

NLI_ENV = "HARNESS_ALCE_NLI"
NLI_MODEL = "google/t5_xxl_true_nli_mixture"
AT_MOST_CITATIONS = 3
FILES = {"asqa": "alce/asqa_eval_gtr_top2000.json", "qampari": "alce/qampari_eval_gtr_top2000.json"}
PROMPT_FILES = {"asqa": "prompts/asqa_revised.json", "qampari": "prompts/qampari_revised.json"}


@lru_cache(maxsize=8)
def _alce_data(dataset: str, folder: str | None, seed: int):
    path = data.find(FILES[dataset], f"ALCE {dataset}")
    need = ("question", "docs") + (("qa_pairs",) if dataset == "asqa" else ("answers",))
    items, h1 = data.read_records(path, need)
    prompt, h2 = data.read_json(data.find(PROMPT_FILES[dataset], f"ALCE {dataset} prompts (from HELMET's repository)"))
    for key in ("instruction", "demo_prompt", "doc_prompt", "demos"):
        if key not in prompt:
            raise TaskUnavailable(
                f"HELMET's {PROMPT_FILES[dataset]} lacks {key!r}: copy HELMET's prompts/ folder again"
            )
    if len(prompt["demos"]) < SHOTS:
        raise TaskUnavailable(f"HELMET's {PROMPT_FILES[dataset]} has fewer than {SHOTS} demos")
    # eval.py seeds python's random with the seed, then data.map draws random.sample(demos, shots)
    # once per item in file order; max_test_samples then shuffles with datasets' shuffle(seed)
    rng = random.Random(seed)
    draws = [rng.sample(prompt["demos"], SHOTS) for _ in items]
    return items, prompt, draws, hf_shuffle(len(items), seed), f"{h1}:{h2}"


def doc_context(doc_prompt: str, docs) -> str:
    return "\n\n".join(doc_prompt.format(**d, ID=i + 1) for i, d in enumerate(docs))


PUNKT_FIX = (
    "ASQA citation scores split sentences with nltk's punkt, as eval_alce does, and its data is not "
    "installed: run `python -m nltk.downloader punkt_tab` (or copy nltk_data/tokenizers/punkt_tab to a folder NLTK_DATA names)"
)


def sentences(text: str) -> list[str]:
    """nltk.sent_tokenize(text) (punkt); TaskUnavailable naming the download when punkt is missing."""
    from nltk import sent_tokenize

    try:
        return sent_tokenize(text)
    except LookupError:
        raise TaskUnavailable(PUNKT_FIX) from None


def claim_sentences(output: str, question: str, qampari: bool) -> list[str]:
    """eval_alce.compute_autoais's claims of a cleaned output: QAMPARI's comma items prefixed with
    the question, else punkt's sentences of at least 5 characters."""
    if qampari:
        return [question + " " + x.strip() for x in output.rstrip().rstrip(".").rstrip(",").split(",")]
    return [s for s in sentences(output) if len(s.strip()) >= 5]


def citation_scores(output: str, question: str, docs, qampari: bool, nli) -> dict[str, float]:
    """eval_alce.compute_autoais for one item: {"citation_rec", "citation_prec"} in [0, 1].

    nli(passage, claim) -> 1 or 0 is ALCE's TRUE model (or a stand-in in the tests)."""

    def fmt(doc) -> str:
        return f"Title: {doc['title']}\n{doc['sent'] if 'sent' in doc else doc['text']}"

    sents = claim_sentences(metrics.alce_clean(output), question, qampari)
    if not sents:  # eval_alce skips the item (unscored_reason); 0 only for a caller that asks anyway
        return {"citation_rec": 0.0, "citation_prec": 0.0}
    entail = entail_prec = total = 0
    for sent in sents:
        target = metrics.remove_citations(sent).strip()
        ref = metrics.citation_refs(sent)
        if not ref or any(r >= len(docs) for r in ref):
            joint = 0
        else:
            ref = ref[:AT_MOST_CITATIONS]
            total += len(ref)
            joint = nli("\n".join(fmt(docs[r]) for r in ref), target)
        entail += joint
        if joint and len(ref) > 1:
            for r in ref:
                # condition A (the document alone supports it) or B (the others alone do not)
                if nli(fmt(docs[r]), target) or not nli("\n".join(fmt(docs[x]) for x in ref if x != r), target):
                    entail_prec += 1
        else:
            entail_prec += joint
    return {"citation_rec": entail / len(sents), "citation_prec": entail_prec / total if total else 0.0}


@lru_cache(maxsize=1)
def _nli_model(path: str):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=torch.bfloat16, local_files_only=True).eval()

    def nli(passage: str, claim: str) -> int:  # eval_alce._run_nli_autoais
        ids = tok(f"premise: {passage} hypothesis: {claim}", return_tensors="pt").input_ids.to(model.device)
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=10)
        return 1 if tok.decode(out[0], skip_special_tokens=True) == "1" else 0

    return nli


def nli_path() -> str:
    path = os.environ.get(NLI_ENV)
    if not path or not os.path.isdir(path):
        raise TaskUnavailable(
            f"citation scores need ALCE's NLI model {NLI_MODEL}, which is not installed here (no hub access): "
            f"set {NLI_ENV}=DIR to a local copy"
        )
    return path


class HelmetAlceTask(HelmetTask):
    # 2: under the reference protocol a completion (no chat template) is scored after "Answer:"
    version: ClassVar[str] = "2"
    category = "Cite"
    max_new_tokens = 300
    system = P.ALCE_SYSTEM
    dataset: ClassVar[str]
    measure: ClassVar[str]  # str_em | qampari_rec_top5 | citation_rec | citation_prec

    def _data(self, seed: int = 42):
        return _alce_data(self.dataset, str(data.data_dir()), seed)

    def check_available(self) -> None:
        self._data()
        if self.measure.startswith("citation"):
            nli_path()
            if self.dataset == "asqa":
                sentences("Punkt is here. It splits.")  # unavailable now, not at the first score

    def unscored_reason(self, prediction: str, sample: Sample) -> str | None:
        """Why eval_alce leaves this sample out of the means (None: it is scored). Only ASQA's
        citation scores skip: an output without a sentence of 5 characters or more."""
        if not self.measure.startswith("citation") or self.dataset != "asqa":
            return None
        if claim_sentences(
            metrics.alce_clean(self.scored_text(prediction, sample)), sample.metadata["question"], False
        ):
            return None
        return "eval_alce.compute_autoais skips an output without a sentence of 5 characters or more"

    def dataset_hash(self) -> str:
        return self._data()[4]

    def num_samples_available(self, length: int) -> int | None:
        return len(self._data()[0])

    def _item(self, index: int, seed: int):
        items, prompt, draws, order, digest = self._data(seed)
        if not 0 <= index < len(order):
            raise UserError(f"{self.name} has {len(order)} items, index {index} asked: pass --samples {len(order)}")
        pos = order[index]
        demo_text = "\n\n\n".join(
            prompt["demo_prompt"].format(
                **demo, instruction=prompt["instruction"], context=doc_context(prompt["doc_prompt"], demo["docs"])
            )
            for demo in draws[pos]
        )
        demo_text += "\n\n\n" if draws[pos] else ""
        return items[pos], pos, prompt, demo_text, digest

    def _references(self, item: dict) -> tuple[str, ...]:
        if self.dataset == "asqa":
            return tuple(a for p in item["qa_pairs"] for a in p["short_answers"])
        return tuple(a for g in item["answers"] for a in g)

    def _meta(self, item: dict, pos: int, docs: list) -> dict:
        return {
            "file_index": pos,
            "question": item["question"],
            "qa_pairs": item.get("qa_pairs"),
            "answers": item.get("answers"),
            "docs": [{"title": d.get("title", ""), "text": d.get("text", "")} for d in docs],
        }

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        """load_alce: the item's first k documents (alce_<dataset>_<k> of the length's config)."""
        from tasks.helmet import reference, released

        item, pos, prompt, demo_text, digest = self._item(index, seed)
        docs = list(item["docs"])[: reference.run_for(self.name, length).k]
        tail = "\n\n" + self.system

        def render(context: str) -> str:
            user = P.ALCE_USER.format(
                demo_text=demo_text, instruction=prompt["instruction"], question=item["question"], context=context
            )
            return user + tail

        context = doc_context(prompt["doc_prompt"], docs)
        meta = {**self._meta(item, pos, docs), "docs_shown": len(docs)}
        return released.build(
            self,
            length,
            index,
            seed,
            tokenizer,
            render=render,
            context=context,
            tail=tail,
            refs=self._references(item),
            digest=digest,
            meta=meta,
            budget=budget,
        )

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        item, pos, prompt, demo_text, digest = self._item(index, seed)
        docs = list(item["docs"])

        def render(k: int) -> str:
            user = P.ALCE_USER.format(
                demo_text=demo_text,
                instruction=prompt["instruction"],
                question=item["question"],
                context=doc_context(prompt["doc_prompt"], docs[:k]),
            )
            return user + "\n\n" + self.system

        k, text, num = fit_count(render, len(docs), length, self.max_new_tokens, tokenizer, self.name)
        refs = self._references(item)
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=text[: -len("\n\n" + self.system)],
            answer_prefix="\n\n" + self.system,
            references=refs,
            max_new_tokens=self.max_new_tokens,
            num_tokens=num,
            dataset_hash=digest,
            metadata={
                **self._meta(item, pos, docs[:k]),
                "docs_shown": k,
                "docs_available": len(docs),
                "category": self.category,
            },
        )

    def scored_text(self, prediction: str, sample: Sample) -> str:
        """What eval_alce reads. Under the reference protocol it is eval.py's output: a completion
        (no chat template: a base model) gets the system template "Answer:" in front (eval.py:101-103,
        before eval_alce runs on the saved output), a chat reply (answer_prefix_removed) is itself.
        It matters: QAMPARI's first comma item becomes "answer x" and no longer matches, and an
        empty completion is the sentence "Answer:", scored rather than skipped. Exact-length
        scores the reply alone."""
        if sample.metadata.get("protocol") != "reference":
            return prediction
        return self._output(prediction, sample)

    def score(self, prediction: str, sample: Sample) -> float:
        meta = sample.metadata
        prediction = self.scored_text(prediction, sample)
        if self.measure.startswith("citation"):
            nli = _nli_model(nli_path())
            scores = citation_scores(prediction, meta["question"], meta["docs"], self.dataset == "qampari", nli)
            return scores[self.measure]
        clean = metrics.remove_citations(metrics.alce_clean(prediction))
        if self.measure == "str_em":
            return metrics.str_em(clean, meta["qa_pairs"])
        return metrics.qampari_scores(clean, meta["answers"])["qampari_rec_top5"]


def _alce(dataset: str, measure: str) -> type[HelmetAlceTask]:
    suffix = "" if measure in ("str_em", "qampari_rec_top5") else f"_{measure}"
    name = f"helmet_alce_{dataset}{suffix}"
    cls = type(
        f"Helmet_alce_{dataset}{suffix}",
        (HelmetAlceTask,),
        {
            "name": name,
            "dataset": dataset,
            "measure": measure,
            "metric": measure,
            "__doc__": f"HELMET ALCE {dataset}: {measure}.",
        },
    )
    return register_task(cls)


ALCE_TASKS = [
    _alce("asqa", "str_em"),
    _alce("asqa", "citation_rec"),
    _alce("asqa", "citation_prec"),
    _alce("qampari", "qampari_rec_top5"),
    _alce("qampari", "citation_rec"),
    _alce("qampari", "citation_prec"),
]
