"""Runners for the tests: a deterministic fake and a minimal HF runner (Runner protocol).

The HF runner is deliberately tiny (one sequence at a time) so these tests do not depend on
harness/runners/hf.py.
"""

from __future__ import annotations

from harness.runners.base import RunnerSettings


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
                gen = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=r.max_new_tokens, do_sample=False,
                                          pad_token_id=self.tok.pad_token_id)
            text = self.tok.decode(gen[0, ids.shape[1]:], skip_special_tokens=True)
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
            cont = full[len(ctx):]
            rows = logp[len(ctx) - 1: len(full) - 1]
            ll = float(rows[torch.arange(len(cont)), torch.tensor(cont)].sum())
            greedy = bool((rows.argmax(-1) == torch.tensor(cont)).all())
            out.append((ll, greedy))
        return out

    def close(self):
        pass
