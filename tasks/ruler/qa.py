"""RULER qa_1 (SQuAD v2 dev, answerable questions) and qa_2 (HotpotQA dev distractor).
Reference: NVIDIA/RULER scripts/data/synthetic/qa.py. Metric: string_match_part.

Sample i asks question i (file order, as the reference). Documents: the gold paragraph(s), then
the other paragraphs of the same article (SQuAD), then random other documents, shuffled and
written "Document {i}:\\n{text}" joined by blank lines. Unit for length fitting: one document.
A length that needs more documents than the dataset holds is an error naming the limit (the
reference silently repeats documents).

    harness generate --tasks qa_1 --squad dev-v2.0.json --lengths 4k --samples 10 --out data/
"""

from __future__ import annotations

import numpy as np

from harness.core.errors import UserError
from tasks.data.qa import load_qa
from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, cumulative, sample_rng


class QaPlan:
    def __init__(self, data, index: int, parts: tuple, counter: Counter):
        self.parts = parts
        self.docs = data.docs
        q = data.qas[index]
        rng = sample_rng(*parts)
        self.query = q["query"]
        self.references = list(q["outputs"])
        curr = list(q["context"])
        more = list(q["more_context"])
        rng.shuffle(more)  # a random order of the article's other paragraphs; take a prefix
        used = set(curr) | set(more)
        # the other documents in a random order, drawn lazily (a fixed stream)
        self._order = curr + more
        self._used = used
        self._rng = rng
        self.counter = counter
        self.min_units = len(curr)
        self.max_units = len(self.docs)
        self._cum = cumulative(np.asarray(counter.pieces([self.docs[i] for i in self._order]), dtype=np.int64))

    def _extend(self, n: int) -> None:
        if len(self._order) >= n:
            return
        new = []
        total = len(self.docs)
        want = min(total, n + 16) - len(self._order)
        if len(self._used) + want > total * 0.5:  # dense: draw from the remaining list directly
            rest = [i for i in range(total) if i not in self._used]
            self._rng.shuffle(rest)
            new = rest[:want]
        else:
            while len(new) < want:
                i = self._rng.randrange(total)
                if i not in self._used:
                    self._used.add(i)
                    new.append(i)
        self._used.update(new)
        self._order += new
        costs = np.asarray(self.counter.pieces([self.docs[i] for i in new]), dtype=np.int64)
        self._cum = np.concatenate([self._cum, self._cum[-1] + np.cumsum(costs)])

    def render(self, n: int) -> tuple[str, str]:
        self._extend(n)
        docs = [self.docs[i] for i in self._order[:n]]
        sample_rng(*self.parts, "shuffle", n).shuffle(docs)
        context = "\n\n".join(T.DOCUMENT.format(i=i + 1, document=d) for i, d in enumerate(docs))
        return T.QA_TEMPLATE.format(context=context, query=self.query), T.QA_ANSWER_PREFIX

    def _wrap(self, upto: int) -> np.ndarray:
        cum = self.counter.tables.get("qa_wrapcum")
        if cum is None or len(cum) <= upto:
            size = max(upto + 1, 2 * (len(cum) if cum is not None else 1024))
            cum = cumulative(
                np.asarray(self.counter.pieces([f"\n\nDocument {i}:\n" for i in range(1, size)]), dtype=np.int64)
            )
            self.counter.tables["qa_wrapcum"] = cum
        return cum

    def guess(self, tokens_left: float) -> int:
        mean = self._cum[-1] / max(1, len(self._cum) - 1) if len(self._cum) > 1 else 150
        return min(self.max_units, int(self.min_units + tokens_left / (mean + 6)) + 1)

    def model(self, n: np.ndarray) -> np.ndarray:
        top = int(n.max())
        self._extend(top)
        return self._cum[n] + self._wrap(top)[n]

    def metadata(self, n: int) -> dict:
        return {"documents": n, "question_index": self.parts[3]}


class QaTask(RulerTask):
    metric = "string_match_part"
    max_new_tokens = T.QA_TOKENS
    dataset: str

    def __init__(self, path: str | None = None):
        self.path = path

    def data(self):
        return load_qa(self.dataset, self.path)

    def check_available(self) -> None:
        self.data()

    def dataset_hash(self) -> str:
        return f"{self.dataset}:{self.data().hash}"

    def num_samples_available(self, length: int) -> int | None:
        return len(self.data().qas)

    def plan(self, length, parts, counter, index):
        data = self.data()
        if index >= len(data.qas):
            raise UserError(
                f"{self.name}: sample {index} asked but the {self.dataset} data holds {len(data.qas)} questions; use --samples {len(data.qas)} or fewer"
            )
        return QaPlan(data, index, parts, counter)

    def sample(self, length, index, seed, tokenizer):
        s = super().sample(length, index, seed, tokenizer)
        docs = len(self.data().docs)
        if s.metadata["documents"] >= docs and length - s.num_tokens - s.max_new_tokens > 0:
            raise UserError(
                f"{self.name}: length {length} needs more than the {docs} documents of the {self.dataset} "
                f"data ({s.num_tokens} prompt tokens with all of them); use a length of at most {s.num_tokens + s.max_new_tokens}"
            )
        return s


class Qa1(QaTask):
    name = "qa_1"
    dataset = "squad"


class Qa2(QaTask):
    name = "qa_2"
    dataset = "hotpotqa"
