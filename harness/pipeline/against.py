"""The other arm of a comparison (`harness eval --against RUN`): its per-sample scores, and how to
evaluate the samples it lacks.

    from harness.pipeline.against import arm_config, load_arm, recorded_config
    prov["eval_config"] = recorded_config(plan)         # what results.json keeps to re-run this arm
    arm = load_arm("results/full", ours=cfg)            # Arm(results, path, cfg or None)
    arm = load_arm("runs/full/ckpt-<1950..2000>", ours=cfg)   # checkpoints, evaluated with our flags

A run of ours records the flags it was evaluated with (results.json provenance "eval_config", its checkpoints
as resolved paths); when they are there and its checkpoints still exist, the comparison evaluates
the samples it lacks with those flags (its model, backend, dtype, chat and reasoning settings) on
our tasks, lengths, sample count and seed, so that both arms score the same samples. Anything else
(an imported run, an older results.json, pruned checkpoints) is read-only: the comparison's pool is
what it already scored. The recorded flags come from a file, so they are checked field by field
against EvalConfig's types here, at the boundary.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import UserError
from harness.pipeline.eval_config import EvalConfig

if TYPE_CHECKING:
    from harness.pipeline.planning import Plan

# What the comparison takes from our run, never from the other arm's recorded flags: which samples
# are scored (so both arms share them), and where and how this process works.
_OURS = ("suite", "tasks", "exclude", "lengths", "samples", "seed", "protocol", "selection", "out", "progress")
_NOT_RECORDED = ("selection", "out", "progress", "cache_dir", "suite", "tasks", "exclude", "lengths", "samples")


def recorded_config(plan: Plan) -> dict:
    """The flags of this run as results.json keeps them: every EvalConfig field that defines the arm,
    with --ckpts as the checkpoints actually evaluated (absolute paths where local), so another
    process in another directory can evaluate more samples of the same run."""
    cfg = plan.cfg
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in _NOT_RECORDED}
    paths = [str(c.path) for c in plan.ckpts]
    out["ckpts"] = ",".join(os.path.abspath(p) if os.path.exists(p) else p for p in paths)
    out["last"] = None
    return out


@dataclass
class Arm:
    """The run compared against: its results, its folder, and how to evaluate more of it (None:
    read-only) with why not."""

    results: dict | None  # None: checkpoints not evaluated yet (their first round makes it)
    path: Path  # its --out (for checkpoints: known once their first round is planned)
    cfg: EvalConfig | None
    read_only_reason: str | None = None


def load_arm(run: str, ours: EvalConfig) -> Arm:
    """The --against run: a run directory or its results.json (an earlier `harness eval`), or
    checkpoints (an --ckpts spec) evaluated with our flags; UserError when it is neither."""
    from harness.core.results_file import load_results

    path = Path(run)
    if not run.strip():
        raise UserError("--against is empty: pass the run directory (or results.json) of the run to compare with")
    file = path / "results.json" if path.is_dir() else path
    if not file.exists() and path.suffix != ".json":
        return _checkpoints_arm(run, ours)
    results = load_results(file)
    folder = file.parent
    if not _has_samples(results):
        raise UserError(
            f"--against {run}: its results.json has no per-sample scores to pair with (an import of aggregates, "
            "or a schema-1 file): re-evaluate it with `harness eval`, or import its per-sample files"
        )
    recorded = (results.get("provenance") or {}).get("eval_config")
    if recorded is None:
        return Arm(results, folder, None, "its results.json does not record its evaluation flags")
    if not (folder / "samples.jsonl").is_file():
        return Arm(results, folder, None, "its folder has no samples.jsonl to add samples to")
    cfg = arm_config(recorded, ours, folder, f"--against {run}")
    missing = [p for p in cfg.ckpts.split(",") if os.path.isabs(p) and not os.path.exists(p)]
    if missing:
        return Arm(results, folder, None, f"checkpoint {missing[0]} is gone")
    return Arm(results, folder, cfg)


def _checkpoints_arm(spec: str, ours: EvalConfig) -> Arm:
    """Checkpoints to compare with, evaluated with this run's flags into their own default --out
    (results/<their name>): the first comparison of two training runs needs no earlier eval."""
    if not any(ch in spec for ch in "<*?,") and not os.path.exists(spec):
        raise UserError(
            f"--against {spec}: no such run folder, results.json or checkpoint: pass the folder of an earlier "
            "`harness eval`, or checkpoints (e.g. 'runs/full/ckpt-<1950..2000>')"
        )
    cfg = dataclasses.replace(ours, ckpts=spec, last=None, name=None, out=None)
    return Arm(None, Path(), cfg)


def _has_samples(results: dict) -> bool:
    return any(suite.get("samples") for suite in results.get("suites", {}).values())


def arm_config(recorded: object, ours: EvalConfig, out: Path, where: str) -> EvalConfig:
    """The other arm's EvalConfig: its recorded flags, our sample choice, its folder as --out."""
    fields = {f.name: f for f in dataclasses.fields(EvalConfig)}
    if not isinstance(recorded, dict):
        raise UserError(f"{where}: its results.json eval_config is not an object: re-create it with `harness eval`")
    values = {}
    for key, value in recorded.items():
        if key not in fields:
            raise UserError(
                f"{where}: its results.json eval_config has {key!r}, which this harness does not know "
                "(written by a newer harness?): upgrade the harness or re-evaluate that run"
            )
        if key in _OURS:
            continue
        if not _fits(value, str(fields[key].type)):
            raise UserError(
                f"{where}: its results.json eval_config {key!r} is {value!r}, not a {fields[key].type}: "
                "re-create it with `harness eval`"
            )
        values[key] = value
    if not isinstance(values.get("ckpts"), str) or not values["ckpts"]:
        raise UserError(f"{where}: its results.json eval_config names no checkpoints: re-create it with `harness eval`")
    return dataclasses.replace(
        ours,
        **values,
        **{k: getattr(ours, k) for k in _OURS if k not in ("out",)},
        out=str(out),
    )


_SCALARS: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
    "dict": dict,
}


def _fits(value: object, annotation: str) -> bool:
    """Whether a JSON value fits a field's annotation ("int", "str | None", "list[str]", "dict | None")."""
    for part in (p.strip() for p in annotation.split("|")):
        if part == "None" and value is None:
            return True
        if part == "list[str]" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return True
        kind = _SCALARS.get(part.split("[")[0])
        if kind is None or isinstance(value, bool) and part != "bool":
            continue
        if isinstance(value, kind):
            return True
    return False
