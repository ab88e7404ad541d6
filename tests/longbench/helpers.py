"""Runners for the tests: a deterministic fake and a minimal HF runner (Runner protocol).

The HF runner is deliberately tiny (one sequence at a time) so these tests do not depend on
harness/models/runners/hf.py.
"""

from __future__ import annotations

import json

from harness.models.runners.base import RunnerSettings


class FakeRunner:
    """Deterministic outputs: `answer(prompt)` decides each generation; loglikelihood by length."""

    def __init__(self, answer, max_model_len: int = 4096):
        self.answer = answer
        self.max_model_len = max_model_len
        self.settings = RunnerSettings(backend="fake")
        self.requests = []

    def generate(self, requests):
        self.requests += list(requests)
        out = []
        for r in requests:
            text = self.answer(r.prompt)
            for s in r.stop:
                if s in text:
                    text = text[: text.index(s)]
            out.append(text)
        return out

    def loglikelihood(self, requests):
        self.requests += list(requests)
        return [(-float(len(r.continuation)), False) for r in requests]

    def close(self):
        pass


class TinyHFRunner:
    """Greedy generation and exact log-likelihoods with a transformers causal LM, on CPU."""

    def __init__(self, model_dir):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True).eval()
        self.max_model_len = self.model.config.max_position_embeddings
        self.settings = RunnerSettings(backend="tiny-hf", dtype="float32", batch_size=1)

    def generate(self, requests):
        torch = self.torch
        out = []
        for r in requests:
            ids = torch.tensor([self.tok(r.prompt)["input_ids"]])
            with torch.no_grad():
                gen = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=r.max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tok.pad_token_id,
                )
            text = self.tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True)
            for s in r.stop:
                if s in text:
                    text = text[: text.index(s)]
            out.append(text)
        return out

    def loglikelihood(self, requests):
        torch = self.torch
        out = []
        for r in requests:
            ctx = self.tok(r.context)["input_ids"]
            full = self.tok(r.context + r.continuation)["input_ids"]
            assert full[: len(ctx)] == ctx, "context tokens must prefix the full tokens"
            ids = torch.tensor([full])
            with torch.no_grad():
                logp = torch.log_softmax(self.model(ids).logits[0].double(), -1)
            cont = full[len(ctx) :]
            rows = logp[len(ctx) - 1 : len(full) - 1]
            ll = float(rows[torch.arange(len(cont)), torch.tensor(cont)].sum())
            greedy = bool((rows.argmax(-1) == torch.tensor(cont)).all())
            out.append((ll, greedy))
        return out

    def close(self):
        pass


# Tiny LongBench jsonl files (LongBench/data/<name>.jsonl layout).
def _rec(name, i=0, ctx="CTX", inp="INP", answers=("ans",), classes=None, length=100):
    return {
        "input": inp,
        "context": ctx,
        "answers": list(answers),
        "length": length,
        "dataset": name,
        "language": "zh" if name == "lsht" else "en",
        "all_classes": classes,
        "_id": f"{name}-{i}",
    }


def _write(folder, name, records):
    with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _icl_files(folder):
    trec_classes = ["Location", "Other location", "Description", "Number"]
    _write(
        folder,
        "trec",
        [
            _rec(
                "trec",
                0,
                ctx="Question: Where is Paris?\nType: Location",
                inp="Question: Where is Rome?\nType:",
                answers=["Location"],
                classes=trec_classes,
            ),
            _rec(
                "trec",
                1,
                ctx="Question: How many?\nType: Number",
                inp="Question: What is X?\nType:",
                answers=["Description"],
                classes=trec_classes,
            ),
        ],
    )
    _write(
        folder,
        "triviaqa",
        [
            _rec(
                "triviaqa",
                0,
                ctx="Passage: p\nQuestion: q\nAnswer: a",
                inp="Passage: Paris is in France.\nQuestion: Where is Paris?\nAnswer:",
                answers=["France", "French Republic"],
            ),
        ],
    )
    _write(
        folder,
        "samsum",
        [
            _rec(
                "samsum",
                0,
                ctx="Dialogue: hi\nSummary: greeting",
                inp="Dialogue: A: lunch? B: yes\nSummary:",
                answers=["A and B will have lunch together"],
            )
        ],
    )
    _write(
        folder,
        "lsht",
        [
            _rec(
                "lsht",
                0,
                ctx="新闻：股市上涨\n类别：财经",
                inp="新闻：球队获胜\n类别：",
                answers=["体育"],
                classes=["财经", "体育", "科技"],
            )
        ],
    )


def write_short_files(folder, sizes=(("anatomy", 2), ("astronomy", 2)), answers=None):
    """Tiny MMLU (2 subjects x 2 test, 5 dev each) and HellaSwag (3) files in lm-eval's layout."""
    sizes = dict(sizes)
    test, dev = [], []
    for subject, n in sizes.items():
        for i in range(n):
            answer = answers[subject][i] if answers else (i + len(subject)) % 4
            test.append(
                {
                    "question": f"Which {subject} fact number {i} is true? ",
                    "subject": subject,
                    "choices": [f"fact {i}", "the moon", "a bone", "none of these"],
                    "answer": answer,
                }
            )
        for i in range(5):
            dev.append(
                {
                    "question": f"Dev {subject} {i}?",
                    "subject": subject,
                    "choices": ["w", "x", "y", "z"],
                    "answer": i % 4,
                }
            )
    (folder / "mmlu").mkdir()
    _write_rows(folder / "mmlu" / "test.jsonl", test)
    _write_rows(folder / "mmlu" / "dev.jsonl", dev)
    hs = [
        {
            "ind": i,
            "activity_label": "Baking cookies",
            "ctx_a": "A woman mixes flour.",
            "ctx_b": "she",
            "ctx": "",
            "endings": [
                f"puts the tray [title] in the oven {i}.",
                "runs away quickly.",
                "eats",
                "sings a very long song about dough",
            ],
            "source_id": "x",
            "split": "val",
            "split_type": "indomain",
            "label": str(i % 4),
        }
        for i in range(3)
    ]
    (folder / "hs").mkdir()
    _write_rows(folder / "hs" / "validation.jsonl", hs)
    return {"test": test, "dev": dev, "hs": hs, "mmlu": folder / "mmlu", "hellaswag": folder / "hs"}


def _write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
