"""HELMET's "reference" protocol: what princeton-nlp/HELMET (4526dfb) feeds the model, per task and length.

HELMET runs each task from a config: configs/<category>_short.yaml names the 8K-64K runs and
configs/<category>.yaml the 128K one. A run is (dataset, test file, demo file, input_max_length,
generation_max_length); the per-length test files hold as many passages / pairs / documents as fit
the length in Llama-2 tokens, so the length shows in the file name (k50 ... k1000), in the
dataset name (alce_asqa_30 ... _700: documents; narrativeqa_7892 ...: Llama-2 tokens the document
is cut to) or in a per-length folder (ruler/.../validation_8192.jsonl). This module holds that
table, the lengths (HELMET's length label = input_max_length, in tokens), the sample counts
(max_test_samples), the chat policy (use_chat_template) and the two truncations HELMET applies:

  - data.truncate_llama2: LongQA / Summ documents cut to the dataset's number of Llama-2 tokens
    (offset of token N - len(tokens(postfix)), then the " ... [the rest of the text is omitted]"
    postfix), after data.filter_length keeps documents of at least / more than a Llama-2 budget;
  - model_utils.tokenize: when the prompt (in the evaluated model's tokens, BOS included) exceeds
    input_max_length - generation_max_length, the context is cut from its end by the excess,
    once, at the offset of the excess-th token from the end of tokens(context).

Llama-2's tokenizer is not shipped: HARNESS_LLAMA2_TOKENIZER=DIR names a local copy of
meta-llama/Llama-2-7b-hf's tokenizer files (else the hub cache of that name is tried).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from tasks.base import Sample, Task
from tasks.helmet import data
from tasks.helmet import prompts as P

PROTOCOLS = ("reference", "exact-length")
LENGTHS = (8192, 16384, 32768, 65536, 131072)  # configs/*_short.yaml (8K-64K) and configs/*.yaml (128K)
SAMPLES = 100  # max_test_samples of every config but ICL's
ICL_SAMPLES = 500  # configs/icl*.yaml
CHAT_CATEGORIES = frozenset({"Cite", "LongQA", "Summ"})  # the configs with use_chat_template: true
LLAMA2_ENV = "HARNESS_LLAMA2_TOKENIZER"
LLAMA2_HUB = "meta-llama/Llama-2-7b-hf"


@dataclass(frozen=True)
class Run:
    """One config entry: the test file (relative to the data folder), the demo file, the dataset's
    size label (passages, pairs, documents, shots or Llama-2 tokens) and the generation budget."""

    test: str
    demo: str
    k: int
    gen: int


def _runs(test: str, demo: str, ks: tuple[int, ...], gen: int) -> dict[int, Run]:
    return {L: Run(test.format(k=k, L=L), demo, k, gen) for L, k in zip(LENGTHS, ks)}


# kilt file names: hotpotqa's have dep3 at every length, the others dep6 (configs/rag*.yaml)
_RAG_K = (50, 105, 220, 440, 1000)
RUNS: dict[str, dict[int, Run]] = {
    "helmet_json_kv": _runs("json_kv/test_k{k}_dep6.jsonl", "", (105, 220, 440, 900, 1800), 100),
    "helmet_niah_mk_2": _runs("ruler/niah_multikey_2/validation_{L}.jsonl", "", (0,) * 5, 50),
    "helmet_niah_mk_3": _runs("ruler/niah_multikey_3/validation_{L}.jsonl", "", (0,) * 5, 100),
    "helmet_niah_mv": _runs("ruler/niah_multivalue/validation_{L}.jsonl", "", (0,) * 5, 50),
    "helmet_nq": _runs(
        "kilt/nq-dev-multikilt_1000_k{k}_dep6.jsonl", "kilt/nq-train-multikilt_1000_k3_dep6.jsonl", _RAG_K, 20
    ),
    "helmet_triviaqa": _runs(
        "kilt/triviaqa-dev-multikilt_1000_k{k}_dep6.jsonl",
        "kilt/triviaqa-train-multikilt_1000_k3_dep6.jsonl",
        _RAG_K,
        20,
    ),
    "helmet_hotpotqa": _runs(
        "kilt/hotpotqa-dev-multikilt_1000_k{k}_dep3.jsonl",
        "kilt/hotpotqa-train-multikilt_1000_k3_dep3.jsonl",
        _RAG_K,
        20,
    ),
    "helmet_popqa": _runs("kilt/popqa_test_1000_k{k}_dep6.jsonl", "kilt/popqa_test_1000_k3_dep6.jsonl", _RAG_K, 20),
    "helmet_msmarco": _runs(
        "msmarco/test_reranking_data_k{k}_dep3.jsonl",
        "msmarco/test_reranking_data_k10_dep3.jsonl",
        (50, 130, 285, 600, 1000),
        200,
    ),
    # LongQA / Summ: the hub datasets, no file; k = the Llama-2 tokens the document is cut to
    "helmet_narrativeqa": _runs("", "", (7892, 16084, 32468, 65236, 130772), 100),
    "helmet_infbench_qa": _runs("", "", (7982, 16174, 32558, 65326, 130862), 10),
    "helmet_infbench_choice": _runs("", "", (7982, 16174, 32558, 65326, 130862), 10),
    "helmet_infbench_sum": _runs("", "", (6792, 14984, 31368, 64136, 129672), 1200),
    "helmet_multi_lexsum": _runs("", "", (7492, 15684, 32068, 64836, 130372), 400),
}
for _ds, _files in (("asqa", "alce/asqa_eval_gtr_top2000.json"), ("qampari", "alce/qampari_eval_gtr_top2000.json")):
    for _suffix in ("", "_citation_rec", "_citation_prec"):
        RUNS[f"helmet_alce_{_ds}{_suffix}"] = _runs(_files, f"prompts/{_ds}_revised.json", (30, 75, 165, 345, 700), 300)
# ICL: the shots per length (configs/icl*.yaml); the data are the hub datasets (tasks.icl)
for _ds, _shots in {
    "trec_coarse": (400, 800, 1600, 3300, 6600),
    "trec_fine": (400, 800, 1600, 3200, 6400),
    "banking77": (360, 720, 1450, 2900, 5900),
    "clinic150": (440, 880, 1750, 3525, 7050),
    "nlu": (510, 1020, 2040, 4080, 8296),
}.items():
    RUNS[f"helmet_icl_{_ds}"] = _runs("", "", _shots, 20)


def _label(length: int) -> str:
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def run_for(task: str, length: int) -> Run:
    """The config entry of `task` at `length`; a length HELMET has no config for is a UserError."""
    runs = RUNS[task]
    if length not in runs:
        have = ", ".join(_label(L) for L in runs)
        raise UserError(
            f"{task} has no HELMET config at length {_label(length)} under --protocol reference (HELMET's "
            f"configs name {have}): pass --lengths 8k-128k, or --protocol exact-length for other lengths"
        )
    return runs[length]


def reference_lengths(task: str, requested: list[int] | None) -> list[int]:
    """The lengths a task runs at under the reference protocol: the requested ones (each checked
    against HELMET's configs, and its per-length file against the data folder), else all five."""
    lengths = list(requested) if requested is not None else list(LENGTHS)
    for L in lengths:
        run = run_for(task, L)
        folder = data.data_dir()
        if run.test and folder is not None and not (folder / run.test).is_file():
            raise UserError(
                f"{task} at {_label(L)}: no file {folder / run.test} (HELMET's data.tar.gz layout): "
                f"{data.FIX}, or leave {_label(L)} out of --lengths"
            )
    return lengths


def default_samples(task: str) -> int:
    return ICL_SAMPLES if task.startswith("helmet_icl_") else SAMPLES


def uses_chat(category: str) -> bool:
    return category in CHAT_CATEGORIES


# ----------------------------------------------------------------------------------------------
# model_utils.tokenize's truncation, in the evaluated model's tokens


def fit_context(render, context: str, length: int, gen: int, tokenizer) -> tuple[str, str, int, int]:
    """HELMET's one-pass cut: (prompt, context, prompt tokens, context tokens removed).

    render(context) -> the whole prompt (user + joiner + system). tokens are counted as HELMET's HF
    path counts them without a chat template: tokenizer([prompt]) with its special tokens (BOS)."""
    from harness.models.tokenization import count_tokens

    prompt = render(context)
    n = count_tokens(tokenizer, prompt)
    budget = length - gen
    if n <= budget:
        return prompt, context, n, 0
    cut = n - budget
    offsets = tokenizer.backend_tokenizer.encode(context, add_special_tokens=True).offsets
    if cut >= len(offsets):  # HELMET would index past the start: everything of the context goes
        context = ""
    else:
        context = context[: offsets[-cut][0]]
    prompt = render(context)
    return prompt, context, count_tokens(tokenizer, prompt), cut


# ----------------------------------------------------------------------------------------------
# Llama-2 tokens: data.filter_length and data.truncate_llama2


@lru_cache(maxsize=1)
def llama2_tokenizer():
    """Llama-2's tokenizer (the unit of HELMET's LongQA / Summ document budgets)."""
    from transformers import AutoTokenizer

    path = os.environ.get(LLAMA2_ENV)
    fix = (
        f"HELMET cuts LongQA / Summ documents in Llama-2 tokens: set {LLAMA2_ENV}=DIR to a copy of "
        f"{LLAMA2_HUB}'s tokenizer files, or pass --protocol exact-length"
    )
    try:
        if path:
            return AutoTokenizer.from_pretrained(os.path.expanduser(path), local_files_only=True)
        return AutoTokenizer.from_pretrained(LLAMA2_HUB, local_files_only=True)
    except Exception as exc:  # any load failure becomes one line naming the fix  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise TaskUnavailable(f"{fix} ({first})") from None


@lru_cache(maxsize=4096)
def llama2_length(text: str) -> int:
    """len(tokenizer(text)["input_ids"]) with Llama-2's tokenizer: BOS counted, as HELMET counts."""
    return len(llama2_tokenizer()(text)["input_ids"])


def truncate_llama2(context: str, max_length: int) -> str:
    """data.truncate_llama2 for one document: over max_length Llama-2 tokens (BOS included), cut at
    the end offset of token max_length - tokens(postfix) and append the postfix."""
    tok = llama2_tokenizer()
    enc = tok(context, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_length:
        return context
    sep = len(tok(P.TRUNCATION_POSTFIX)["input_ids"])
    return context[: enc["offset_mapping"][max_length - sep][1]] + P.TRUNCATION_POSTFIX


# ----------------------------------------------------------------------------------------------
# The protocol on the task classes


class ReferenceProtocol(Task):
    """HELMET's two protocols on a task: sample() dispatches to reference_sample (HELMET's files,
    tasks.helmet.released) or exact_sample (this harness's fill-L-in-the-model's-tokens rule), and
    stamps the protocol into the sample's metadata."""

    protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    category: ClassVar[str] = ""

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        if self.protocol == "reference":
            return reference_lengths(self.name, requested)
        return super().task_lengths(requested, context, max_length)

    def default_samples(self, length: int) -> int | None:
        return default_samples(self.name) if self.protocol == "reference" else super().default_samples(length)

    def uses_chat_template(self) -> bool:
        return uses_chat(self.category) if self.protocol == "reference" else super().uses_chat_template()

    def chat_answer_prefix(self) -> bool:
        """Whether, wrapped in the chat template, the prompt keeps its answer prefix after the
        assistant header. HELMET's chat path (model_utils.tokenize: add_generation_prompt, no
        continue_final_message) sends the user turn alone, and eval.py then scores the output
        without the system template (tasks score it so when metadata has answer_prefix_removed)."""
        return self.protocol != "reference"

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        if self.protocol == "reference":
            s = self.reference_sample(length, index, seed, tokenizer)
        else:
            s = self.exact_sample(length, index, seed, tokenizer)
        return dataclasses.replace(s, metadata={**s.metadata, "protocol": self.protocol})

    def sample_fitted(self, length: int, budget: int, index: int, seed: int, tokenizer) -> Sample:
        """Under --chat a sample of length L is fitted to L less the chat template's tokens. HELMET
        picks its config (file, documents, shots) by L and counts the templated prompt against L
        for the overflow cut: here the config is L's and the cut is to the budget."""
        if self.protocol != "reference":
            return super().sample_fitted(length, budget, index, seed, tokenizer)
        s = self.reference_sample(length, index, seed, tokenizer, budget=budget)
        return dataclasses.replace(s, metadata={**s.metadata, "protocol": self.protocol})

    def reference_sample(self, length: int, index: int, seed: int, tokenizer, budget: int | None = None) -> Sample:
        """Sample `index` from HELMET's config at `length`, its prompt cut to `budget` tokens
        (None: the length) as model_utils.tokenize cuts it."""
        raise NotImplementedError

    def exact_sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        raise NotImplementedError
