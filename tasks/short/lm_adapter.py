"""Driving lm-eval's evaluator with our runners.

`RunnerLM` is an lm_eval.api.model.LM whose loglikelihood calls forward to our Runner, so MMLU and
HellaSwag use lm-eval's own task configs (prompts, few-shot sampler, acc / acc_norm) while the
model is loaded, batched and recorded the same way as every other suite. `run_lm_eval` builds the
tasks from lm-eval's shipped YAML with the data source swapped for local json files, runs
`lm_eval.simple_evaluate` on the chosen doc ids and returns lm-eval's logged samples per task.
"""

from __future__ import annotations

from typing import Any


def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def _runner_lm_class():
    from lm_eval.api.model import LM

    from harness.models.runners.base import LoglikelihoodRequest

    class RunnerLM(LM):
        """An lm-eval model backed by one of our runners (loglikelihood only)."""

        def __init__(self, runner, chunk: int = 256, progress: bool = True):
            super().__init__()
            self.runner = runner
            self.chunk = chunk
            self.progress = progress

        def loglikelihood(self, requests) -> list[tuple[float, bool]]:
            from tqdm import tqdm

            reqs = [LoglikelihoodRequest(*r.args) for r in requests]
            out: list[tuple[float, bool]] = []
            with tqdm(total=len(reqs), desc="loglikelihood", disable=not self.progress, leave=False) as bar:
                for start in range(0, len(reqs), self.chunk):  # chunks: progress, and bounded memory
                    part = self.runner.loglikelihood(reqs[start : start + self.chunk])
                    assert len(part) == len(reqs[start : start + self.chunk]), (
                        "runner returned a wrong number of results"
                    )
                    out += [(float(ll), bool(g)) for ll, g in part]
                    bar.update(len(part))
            return out

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError("MMLU and HellaSwag need loglikelihood only")

        def generate_until(self, requests):
            raise NotImplementedError("MMLU and HellaSwag need loglikelihood only")

    return RunnerLM


# Where lm-eval keeps the YAML of the tasks we use; scanning all of lm-eval's tasks (TaskManager's
# index) takes ~12 s, so the known files are read directly and the index is only a fallback.
_KNOWN_YAML = {"hellaswag": "hellaswag/hellaswag.yaml"}


def _task_yaml(name: str):
    from pathlib import Path

    import lm_eval.tasks

    root = Path(lm_eval.tasks.__file__).parent
    rel = _KNOWN_YAML.get(name) or (f"mmlu/default/{name}.yaml" if name.startswith("mmlu_") else None)
    if rel and (root / rel).is_file():
        return root / rel
    from lm_eval.tasks import TaskManager

    entry = TaskManager().task_index.get(name)
    assert entry is not None and entry.yaml_path, f"lm-eval {lm_eval_version()} ships no task {name}"
    return entry.yaml_path


def shipped_task_config(name: str) -> dict[str, Any]:
    """lm-eval's own YAML config for task `name` (includes and !function resolved)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    cfg = dict(load_yaml(_task_yaml(name), resolve_func=True))
    for key in ("tag", "group"):
        cfg.pop(key, None)
    return cfg


def local_config(name: str, data_files: dict[str, str]) -> dict[str, Any]:
    """The shipped config with its hub dataset replaced by local json files (same splits)."""
    from tasks.short.data import cache_root

    cfg = shipped_task_config(name)
    # datasets' Arrow cache goes beside our copies (under HARNESS_CACHE), not into ~/.cache.
    cfg.update(
        dataset_path="json",
        dataset_name=None,
        dataset_kwargs={"data_files": dict(data_files), "cache_dir": str(cache_root() / "hf-datasets")},
    )
    return cfg


def run_lm_eval(
    runner,
    configs: list[dict[str, Any]],
    doc_ids: dict[str, list[int]],
    num_fewshot: int,
    seed: int = 1234,
    progress: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """lm-eval's logged samples {task: [sample dicts]} for the given doc ids of each config."""
    import logging

    import lm_eval

    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    from lm_eval.tasks import TaskManager

    lm = _runner_lm_class()(runner, progress=progress)
    # lm-eval walks the selected docs in dataset order but labels them by position in the list it
    # was given (evaluator.py: doc_id_true = indices[doc_id]), so the list must be sorted.
    doc_ids = {task: sorted(set(ids)) for task, ids in doc_ids.items()}
    # Inline configs need no task index; an empty manager skips lm-eval's 12 s scan of its tasks.
    res = lm_eval.simple_evaluate(
        task_manager=TaskManager(include_defaults=False),
        model=lm,
        tasks=configs,
        num_fewshot=num_fewshot,
        samples=doc_ids,
        log_samples=True,
        bootstrap_iters=0,
        fewshot_random_seed=seed,
        verbosity="WARNING",
    )
    return res["samples"]
