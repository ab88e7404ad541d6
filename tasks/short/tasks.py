"""MMLU (5-shot, acc, micro-averaged) and HellaSwag (0-shot, acc_norm) through lm-eval.

Both are kind "loglikelihood": the evaluation loop calls `evaluate_with_runner(runner, length,
indices, seed, tokenizer)`; lm-eval builds the requests from its own shipped task configs and our
runner answers them (tasks.short.lm_adapter). Samples are not length-controlled: `length` is
ignored. Sample indices run over a fixed (seed-0) shuffle of all test questions (MMLU: of every
subject), so the plain mean over all samples is lm-eval's micro average (its `mmlu` group weights
subjects by size) and a --samples prefix is an unbiased subsample. The lm-eval
version, few-shot count and metric go into each sample's metadata.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.core.errors import UserError
from tasks.base import Task
from tasks.registry import register_suite, register_task
from tasks.short import data

_LETTERS = "ABCD"


def _argmax(lls: list[float]) -> int:
    return max(range(len(lls)), key=lambda i: lls[i])


class _LmEvalTask(Task):
    family: ClassVar[str] = "short"
    kind = "loglikelihood"
    length_controlled: ClassVar[bool] = False
    num_fewshot: ClassVar[int]
    lm_eval_metric: ClassVar[str]

    def _check_indices(self, indices: list[int]) -> None:
        n = self.num_samples_available(0)
        assert n is not None  # lm-eval tasks always have a fixed sample count
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise UserError(f"{self.name} has {n} samples, index {bad[0]} asked: pass --samples {n} or fewer")

    def _records(
        self, logged: list[dict], index_of: dict[tuple[str, int], int], task_name: str, extra
    ) -> list[dict[str, Any]]:
        from tasks.short.lm_adapter import lm_eval_version

        out = []
        for s in logged:
            lls = [float(r[0]) for r in s["filtered_resps"]]
            out.append(
                {
                    "index": index_of[(task_name, int(s["doc_id"]))],
                    "prediction": extra(_argmax(lls)),
                    "score": float(s[self.lm_eval_metric]),
                    "metadata": {
                        "lm_eval_version": lm_eval_version(),
                        "lm_eval_task": task_name,
                        "num_fewshot": self.num_fewshot,
                        "metric": self.lm_eval_metric,
                        "doc_id": int(s["doc_id"]),
                        "target": s.get("target"),
                        "loglikelihoods": lls,
                    },
                }
            )
        return out


@register_task
class MMLU(_LmEvalTask):
    """MMLU, lm-eval's `mmlu` tasks (57 subjects), 5-shot from dev, acc."""

    name = "mmlu"
    version = "1"
    metric = "acc"
    lm_eval_metric = "acc"
    chance = 25.0  # four options
    num_fewshot = 5

    def check_available(self) -> None:
        data.mmlu_files()

    def dataset_hash(self) -> str:
        return data.mmlu_files()[2]

    def num_samples_available(self, length: int) -> int | None:
        return len(data.mmlu_files()[1])

    def evaluate_with_runner(self, runner, length, indices, seed, tokenizer, progress=True) -> list[dict[str, Any]]:
        from tasks.short.lm_adapter import local_config, run_lm_eval

        self._check_indices(indices)
        files, order, _ = data.mmlu_files()
        doc_ids: dict[str, list[int]] = {}
        index_of: dict[tuple[str, int], int] = {}
        for i in indices:
            subject, doc = order[i]
            doc_ids.setdefault(f"mmlu_{subject}", []).append(doc)
            index_of[(f"mmlu_{subject}", doc)] = i
        configs = [local_config(t, files[t.removeprefix("mmlu_")]) for t in doc_ids]
        logged = run_lm_eval(runner, configs, doc_ids, self.num_fewshot, progress=progress)
        out = [r for t, samples in logged.items() for r in self._records(samples, index_of, t, lambda k: _LETTERS[k])]
        pos = {i: n for n, i in enumerate(indices)}
        return sorted(out, key=lambda r: pos[r["index"]])


@register_task
class HellaSwag(_LmEvalTask):
    """HellaSwag validation, lm-eval's `hellaswag` task, 0-shot, acc_norm."""

    name = "hellaswag"
    version = "1"
    metric = "acc_norm"
    lm_eval_metric = "acc_norm"
    chance = 25.0  # four endings
    num_fewshot = 0

    def check_available(self) -> None:
        data.hellaswag_file()

    def dataset_hash(self) -> str:
        return data.hellaswag_file()[2]

    def num_samples_available(self, length: int) -> int | None:
        return len(data.hellaswag_file()[1])

    def evaluate_with_runner(self, runner, length, indices, seed, tokenizer, progress=True) -> list[dict[str, Any]]:
        from tasks.short.lm_adapter import local_config, run_lm_eval

        self._check_indices(indices)
        path, order, _ = data.hellaswag_file()
        # lm-eval's config names train/validation splits; only validation is read at 0-shot.
        cfg = local_config("hellaswag", {"train": path, "validation": path})
        logged = run_lm_eval(
            runner, [cfg], {"hellaswag": [order[i] for i in indices]}, self.num_fewshot, progress=progress
        )
        out = self._records(logged["hellaswag"], {("hellaswag", order[i]): i for i in indices}, "hellaswag", str)
        pos = {i: n for n, i in enumerate(indices)}
        return sorted(out, key=lambda r: pos[r["index"]])


register_suite(
    "short",
    ["mmlu", "hellaswag"],
    "Short-context retention: MMLU 5-shot acc, HellaSwag 0-shot acc_norm (lm-eval)",
    label="Short context",
    order=4,
)
