"""results.json of a plan: its records in the store, what they were computed with, its suites.

    from harness.pipeline.results import build_results
    results = build_results(plan)   # aggregated by harness.pipeline.aggregate; written by run_eval

Only the store's records of this plan count (those whose key the plan made: the same checkpoints,
tasks, lengths, samples and record settings), and provenance never states a setting those records
lack (harness.core.identity.check_claims). A suite spanning families is reported as one suite per
family, so no average mixes RULER lengths with LongBench's budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.errors import UserError

if TYPE_CHECKING:
    from harness.pipeline.planning import Plan

# Task families whose prompts are middle-truncated to the budget (provenance "truncation", "max_length")
MIDDLE_TRUNCATION_FAMILIES = {"longbench", "longbench-v2", "longbench-v2-cot"}

# What the records were computed with, as the plan keyed them: provenance states these as they are
# in the record settings (one value: every model source of a run shares them)
_CLAIMED = (
    "backend",
    "dtype",
    "batch_size",
    "rope_theta",
    "rope_scaling",
    "template",
    "tokenizer",
    "decode_rows",
    "decode_attention",
)


def build_results(plan: Plan) -> dict:
    """The results dict of the plan's records in <out>/samples.jsonl (aggregated, provenance included)."""
    from harness.core.identity import check_claims
    from harness.pipeline.aggregate import DEFAULT_THRESHOLD, aggregate
    from harness.pipeline.store import ResultStore, read_store

    cfg = plan.cfg
    from harness.pipeline.record_checks import split_inconsistent

    _, records = read_store(plan.out / "samples.jsonl")
    records = [r for r in records if ResultStore.key(r) in plan.planned_keys]
    # the reading rule `harness report` applies too: a stored record that contradicts itself (a
    # metric not its task's, a length its task cannot have) is never reused as a score
    records, inconsistent = split_inconsistent(records)
    suites = report_suites(plan)
    run = _run_entry(plan, records)
    prov = _provenance(plan, records)
    check_claims(records, prov)  # results.json never states a setting its records lack
    threshold = DEFAULT_THRESHOLD if cfg.threshold is None else cfg.threshold
    results = aggregate(records, suites, run, prov, threshold=threshold)
    if inconsistent is not None:  # kept out of everything above; counted by reason, as report does
        results["inconsistent_records"] = inconsistent
    return results


def _run_entry(plan: Plan, records: list[dict]) -> dict:
    """results.json's "run": its name, model, training mode and checkpoints."""
    from harness.models.sources import run_model
    from harness.models.sources.base import vanished

    modes = {(c.training or {}).get("mode") for c in plan.ckpts}
    # a checkpoint deleted before it ran (and skipped) is not one of the run's: no empty cells for it
    with_records = {r["checkpoint"]["fingerprint"] for r in records}
    kept = [c for c in plan.ckpts if c.fingerprint in with_records or not vanished(c)] or plan.ckpts
    return {
        "name": plan.name,
        "model": run_model(plan.sources),
        "mode": modes.pop() if len(modes) == 1 else None,
        "checkpoints": [c.to_dict() for c in kept],
    }


def _provenance(plan: Plan, records: list[dict]) -> dict:
    """results.json's "provenance": the machine and versions, the settings the records were
    computed with, and the run's own choices."""
    from harness.core.provenance import provenance
    from harness.pipeline.against import recorded_config

    cfg = plan.cfg
    ctxs = set(plan.contexts.values())
    families = {t.family for t in plan.tasks}
    # (a served model's batch size is the server's, null)
    claimed = {key: plan.record_settings[plan.ckpts[0].fingerprint].get(key) for key in _CLAIMED}
    prov = {
        **provenance(),
        **claimed,
        "max_model_len": ctxs.pop() if len(ctxs) == 1 else sorted(ctxs),
        "truncation": "middle" if families & MIDDLE_TRUNCATION_FAMILIES else "none",
        "dataset_hashes": plan.dataset_hashes,
        "seed": cfg.seed,
        "lm_eval_version": _lm_eval_version() if "short" in families else None,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "data_parallel": cfg.data_parallel,
        "shard_samples": cfg.shard_samples,
        "device_map": cfg.device_map,
        "samples": cfg.samples,
        "checkpoint_steps": [c.step for c in plan.ckpts],
        "prefix_reuse": _prefix_reuse(cfg, records),
        **({"doctor": "skipped (--no-doctor)"} if cfg.no_doctor else {}),
        **plan.extra_provenance,
        # the flags that made these records, so a comparison (--against) can evaluate more of them
        "eval_config": recorded_config(plan),
    }
    if families & MIDDLE_TRUNCATION_FAMILIES:
        # LongBench's length: the whole budget of a sample (prompt + generation); each prompt is
        # middle-truncated to max_length minus the task's max new tokens (the prompt cap, which
        # LongBench pred.py's own max_length sets directly).
        # Under the reference protocol LongBench's length is pred.py's prompt budget itself.
        budgets = sorted(
            {L for t in plan.tasks if t.family in MIDDLE_TRUNCATION_FAMILIES for L in plan.task_lengths[t.name]}
        )
        prov["max_length"] = budgets[0] if len(budgets) == 1 else budgets or plan.truncation_budget
    return prov


