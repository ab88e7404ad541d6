"""Is the sequential rule's false-decision rate at or below alpha when it looks after every round?

    python benchmarks/sequential_validity.py                          # the table: 10,000 simulations a scenario
    python benchmarks/sequential_validity.py --sims 2000 --sections null,family
    python benchmarks/sequential_validity.py --extract RUN_A RUN_B [--merge NAME] --made-with "harness eval ..."

Each scenario simulates many paired comparisons of one cell, each on its own pool of `--pool` samples
(500, RULER's), drawn in a random order and looked at after every round of `--round-size` (25): the
rule of `harness eval --against` (harness.core.sequential: a betting confidence sequence without
replacement; a cell stops at its first verdict) beside the naive rule (stop the first time the
fixed-n paired percentile-bootstrap 95% interval excludes 0). The pools come from the empirical joint
distributions of (score of run A, score of run B) in real stored runs of ours, per kind of cell
(binary needle cells, graded vt/cwe cells, continuous LongBench-style cells), kept in
benchmarks/data/sequential_joints.json with the commands that made them (`--extract` re-makes it
from two results folders):

- null: a pool is pool/2 pairs drawn from the joint plus each drawn pair swapped, so its mean
  difference is exactly 0 and its scores and between-run correlation are the joint's. A "better" or
  "worse" verdict is a false decision. With no equivalence margin a cell stops only on one, so every
  look is made: the worst case (a margin stops cells as "equivalent", which can only remove looks).
- generator: the null of the models rather than of one pool: every sample's pair drawn from the
  joint and swapped with probability 1/2, so the models' difference is 0 while a pool's scatters
  around it. The sequence covers the pool's mean (the mean the fixed protocol would report), so with
  no margin it ends on that mean and calls its sign; an equivalence margin is what keeps it from
  that. Shown beside the fixed protocol's bootstrap (which treats the pool as a sample).
- boundary: the null pool with arm B raised until the difference is exactly the margin: an
  "equivalent" verdict is the false decision there.
- power: arm B raised by 2, 5, 10, 20 points (randomly chosen samples raised to the full score):
  how often our rule says "better", the samples it used, the same for the sequence's i.i.d. form
  (pool=None), and the fixed 500-sample protocol's power (its bootstrap interval over the whole pool)
  for reference.
- family: a suite of tasks x lengths plus its average per length (6 x 2 + 2 = 14 cells), every
  cell at alpha / 14 (Bonferroni, as harness.pipeline.sequential_cells.Comparison does), all null:
  how often any cell reaches a false verdict; and the same cells at alpha each, uncorrected.

Rates come with their binomial 95% interval (Clopper-Pearson); "ok" means the interval's low end is
at or below alpha, "above" that it lies above alpha.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sequential_sim as sim

from harness.core.errors import UserError

DATA = Path(__file__).resolve().parent / "data" / "sequential_joints.json"
SECTIONS = ("null", "generator", "boundary", "power", "family")
FAMILY_TASKS, FAMILY_LENGTHS = 6, 2


@dataclass(frozen=True)
class Joint:
    """The empirical joint of one kind of cell: pairs (score of run A, score of run B) of one sample."""

    name: str
    kind: str  # binary / graded / continuous
    source: str
    pairs: np.ndarray  # (k, 2) in [0, 1]

    def summary(self) -> str:
        a, b = self.pairs[:, 0], self.pairs[:, 1]
        corr = np.corrcoef(a, b)[0, 1] if a.std() > 0 and b.std() > 0 else float("nan")
        discordant = float(np.mean(a != b))
        return (
            f"{self.name} ({self.kind}): {len(self.pairs)} pairs, A {a.mean() * 100:.1f} / B {b.mean() * 100:.1f} points, "
            f"corr {corr:.2f}, {discordant:.0%} of pairs differ, sd of d {np.std(b - a) * 100:.1f} points"
        )


@dataclass(frozen=True)
class Settings:
    sims: int = 10_000
    pool: int = 500
    round_size: int = 25
    alpha: float = 0.05
    margin: float = 5.0
    resamples: int = 400
    deltas: tuple[float, ...] = (2.0, 5.0, 10.0, 20.0)
    seed: int = 0


# -- the joints file ----------------------------------------------------------------------------------


def load_joints(path: Path) -> tuple[list[str], dict[str, Joint]]:
    """(the commands that made it, the joints by name); UserError naming the fix for a bad file."""
    fix = f"re-make it with `python benchmarks/sequential_validity.py --extract RUN_A RUN_B --data {path}`"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"joints file {path} not found: {fix}") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"joints file {path} cannot be read ({exc.__class__.__name__}): {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("joints"), dict) or not data["joints"]:
        raise UserError(f"joints file {path} has no 'joints' object: {fix}")
    commands = data.get("commands", [])
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise UserError(f"joints file {path}: 'commands' must be a list of strings: {fix}")
    return commands, {name: _joint(name, entry, path, fix) for name, entry in data["joints"].items()}


def _joint(name: str, entry: object, path: Path, fix: str) -> Joint:
    where = f"joints file {path}, joint {name!r}"
    if not isinstance(entry, dict) or not isinstance(entry.get("pairs"), list):
        raise UserError(f"{where} has no 'pairs' list: {fix}")
    try:
        pairs = np.array(entry["pairs"], dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{where}: 'pairs' must be [score A, score B] numbers: {fix}") from None
    if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) < 2:
        raise UserError(f"{where}: 'pairs' must hold two or more [score A, score B] pairs: {fix}")
    if not np.isfinite(pairs).all() or pairs.min() < 0.0 or pairs.max() > 1.0:
        raise UserError(f"{where}: scores must lie in [0, 1]: {fix}")
    return Joint(name, str(entry.get("kind", kind_of(pairs))), str(entry.get("source", "")), pairs)


def kind_of(pairs: np.ndarray) -> str:
    values = np.unique(pairs)
    if set(values.tolist()) <= {0.0, 1.0}:
        return "binary"
    return "graded" if len(values) <= 12 else "continuous"


def extract(run_a: Path, run_b: Path, merge: str | None) -> dict[str, dict]:
    """Joints from two results folders of harness eval: one per (task, length) both scored on the same
    samples (or all of them pooled into one joint named `merge`). A score is averaged over a run's
    checkpoints, as the paired unit of a sequential comparison is."""
    from harness.core.lengths import format_length
    from harness.core.paired import shares_samples
    from harness.core.results_file import load_results
    from harness.pipeline.sequential_cells import run_scores

    arms = [load_results(p / "results.json" if p.is_dir() else p) for p in (run_a, run_b)]
    scores_a, scores_b = (run_scores(r) for r in arms)
    cells = {}
    for key in sorted(scores_a.keys() & scores_b.keys()):
        (block_a, a), (block_b, b) = scores_a[key], scores_b[key]
        common = sorted(a.keys() & b.keys()) if shares_samples(block_a, block_b) else []
        if common:
            cells[f"{key[0]}@{format_length(key[1])}"] = [[round(a[i], 6), round(b[i], 6)] for i in common]
    if not cells:
        raise UserError(
            f"{run_a} and {run_b} share no scored samples (same tasks, lengths and seed): evaluate both on the same samples"
        )
    arms_note = {"A": _arm(run_a, arms[0]), "B": _arm(run_b, arms[1])}
    if merge:
        pairs = [p for name in cells for p in cells[name]]
        source = f"{', '.join(cells)} pooled; A = {run_a}, B = {run_b}"
        return {merge: {"kind": kind_of(np.array(pairs)), "source": source, "arms": arms_note, "pairs": pairs}}
    out = {}
    for name, pairs in cells.items():
        source = f"{name}; A = {run_a}, B = {run_b}"
        out[name] = {"kind": kind_of(np.array(pairs)), "source": source, "arms": arms_note, "pairs": pairs}
    return out


def _arm(path: Path, results: dict) -> dict:
    prov = results.get("provenance") or {}
    config = prov.get("eval_config") or {}
    keep = ("ckpts", "suite", "tasks", "lengths", "samples", "seed", "dtype", "chat_template", "protocol")
    return {"folder": str(path), "git_hash": prov.get("git_hash"), **{k: config.get(k) for k in keep if k in config}}


def write_joints(path: Path, commands: list[str], joints: dict[str, dict]) -> None:
    from harness.core.atomic import atomic_write

    doc = {
        "about": "Empirical joint distributions of (score of run A, score of run B) of one sample, per cell, "
        "from stored runs of ours; read by benchmarks/sequential_validity.py. 'commands' made them.",
        "commands": commands,
        "joints": joints,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, indent=1) + "\n")


# -- the sections ----------------------------------------------------------------------------------


def _rate(k: int, n: int, alpha: float | None = None) -> str:
    low, high, _ = sim.binomial_interval(k, n)
    mark = "" if alpha is None else ("  ok" if low <= alpha else "  ABOVE")
    return f"{k / n:7.2%} [{low:6.2%}, {high:6.2%}]{mark}"


def null_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    head = f"{'cell':<22}{'ours, no margin':<34}{'ours, margin ' + f'{s.margin:g}':<34}{'naive (bootstrap every round)':<34}"
    rows = [
        f"null: true difference 0; false decisions (better or worse) of {s.sims:,} comparisons, alpha {s.alpha:g}",
        head,
    ]
    for j in joints.values():
        a, b = sim.null_pools(j.pairs, s.sims, s.pool, rng)
        values = sim.units(a, b)
        strict = sim.ours(values, s.alpha, s.round_size, None)
        margin = sim.ours(values, s.alpha, s.round_size, s.margin)
        naive = sim.naive(b - a, s.round_size, s.resamples, rng)
        cols = [_rate(o.rate(*sim.DECIDED), s.sims, s.alpha) for o in (strict, margin, naive)]
        rows.append(f"{j.name:<22}" + "".join(f"{c:<34}" for c in cols))
        rows.append(
            f"{'':<22}{'mean n ' + f'{strict.n.mean():.0f}':<34}{'mean n ' + f'{margin.n.mean():.0f}':<34}"
            f"{'mean n ' + f'{naive.n.mean():.0f}':<34}"
        )
    return rows


def generator_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    """The null of the models rather than of the pool: what the sequence covers is the mean of the
    pool's samples, which scatters around the generator's."""
    m = f"margin {s.margin:g}"
    rows = [
        (
            "generator null: pools drawn from the symmetrised joint, so the models' difference is 0 and a pool's "
            "scatters around it; 'better' or 'worse' is false about the models"
        ),
        (
            f"{'cell':<22}{'ours, no margin':<32}{'ours, ' + m:<32}{'i.i.d. form, no margin':<32}{'i.i.d. form, ' + m:<32}"
            f"{'fixed ' + str(s.pool):<32}"
        ),
    ]
    for j in joints.values():
        a, b = sim.generator_pools(j.pairs, s.sims, s.pool, rng)
        values = sim.units(a, b)
        outcomes = [
            sim.ours(values, s.alpha, s.round_size, margin, finite=finite)
            for finite in (True, False)
            for margin in (None, s.margin)
        ]
        outcomes.append(sim.fixed(b - a, s.resamples, rng))
        cols = [_rate(o.rate(*sim.DECIDED), s.sims, s.alpha) for o in outcomes]
        rows.append(f"{j.name:<22}" + "".join(f"{c:<32}" for c in cols))
    return rows


def boundary_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    rows = [
        f"equivalence boundary: true difference = the margin ({s.margin:g} points); 'equivalent' is the false decision",
        f"{'cell':<22}{'equivalent (false)':<34}{'worse (false)':<20}{'better':<10}{'mean n':>7}",
    ]
    for j in joints.values():
        a, b = sim.null_pools(j.pairs, s.sims, s.pool, rng)
        try:
            b = sim.shifted(a, b, s.margin, rng)
        except UserError as exc:
            rows.append(f"{j.name:<22}left out: {exc}")
            continue
        out = sim.ours(sim.units(a, b), s.alpha, s.round_size, s.margin)
        rows.append(
            f"{j.name:<22}{_rate(out.rate('equivalent'), s.sims, s.alpha):<34}{out.rate('worse'):<20}"
            f"{out.rate('better') / s.sims:<10.2%}{out.n.mean():>7.0f}"
        )
    return rows


def power_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    rows = [
        (
            f"alternatives: arm B better by delta points; our rule with margin {s.margin:g} (better / equivalent / worse, "
            f"mean samples of {s.pool}) beside the fixed {s.pool}-sample bootstrap's power"
        ),
        (
            f"{'cell':<22}{'delta':>6}  {'better':<28}{'equivalent':>11}{'worse':>7}{'mean n':>8}{'of fixed':>9}"
            f"{'i.i.d. form: better':>21}{'mean n':>8}{'fixed power':>13}"
        ),
    ]
    for j in joints.values():
        for delta in s.deltas:
            a, b = sim.null_pools(j.pairs, s.sims, s.pool, rng)
            try:
                b = sim.shifted(a, b, delta, rng)
            except UserError as exc:
                rows.append(f"{j.name:<22}{delta:>6g}  left out: {exc}")
                continue
            values = sim.units(a, b)
            out = sim.ours(values, s.alpha, s.round_size, s.margin)
            iid = sim.ours(values, s.alpha, s.round_size, s.margin, finite=False)
            fixed = sim.fixed(b - a, s.resamples, rng)
            rows.append(
                f"{j.name:<22}{delta:>6g}  {_rate(out.rate('better'), s.sims):<28}{out.rate('equivalent') / s.sims:>11.2%}"
                f"{out.rate('worse'):>7}{out.n.mean():>8.0f}{out.n.mean() / s.pool:>9.2f}"
                f"{iid.rate('better') / s.sims:>21.2%}{iid.n.mean():>8.0f}{fixed.rate('better') / s.sims:>13.2%}"
            )
    return rows


def family_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    from harness.core.sequential import cell_alpha

    tasks = [list(joints.values())[t % len(joints)] for t in range(FAMILY_TASKS)]
    cells = sim.family_values([j.pairs for j in tasks], FAMILY_LENGTHS, s.sims, s.pool, rng)
    per_cell = cell_alpha(s.alpha, len(cells))
    rows = [
        (
            f"family: {FAMILY_TASKS} tasks ({', '.join(j.name for j in tasks)}) x {FAMILY_LENGTHS} lengths + "
            f"{FAMILY_LENGTHS} averages = {len(cells)} cells, all null; a false decision in any cell, family alpha {s.alpha:g}"
        ),
        f"{'rule':<46}{'family false-decision rate':<34}{'worst cell':>12}",
    ]
    for label, level, margin in (
        (f"Bonferroni (alpha/{len(cells)} per cell), no margin", per_cell, None),
        (f"Bonferroni (alpha/{len(cells)} per cell), margin {s.margin:g}", per_cell, s.margin),
        ("no correction (alpha per cell), no margin", s.alpha, None),
    ):
        outcomes = sim.family_outcomes(cells, level, s.round_size, margin)
        errors = sim.family_errors(outcomes)
        worst = max(o.rate(*sim.DECIDED) for o in outcomes.values()) / s.sims
        check = s.alpha if level == per_cell else None
        rows.append(f"{label:<46}{_rate(int(errors.sum()), s.sims, check):<34}{worst:>12.2%}")
    return rows


SECTION_ROWS = {
    "null": null_rows,
    "generator": generator_rows,
    "boundary": boundary_rows,
    "power": power_rows,
    "family": family_rows,
}


# -- the command ------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="the joints file (default: %(default)s)")
    p.add_argument("--sims", type=int, default=Settings.sims, help="simulated comparisons per scenario")
    p.add_argument("--pool", type=int, default=Settings.pool, help="samples in a cell's pool (even)")
    p.add_argument("--round-size", type=int, default=Settings.round_size)
    p.add_argument("--alpha", type=float, default=Settings.alpha)
    p.add_argument("--margin", type=float, default=Settings.margin, help="equivalence margin, points")
    p.add_argument("--resamples", type=int, default=Settings.resamples, help="bootstrap replicates of the naive rule")
    p.add_argument("--deltas", default="2,5,10,20", help="alternatives, points (comma list)")
    p.add_argument("--seed", type=int, default=Settings.seed)
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    p.add_argument("--joints", default=None, help="comma list of joint names (default: all in --data)")
    p.add_argument("--extract", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"), help="(re)make joints from two runs")
    p.add_argument("--merge", default=None, help="with --extract: pool every shared cell into one joint of this name")
    p.add_argument("--made-with", action="append", default=[], help="with --extract: a command that made the runs")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    try:
        deltas = tuple(float(x) for x in args.deltas.split(",") if x.strip())
    except ValueError:
        raise UserError(f"--deltas {args.deltas!r}: give points as a comma list, e.g. 2,5,10,20") from None
    if args.sims < 1 or args.pool < 2 or args.pool % 2 or args.round_size < 1 or args.resamples < 10:
        raise UserError("--sims >= 1, --pool even and >= 2, --round-size >= 1 and --resamples >= 10 are needed")
    if not 0.0 < args.alpha < 1.0 or args.margin <= 0.0:
        raise UserError(f"--alpha must be in (0, 1) and --margin above 0, got {args.alpha:g} and {args.margin:g}")
    return Settings(args.sims, args.pool, args.round_size, args.alpha, args.margin, args.resamples, deltas, args.seed)


def run_extract(args: argparse.Namespace) -> int:
    commands: list[str] = []
    joints: dict[str, dict] = {}
    if args.data.exists():
        commands, _ = load_joints(args.data)
        joints = json.loads(args.data.read_text())["joints"]
    made = extract(args.extract[0], args.extract[1], args.merge)
    this = "python benchmarks/sequential_validity.py --extract " + shlex.join(str(p) for p in args.extract)
    this += f" --merge {shlex.quote(args.merge)}" if args.merge else ""
    write_joints(args.data, [*commands, *args.made_with, this], {**joints, **made})
    print(f"{args.data}: {', '.join(made)} ({sum(len(v['pairs']) for v in made.values())} pairs)")
    return 0


def run_table(args: argparse.Namespace) -> int:
    s = settings_from(args)
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    unknown = [x for x in sections if x not in SECTIONS]
    if unknown:
        raise UserError(f"--sections: unknown {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    _, joints = load_joints(args.data)
    if args.joints:
        names = [x.strip() for x in args.joints.split(",") if x.strip()]
        missing = [n for n in names if n not in joints]
        if missing:
            raise UserError(f"--joints: {', '.join(missing)} not in {args.data} (it has {', '.join(joints)})")
        joints = {n: joints[n] for n in names}
    rng = np.random.default_rng(s.seed)
    looks = -(-s.pool // s.round_size)
    print(
        f"sequential validity: {s.sims:,} simulated comparisons per scenario, pool {s.pool}, a look after every round of "
        f"{s.round_size} ({looks} looks), alpha {s.alpha:g}, naive bootstrap B={s.resamples}, seed {s.seed}; "
        f"{sim.binomial_interval(0, 1)[2]} 95% intervals"
    )
    print(f"joints ({args.data.name}):")
    for j in joints.values():
        print(f"  {j.summary()}")
    for name in sections:
        start = time.perf_counter()
        rows = SECTION_ROWS[name](joints, s, rng)
        print()
        print("\n".join(rows))
        print(f"({name}: {time.perf_counter() - start:.0f} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return run_extract(args) if args.extract else run_table(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
