"""OpenAI-MRCR (hub dataset openai/mrcr): find the i-th of 2, 4 or 8 identical requests in a long
multi-turn conversation and repeat its answer after a random string.

    harness eval --ckpts M --chat --suite mrcr --mrcr-data DIR                 (chat models)
    harness eval --ckpts M --suite mrcr --mrcr-data DIR --protocol completion  (base checkpoints)
    harness eval --ckpts M --chat --tasks mrcr_8needle --lengths 8k,16k,32k ... (the cards' 8-needle)

Three tasks, one per released file (mrcr_2needle, mrcr_4needle, mrcr_8needle). A record's length is
the card's bin of its item (tasks.mrcr.bins: o200k_base tokens of prompt + answer), named by its
upper edge, so the table shows the card's figure: the mean score per needle count and bin. A run
takes every bin whose upper edge is within the model's window (the context, or --max-length; the
first bin when none is), or the bins --lengths names: a bin the window cuts would keep only its
shorter items, a score unlike the bin's.

Items that do not fit the window are left out and counted: an item is kept when its prompt, as
rendered for the model and counted with the model's tokenizer (BOS included), plus max_new_tokens
fits the window. The count is printed ("... 37 of 100 items do not fit ...") and kept in each
record's metadata (bin_items, too_long); a bin none of whose items fits is listed as unavailable at
that length with the same count. Sample `index` is the index-th kept item of the bin in file
order, so the kept set is part of the data's identity: dataset_hash() covers the window and the
generation budget beside the file's content.

Protocols (tasks.mrcr.render): "reference" (default; needs --chat) sends the released messages as
chat turns: the sample's input is their JSON and metadata["conversation"] tells the pipeline so
(harness.pipeline.reasoning.chat_messages), which renders them through the model's chat template or
sends them to a served model's /v1/chat/completions, as the card's client does. "completion", for
base checkpoints, renders lm-eval's "Role: content" text with "\\n\\nAssistant:" after it. A
--system-prompt turn goes before the conversation; the fit rule does not count it.

Scoring is the card's grade() (tasks.mrcr.grading). Generation: up to 4096 tokens (max_gen_toks of
lm-eval's MRCR task as written by the author of lm-eval issue 3370; the card's client sets none),
greedy. Decided here, not by the card: under "completion"
the one space the "Assistant: " pattern puts before the reply is removed before grading. The fit rule
uses this default budget even when --max-new-tokens sets another.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import ClassVar

from harness.core.errors import TaskUnavailable, UserError
from harness.core.lengths import format_length
from tasks.base import BudgetFittedRows, Sample
from tasks.mrcr import bins, data
from tasks.mrcr.counts import cached_counts
from tasks.mrcr.grading import grade
from tasks.mrcr.render import COMPLETION_ANSWER_PREFIX, chat_text, completion_text
from tasks.registry import Headline, register_suite, register_task

PROTOCOLS = ("reference", "completion")
MAX_NEW_TOKENS = 4096  # lm-eval MRCR task (jannalulu/lm-evaluation-harness, branch mrcr): max_gen_toks
# (needles, data hash) -> the card's token count of each item (tasks.mrcr.bins), once per process
_BIN_TOKENS: dict[tuple[int, str], tuple[int, ...]] = {}
# (needles, data hash, protocol, tokenizer, template, bin) -> model tokens of each item of the bin
_PROMPT_TOKENS: dict[tuple, tuple[int, ...]] = {}


def bin_tokens(needles: int) -> tuple[int, ...]:
    """The card's count (prompt + answer, o200k_base) of each item of the needle count's file, counted
    once (tasks.mrcr.counts keeps it on disk: a later run needs neither the count nor tiktoken)."""
    key = (needles, data.items_hash(needles))
    if key not in _BIN_TOKENS:
        items = data.load_items(needles)

        def count() -> list[int]:
            texts = [(it.messages, it.answer) for it in items]
            return bins.count_all(texts, bins.reference_counter(), data.file_name(needles))

        stored = {"what": "bin tokens", "data": key[1], "counter": bins.ENCODING}
        _BIN_TOKENS[key] = cached_counts(stored, len(items), count)
    return _BIN_TOKENS[key]


class MRCRTask(BudgetFittedRows):
    kind = "generate"
    version: ClassVar[str] = "1"
    family: ClassVar[str] = "mrcr"
    metric = "mrcr_sequence_ratio"
    max_new_tokens = MAX_NEW_TOKENS
    protocols: ClassVar[tuple[str, ...]] = PROTOCOLS
    length_controlled: ClassVar[bool] = False
    needles: ClassVar[int]

    # the model's window (task_lengths sets it: the context, or --max-length); None: no fit filter
    window: int | None = None
    # the chat template's hash once a tokenizer was seen (kept()): the sample cache keys by the
    # tokenizer's vocabulary alone, and two chat models may share one with different templates
    template_tag: str | None = None

    def task_lengths(self, requested: list[int] | None, context: int, max_length: int | None) -> list[int]:
        self.window = max_length or context
        if requested is None:  # the bins the window holds whole (a bin it cuts would keep only its shorter items)
            return [hi for hi in bins.BINS if hi <= self.window] or [bins.BINS[0]]
        odd = [L for L in requested if L not in bins.BINS]
        if odd:
            edges = ",".join(format_length(hi) for hi in bins.BINS)
            raise UserError(
                f"--lengths {format_length(odd[0])}: MRCR's lengths are its card's bins {edges}; pass those"
            )
        return list(requested)

    def check_available(self) -> None:
        data.load_items(self.needles)

    def dataset_hash(self) -> str:
        base = data.items_hash(self.needles)
        if self.window is None:
            return base
        # the window decides which items a bin keeps; the template how they are rendered
        kept = f"{base}:{self.window}:{self.max_new_tokens}:{self.template_tag or ''}"
        return hashlib.sha256(kept.encode()).hexdigest()[:16]

    def bin_items(self, length: int) -> list[int]:
        """Rows of the file in the bin `length`, in file order."""
        if length not in bins.BINS:
            raise UserError(f"{self.name}: length {length} is not one of MRCR's bins; pass one of {bins.BINS}")
        return [row for row, n in enumerate(bin_tokens(self.needles)) if bins.bin_of(n) == length]

    def num_samples_available(self, length: int) -> int | None:
        return len(self.bin_items(length))

    def rendered(self, messages, tokenizer) -> tuple[str, str]:
        """(input, answer prefix) of a conversation under the protocol in force: under "reference" the
        messages as JSON, which the pipeline sends as chat turns (metadata["conversation"])."""
        if self.protocol == "completion":
            return completion_text(messages), COMPLETION_ANSWER_PREFIX
        return json.dumps(list(messages), ensure_ascii=False), ""

    def shown(self, messages, tokenizer) -> str:
        """The prompt text the model reads: the completion rendering, or the chat template's."""
        if self.protocol == "completion":
            return completion_text(messages) + COMPLETION_ANSWER_PREFIX
        return chat_text(tokenizer, messages)

    def prompt_tokens(self, length: int, tokenizer) -> tuple[int, ...]:
        """Model tokens of each rendered prompt of the bin (BOS as the runner adds it), counted once."""
        from harness.models.runners.common import prompt_ids
        from harness.models.tokenization import tokenizer_fingerprint

        template = str(getattr(tokenizer, "chat_template", None) or "")
        key: tuple = (self.needles, data.items_hash(self.needles), self.protocol, tokenizer_fingerprint(tokenizer))
        key += (hashlib.sha256(template.encode()).hexdigest(), length)
        if key not in _PROMPT_TOKENS:
            rows, items = self.bin_items(length), data.load_items(self.needles)

            def count() -> list[int]:
                from harness.core.progress import progress_bar

                print(
                    f"MRCR: counting the model's tokens of {len(rows)} {self.needles}-needle items of bin "
                    f"{bins.bin_range(length)} (which fit the window)",
                    file=sys.stderr,
                )
                bar = progress_bar(total=len(rows), desc=f"{self.name} {format_length(length)} fit", unit="item")
                counts = []
                for row in rows:
                    counts.append(len(prompt_ids(tokenizer, self.shown(items[row].messages, tokenizer))))
                    bar.update(1)
                bar.close()
                return counts

            stored = {"what": "prompt tokens", "data": key[1], "protocol": key[2], "tokenizer": key[3]}
            _PROMPT_TOKENS[key] = cached_counts({**stored, "template": key[4], "bin": length}, len(rows), count)
        return _PROMPT_TOKENS[key]

    def kept(self, length: int, tokenizer) -> tuple[list[int], int]:
        """(rows of the bin whose prompt + max_new_tokens fits the window, items of the bin)."""
        rows = self.bin_items(length)
        if self.protocol == "reference":
            template = str(getattr(tokenizer, "chat_template", None) or "")
            self.template_tag = hashlib.sha256(template.encode()).hexdigest()[:12]
        if self.window is None:
            return rows, len(rows)
        counts = self.prompt_tokens(length, tokenizer)
        return [r for r, n in zip(rows, counts) if n + self.max_new_tokens <= self.window], len(rows)

    def num_samples_with_tokenizer(self, length: int, tokenizer) -> int:
        rows, total = self.kept(length, tokenizer)
        where = f"{self.needles} needles, bin {bins.bin_range(length)}"
        if total and len(rows) < total:
            print(
                f"MRCR {where}: {total - len(rows)} of {total} items do not fit the {self.window}-token window "
                f"(prompt + {self.max_new_tokens} to generate, in the model's tokens): left out",
                file=sys.stderr,
            )
        if not rows:
            raise TaskUnavailable(
                f"none of the {total} items of {where} fits the {self.window}-token window with "
                f"{self.max_new_tokens} to generate: a longer context or --max-length reaches it"
                if total
                else f"the released {data.file_name(self.needles)} has no item in bin {bins.bin_range(length)}"
            )
        return len(rows)

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        rows, total = self.kept(length, tokenizer)
        if not 0 <= index < len(rows):
            raise UserError(f"{self.name} has {len(rows)} samples at {format_length(length)}, index {index} asked")
        item = data.load_items(self.needles)[rows[index]]
        text, prefix = self.rendered(item.messages, tokenizer)
        meta = {
            "row": item.row,
            "n_needles": item.n_needles,
            "desired_msg_index": item.desired_msg_index,
            "total_messages": item.total_messages,
            "n_chars": item.n_chars,
            "random_string_to_prepend": item.random_string_to_prepend,
            "bin": bins.bin_range(length),
            "bin_tokens": bin_tokens(self.needles)[item.row],
            "bin_items": total,
            "too_long": total - len(rows),
            "window": self.window,
            "protocol": self.protocol,
            **self.budget_meta(),
        }
        if self.protocol == "reference":  # the input is the conversation's turns (harness.pipeline.reasoning)
            meta["conversation"] = True
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=text,
            answer_prefix=prefix,
            references=(item.answer,),
            max_new_tokens=self.max_new_tokens,
            num_tokens=self.prompt_tokens(length, tokenizer)[self.bin_items(length).index(item.row)],
            dataset_hash=self.dataset_hash(),
            metadata=meta,
        )

    def uses_chat_template(self) -> bool:
        """Under "reference" the conversation goes as chat turns (the card's client sends the messages);
        the completion rendering is plain text."""
        return self.protocol == "reference"

    def score(self, prediction: str, sample: Sample) -> float:
        if sample.answer_prefix == COMPLETION_ANSWER_PREFIX:  # "Assistant: <reply>": the reply
            prediction = prediction.removeprefix(" ")
        return grade(prediction, sample.references[0], sample.metadata["random_string_to_prepend"])


def task_name(needles: int) -> str:
    return f"mrcr_{needles}needle"


TASKS: dict[int, type[MRCRTask]] = {
    n: register_task(
        type(
            f"MRCR_{n}needle",
            (MRCRTask,),
            {"name": task_name(n), "needles": n, "__doc__": f"OpenAI-MRCR, {n} needles ({data.file_name(n)})"},
        )
    )
    for n in data.NEEDLES
}

register_suite(
    "mrcr",
    [task_name(n) for n in data.NEEDLES],
    "OpenAI-MRCR: 2, 4 and 8 needles by the card's bins to 1M (--mrcr-data DIR offline)",
    label="OpenAI-MRCR",
    headline=Headline(
        "the card's figure: mean sequence-matcher ratio per needle count at each bin (length = the bin's upper edge)",
        {f"{n} needles": {f"{n} needles": [task_name(n)]} for n in data.NEEDLES},
    ),
)