def _prefix_reuse(cfg, records: list[dict]) -> dict:
    """Whether shared prompt prefixes were computed once, and how much of the prompts that saved:
    tokens summed over the records that say (`compute`, written by the hf and vllm runners)."""
    facts = [r["compute"] for r in records if isinstance(r.get("compute"), dict)]
    prompt = sum(int(f.get("prompt_tokens") or 0) for f in facts)
    reused = sum(int(f.get("reused_tokens") or 0) for f in facts)
    grids = sorted({f["grid"] for f in facts if isinstance(f.get("grid"), int)})
    return {
        "enabled": cfg.prefix_reuse,
        # the hf engine's prefill grid (tokens): it shapes bf16 rounding, reuse or not
        "grid_tokens": grids[0] if len(grids) == 1 else grids or None,
        "prompt_tokens": prompt,
        "reused_tokens": reused,
        "reused_fraction": reused / prompt if prompt else None,
        "note": "reuse never changes an output; tokens are those of this run's stored records that report them",
    }


def _lm_eval_version() -> str | None:
    """The installed lm-eval's version (MMLU and HellaSwag run through it); None when absent."""
    try:
        from tasks.short.lm_adapter import lm_eval_version

        return lm_eval_version()
    except ImportError:  # lm-eval not installed (PackageNotFoundError is an ImportError)
        return None


def _family(task_name: str) -> str:
    """The task's declared family (Task.family), which names its suite in results.json."""
    from tasks.registry import get_task

    try:
        return get_task(task_name).family or "other"
    except UserError:  # not registered (an --exclude name the registry does not know)
        return "other"


def _length_controlled(task, name: str, get_task) -> bool:
    if task is None:
        try:
            task = get_task(name)
        except UserError:  # an --exclude name the registry does not know
            return False
    return bool(task.length_controlled)


def report_suites(plan: Plan) -> dict:
    """The suites results.json reports. A suite spanning families (e.g. "paper": RULER at 4K-128K,
    LongBench at its truncation budget, MMLU/HellaSwag at no length) is reported as one suite per
    family, so no average mixes RULER lengths with LongBench's budget."""
    by_family: dict[str, list[str]] = {}
    for t in plan.suite_tasks:
        by_family.setdefault(_family(t), []).append(t)
    if len(by_family) == 1:
        groups = {plan.suite_label: plan.suite_tasks}
    else:
        groups = {fam: names for fam, names in by_family.items()}
    return {label: _suite_entry(plan, label, names) for label, names in groups.items()}


def _suite_entry(plan: Plan, label: str, names: list[str]) -> dict:
    """One suite of results.json: its tasks, lengths, categories, weighting, headline and protocol."""
    from tasks.registry import get_task, suite_headline
    from tasks.suites import suite_categories, suite_weighting

    tasks_by_name = {t.name: t for t in plan.tasks}
    lengths = sorted({L for n in names if n in tasks_by_name for L in plan.task_lengths[n]})
    # a custom task list of one family reads that family's categories and weighting
    fams = {_family(t) for t in names}
    key = label if suite_categories(label) or suite_weighting(label) or len(fams) != 1 else fams.pop()
    cats = suite_categories(key)
    excluded = set(plan.cfg.exclude)
    entry: dict = {
        "tasks": list(names),
        "excluded": [t for t in names if t in excluded],
        "unavailable": {t: r for t, r in plan.unavailable.items() if t in names},
        "lengths": lengths or plan.lengths,
    }
    cats = {c: [t for t in ts if t in names] for c, ts in cats.items() if any(t in names for t in ts)}
    if cats:
        entry["categories"] = cats
    if suite_weighting(key):
        entry["weighting"] = suite_weighting(key)
    headline = suite_headline(key) or suite_headline(label)
    headline_spec = headline.to_spec(names) if headline is not None else None
    if headline_spec:  # the number the suite's reference publishes, averaged its way
        entry["headline"] = headline_spec
    protocols = sorted({tk.protocol for n in names if (tk := tasks_by_name.get(n)) is not None and tk.protocols})
    if protocols:
        entry["protocol"] = protocols[0] if len(protocols) == 1 else protocols
    # LongBench (one length: its truncation budget) and MMLU/HellaSwag (length 0) are not
    # length-controlled: the aggregate gives them no effective length.
    entry["length_controlled"] = any(_length_controlled(tasks_by_name.get(n), n, get_task) for n in names)
    gaps = {t: dict(v) for t, v in plan.unavailable_lengths.items() if t in names}
    if gaps:
        entry["unavailable_lengths"] = gaps
    return entry
