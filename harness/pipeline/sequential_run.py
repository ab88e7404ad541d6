"""A sequential evaluation: samples in rounds until every cell is decided (docs/sequential.md).

    from harness.pipeline.sequential_run import run_sequential
    results = run_sequential(cfg, Rule(alpha=0.05, margin=5.0), against="results/full")   # paired
    results = run_sequential(cfg, Rule(width=10.0))                                        # one run

Each round chooses samples (harness/pipeline/sequential_cells.py), evaluates them on every
checkpoint of this run and, when the other run can be evaluated (harness/pipeline/against.py), on
every checkpoint of that one, through the ordinary plan / execute / results path: the store keys,
records and resumption are those of a plain `harness eval`, and the stopping rule is no part of any
record's identity (a later fixed-n run on the same --out reuses every sample). After each round the
cells' sequences are updated, one progress line is printed, and results.json is rewritten with the
"sequential" block so far, so a killed run loses at most the round in flight and the same command
catches up from the store.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from harness.core.errors import UserError
from harness.pipeline.against import Arm, load_arm
from harness.pipeline.eval_config import EvalConfig
from harness.pipeline.sequential_cells import Comparison, Rule, paired_units, run_scores, single_units


def run_sequential(cfg: EvalConfig, rule: Rule, against: str | None = None, print_table: bool = True) -> dict:
    """Rounds until no cell is open; writes <out>/results.json after each and returns the last."""
    from harness.core.results_file import write_results
    from harness.pipeline.evaluate import plan_eval

    arm = load_arm(against, cfg) if against is not None else None
    base = plan_eval(replace(cfg, selection={}))  # the pools and suites; no sample is built
    if arm is not None:
        _check_arm(base, arm)
    suites = _suites(base)
    arm_pools = None if arm is None or arm.cfg is not None else _scored(arm.results or {})
    comp = Comparison(rule, _bounded_pools(base), suites, arm_pools, _finite(base))
    _say_start(comp, arm, rule)
    results: dict = {}
    theirs = arm.results if arm is not None else None
    while (selection := comp.next_round()) is not None:
        results = _evaluate(replace(cfg, selection=selection))
        if arm is not None and arm.cfg is not None:
            theirs, arm.path = _evaluate(replace(arm.cfg, selection=selection, progress=cfg.progress), where=True)
            arm.results = theirs
        comp.feed(paired_units(results, theirs) if theirs is not None else single_units(results))
        results["sequential"] = _block(comp, arm)
        write_results(base.out / "results.json", results)
        print(comp.progress_line(), file=sys.stderr, flush=True)
    if not results:  # every cell was closed before any round (no shared samples anywhere)
        raise UserError(_nothing_to_pair(arm))
    if print_table:
        from harness.pipeline.table import format_table

        print(format_table(results))
        print(f"results: {base.out / 'results.json'} (samples: {base.out / 'samples.jsonl'})")
    return results


def _evaluate(cfg: EvalConfig, where: bool = False):
    """One round of one run: plan the selection, compute what its store lacks, aggregate it (and,
    with `where`, say which --out it used)."""
    from harness.pipeline.evaluate import build_results, execute, plan_eval
    from harness.pipeline.store import run_lock

    plan = plan_eval(cfg)
    with run_lock(plan.out) as waited:  # one eval per --out (a plain eval beside it computes the rest)
        if waited:
            plan = plan_eval(cfg)
        execute(plan)
        results = build_results(plan)
    return (results, plan.out) if where else results


def _bounded_pools(plan) -> dict[tuple[str, int], int]:
    """The pools of the bounded-score tasks; a perplexity task is refused (its values have no bound)."""
    ppl = sorted({t.name for t in plan.tasks if getattr(t, "kind", None) == "perplexity"})
    if ppl:
        raise UserError(
            f"task {ppl[0]} scores a perplexity, which has no bound a sequential rule can use: "
            f"leave it out (--exclude {','.join(ppl)}) or evaluate it with a fixed --samples"
        )
    return dict(plan.pools)


def _finite(plan) -> set[tuple[str, int]]:
    """The cells whose samples are a dataset's items (a finite population: its sequence is the
    without-replacement one), not a generator's draws."""
    by_name = {t.name: t for t in plan.tasks}
    return {(t, L) for (t, L) in plan.pools if t in by_name and by_name[t].num_samples_available(L) is not None}


def _suites(plan) -> dict[str, list[str]]:
    """The suites whose per-length averages are cells: as results.json reports them, unweighted ones
    (a sample-weighted suite such as LongBench v2 averages over its pooled samples instead)."""
    from harness.pipeline.results import report_suites

    return {
        name: [t for t in spec["tasks"] if t not in spec.get("excluded", [])]
        for name, spec in report_suites(plan).items()
        if not spec.get("weighting")
    }


def _scored(results: dict) -> dict[tuple[str, int], set[int]]:
    """The samples a read-only run scored on every checkpoint: its side of the comparison's pool."""
    return {key: set(scores) for key, (_, scores) in run_scores(results).items()}


def _check_arm(base, arm: Arm) -> None:
    import os

    if arm.results is not None and os.path.realpath(arm.path) == os.path.realpath(base.out):
        raise UserError(
            f"--against {arm.path} is this run's own --out: compare with another run's folder, or pass another --out"
        )


def _block(comp: Comparison, arm: Arm | None) -> dict:
    block = comp.record()
    if arm is not None:
        block["against"] = {
            "name": ((arm.results or {}).get("run") or {}).get("name"),
            "path": str(arm.path),
            "evaluated": arm.cfg is not None,
            **({"read_only": arm.read_only_reason} if arm.cfg is None else {}),
        }
    return block


def _say_start(comp: Comparison, arm: Arm | None, rule: Rule) -> None:
    what = (
        f"paired with {arm.path if arm.results is not None else arm.cfg.ckpts if arm.cfg else ''} "
        f"({'its missing samples evaluated too' if arm.cfg else 'read-only: ' + str(arm.read_only_reason)})"
        if arm is not None
        else f"until each interval is narrower than {rule.width:g} points"
    )
    margin = f", equivalent within ±{rule.margin:g} points" if arm is not None and rule.margin else ""
    print(
        f"sequential: {len(comp.cells)} cells, {what}; alpha {rule.alpha:g} over all cells "
        f"({comp.alpha_cell:.2g} each){margin}; {rule.round_size} samples a round",
        file=sys.stderr,
        flush=True,
    )


def _nothing_to_pair(arm: Arm | None) -> str:
    where = f" with {arm.path}" if arm is not None else ""
    return (
        f"no sample to evaluate{where}: the other run scored none of these tasks and lengths on the same "
        "samples (task version, data and seed): evaluate it on them first, or compare runs of the same suite"
    )
