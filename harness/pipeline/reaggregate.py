"""A samples.jsonl re-aggregated into results.json without the eval command's suite settings.

    from harness.pipeline.reaggregate import results_from_store
    results = results_from_store("results/anchor/samples.jsonl", suite_tasks=all_suites())

`harness report` and `harness plan` read a store this way when no results.json is beside it (or
when the per-sample scores are wanted). What eval would have passed is rebuilt from the records:
the suites with their tasks and lengths (and, from the registry, whether they are length-controlled,
their weighting and headline), the checkpoints, the run and its provenance. Of a checkpoint
evaluated under several settings, or a task whose data changed, the latest records are used.
Records whose fields contradict themselves (harness.pipeline.record_checks: a hand-edited line)
are left out of all of it and counted, by reason, in results.json `inconsistent_records`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.core.errors import UserError
from harness.pipeline.aggregate import DEFAULT_THRESHOLD, aggregate
from harness.pipeline.record_checks import split_inconsistent
from harness.pipeline.run_checkpoints import checkpoints_from_records, model_from_records

# The provenance settings a store's records carry, each merged over the records used.
_SETTINGS = (
    "backend",
    "dtype",
    "batch_size",
    "max_model_len",
    "rope_theta",
    "rope_scaling",
    "template",
    "truncation",
    "tokenizer",
)


def results_from_store(
    path: str | Path, threshold: float = DEFAULT_THRESHOLD, suite_tasks: dict[str, list[str]] | None = None
) -> dict:
    """Re-aggregate a samples.jsonl without the eval command's suite settings.

    suite_tasks gives each suite's full task list (the registry's); a suite's tasks without
    records are listed as unavailable ("no results in the store"), because the store does not
    say whether they were excluded or missing. Lengths are those present in the records. Of a
    checkpoint evaluated under several settings, the records of its last-written settings are used.
    """
    from harness.pipeline.store import read_store

    header, records = read_store(path)
    if not records:
        raise UserError(f"results store {path} has no records yet: run harness eval first")
    records, inconsistent = split_inconsistent(records)
    if inconsistent is not None and not records:
        raise UserError(
            f"results store {path}: every record contradicts itself ({next(iter(inconsistent['reasons']))}): "
            "a hand-edited store; restore the edited lines or re-run harness eval"
        )
    suites = _suite_specs(records, Path(path).name, suite_tasks or {})
    ckpts = checkpoints_from_records(records)
    current = {c["fingerprint"] for c in ckpts}
    used = _latest_settings([r for r in records if r["checkpoint"]["fingerprint"] in current])
    run = {
        "name": _merged([r.get("run") for r in used]),
        "model": model_from_records(records, ckpts),
        "mode": None,
        "checkpoints": ckpts,
    }
    results = aggregate(used, suites, run, _provenance(header, used, path), threshold)
    if inconsistent is not None:  # kept out of everything above; counted by reason
        results["inconsistent_records"] = inconsistent
    return results


def _suite_specs(records: list[dict], store_name: str, suite_tasks: dict[str, list[str]]) -> dict[str, dict]:
    """Each suite of the records, as eval would have specified it: its tasks (the registry's full
    list when the records' tasks belong to it), the lengths present, and the registry's settings."""
    suite_order: dict[str, list[str]] = {}
    suite_lengths: dict[str, set[int]] = defaultdict(set)
    for r in records:
        tasks = suite_order.setdefault(r.get("suite") or "tasks", [])
        if r["task"] not in tasks:
            tasks.append(r["task"])
        suite_lengths[r.get("suite") or "tasks"].add(int(r["length"]))
    suites = {}
    for name, seen in suite_order.items():
        full = list(suite_tasks.get(name) or [])
        if not set(seen) <= set(full):
            full = seen
        suites[name] = {
            "tasks": full,
            "excluded": [],
            "lengths": sorted(suite_lengths[name]),
            "unavailable": {t: f"no results in {store_name}" for t in full if t not in seen},
        }
        suites[name].update(_registry_settings(name, seen))
        protocols = sorted(
            {
                str(p)
                for r in records
                if r.get("suite", "tasks") == name and (p := (r.get("settings") or {}).get("protocol"))
            }
        )
        if protocols:
            suites[name]["protocol"] = protocols[0] if len(protocols) == 1 else protocols
    return suites


def _registry_settings(name: str, seen: list[str]) -> dict:
    """What the registry says of a suite and the tasks the store holds of it: whether it is
    length-controlled, its weighting (LongBench v2 pools its cells' samples) and its headline."""
    from tasks.registry import suite_headline
    from tasks.suites import suite_weighting

    out: dict = {}
    controlled = _registry_length_controlled(seen)
    if controlled is not None:
        out["length_controlled"] = controlled
    if suite_weighting(name):
        out["weighting"] = suite_weighting(name)
    headline = suite_headline(name)
    spec = headline.to_spec(seen) if headline is not None else None
    if spec:
        out["headline"] = spec
    return out


def _registry_length_controlled(names: list[str]) -> bool | None:
    """Whether any of these registered tasks is length-controlled; None when none is registered."""
    from tasks.registry import get_task

    flags = []
    for n in names:
        try:
            flags.append(bool(get_task(n).length_controlled))
        except UserError:  # unknown to this harness (a renamed or third-party task)
            continue
    return any(flags) if flags else None


def _latest_settings(records: list[dict]) -> list[dict]:
    """Per checkpoint, the records computed with the settings of its most recently written record:
    a store swept over a setting (--dtype, --rope-theta, ...) holds one record set per value, and
    averaging them together would report a setting no record had."""
    from harness.core.identity import settings_id

    latest = {r["checkpoint"]["fingerprint"]: settings_id(r.get("settings")) for r in records}
    kept = [r for r in records if settings_id(r.get("settings")) == latest[r["checkpoint"]["fingerprint"]]]
    # Likewise per checkpoint and task, the task version and data of its latest record: a data file
    # whose content changed (or a new task version) made new records beside the old ones, and a
    # cell must not average the two contents.
    made = {(r["checkpoint"]["fingerprint"], r["task"]): (r["task_version"], r.get("dataset_hash")) for r in kept}
    return [
        r
        for r in kept
        if (r["task_version"], r.get("dataset_hash")) == made[(r["checkpoint"]["fingerprint"], r["task"])]
    ]


def _provenance(header: dict, used: list[dict], path: str | Path) -> dict:
    """The provenance of a re-aggregated store: the header's versions, each setting merged over the
    records used, the data hashes per task, the seeds, and where it was re-aggregated from."""
    settings = [r.get("settings") or {} for r in used]
    prov: dict = {"package_version": header.get("package_version"), "git_hash": header.get("git_hash")}
    for key in _SETTINGS:
        prov[key] = _merged([s.get(key) for s in settings])
    hashes: dict[str, list] = defaultdict(list)
    for r in used:
        if r.get("dataset_hash") is not None and r["dataset_hash"] not in hashes[r["task"]]:
            hashes[r["task"]].append(r["dataset_hash"])
    prov["dataset_hashes"] = {t: h[0] if len(h) == 1 else h for t, h in hashes.items()}
    prov["seed"] = _merged(sorted({r["seed"] for r in used}))
    prov["created"] = header.get("created")
    prov["source"] = f"re-aggregated from {path}"
    return prov


def _merged(values: list) -> object:
    """One value when all records agree, else a "mixed: ..." note (mixed settings move scores)."""
    distinct = []
    for v in values:
        if v not in distinct:
            distinct.append(v)
    if len(distinct) == 1:
        return distinct[0]
    return "mixed: " + ", ".join(map(str, distinct))
