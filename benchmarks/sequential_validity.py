"""Is the sequential rule's false-decision rate at or below alpha when it looks after every round?

    python benchmarks/sequential_validity.py                          # the table: 10,000 simulations a scenario
    python benchmarks/sequential_validity.py --sims 2000 --sections null,family
    python benchmarks/sequential_validity.py --extract RUN_A RUN_B [--merge NAME] --made-with "harness eval ..."

Each scenario simulates many paired comparisons of one cell, each on its own pool of `--pool` samples
(500, RULER's), drawn in a random order and looked at after every round of `--round-size` (25): the
rule of `harness eval --against` (harness.core.sequential's betting confidence sequence, `verdict`
after every round, a cell stopping at its first verdict) beside the naive rule (stop the first time
the fixed-n paired percentile-bootstrap 95% interval excludes 0). The pools come from the empirical
joint distributions of (score of run A, score of run B) in real stored runs of ours, per kind of cell
(binary needle cells, graded vt/cwe cells, and continuous LongBench-style cells where a run has them),
kept in benchmarks/data/sequential_joints.json with the commands that made them (`--extract` re-makes
it from two results folders). Each cell is simulated in the product's two forms (Comparison's
`finite`): a generator's samples (RULER: i.i.d. draws from the joint symmetrised, each pair and its
swap, so the models' difference is exactly 0; the i.i.d. sequence) and a dataset's items (LongBench:
a pool of pool/2 drawn pairs plus each one swapped, so the pool's own difference is exactly 0; the
without-replacement sequence).

- null: a "better" or "worse" verdict is a false decision. With no equivalence margin a cell stops
  only on one, so every look is made: the worst case (a margin stops cells as "equivalent", which can
  only remove looks); the default margin beside it.
- form: a generator's samples under the without-replacement sequence, which covers the mean of the
  500 drawn samples rather than the models': why generator cells use the i.i.d. one.
- boundary: arm B raised until the difference is exactly the margin: "equivalent" is the false
  decision there.
- power: arm B raised by 2, 5, 10, 20 points (randomly chosen samples raised to the full score, in
  the generator or in the pool): how often our rule says "better" and the samples it used, beside the
  fixed 500-sample bootstrap's power on the same pools.
- family: a suite of tasks x lengths plus its average per length (6 x 2 + 2 = 14 cells), every
  cell at alpha / 14 (Bonferroni, as harness.pipeline.sequential_cells.Comparison does), all null:
  how often any cell reaches a false verdict, with averages held (a task drawn while its average is
  open) and drawn through their tasks (the default; the rate shown is that of an event containing
  every false decision of the rule, sequential_sim.through_task_errors), with the mean samples a
  task cell drew; and the same cells at alpha each, uncorrected.

Rates come with their binomial 95% interval (Clopper-Pearson; Wilson where scipy is missing): "ok"
means the interval's low end is at or below alpha, "ABOVE" that the whole interval lies above it.
"""

from __future__ import annotations

import argparse
import json
import re
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
SECTIONS = ("null", "form", "boundary", "power", "family")
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
    text = json.dumps(doc, indent=1)
    # one pair a line: [score A, score B]
    text = re.sub(r"\[\s+(-?[\d.e+-]+),\s+(-?[\d.e+-]+)\s+\]", r"[\1, \2]", text)
    atomic_write(path, text + "\n")


# -- the sections ----------------------------------------------------------------------------------
# Each kind of cell is simulated in the form the product gives it: a generator's samples (RULER: each
# index a fresh draw; the i.i.d. sequence; the null is the models', pools scatter around it) and a
# dataset's items (LongBench: the pool is the population; the without-replacement sequence; the null
# is the pool's own mean difference, exactly 0). The joints' score shapes serve both.


def _rate(k: int, n: int, alpha: float | None = None) -> str:
    low, high, _ = sim.binomial_interval(k, n)
    mark = "" if alpha is None else (" ok" if low <= alpha else " ABOVE")
    return f"{k / n:6.2%} [{low:5.2%}, {high:5.2%}]{mark}"


def _generator(j: Joint, s: Settings, rng: np.random.Generator, delta: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Pools of i.i.d. draws from the joint's symmetrised generator, arm B raised by `delta` points in it."""
    a, b = sim.population(j.pairs)
    if delta:
        b = sim.shifted(a[None], b[None], delta, rng)[0]
    return sim.draws(a, b, s.sims, s.pool, rng)


def _dataset(j: Joint, s: Settings, rng: np.random.Generator, delta: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetrised pools (a dataset's items, mean difference exactly 0), arm B raised by `delta` points."""
    a, b = sim.null_pools(j.pairs, s.sims, s.pool, rng)
    return a, (sim.shifted(a, b, delta, rng) if delta else b)


def null_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    w = 31
    rows = [
        (
            f"null: false decisions (better or worse) of {s.sims:,} comparisons at alpha {s.alpha:g}; our rule with no "
            "margin (a cell stops only on a false decision, so every look is made) and with the default margin"
        ),
        f"{'':<20}{'generator (RULER): i.i.d. sequence':<{3 * w}}{'dataset (LongBench): w/o replacement':<{2 * w}}",
        (
            f"{'cell':<20}{'ours, no margin':<{w}}{f'ours, margin {s.margin:g}':<{w}}{'naive':<{w}}"
            f"{'ours, no margin':<{w}}{'naive':<{w}}"
        ),
    ]
    for j in joints.values():
        ga, gb = _generator(j, s, rng)
        da, db = _dataset(j, s, rng)
        outs = [
            sim.ours(sim.units(ga, gb), s.alpha, s.round_size, None, finite=False),
            sim.ours(sim.units(ga, gb), s.alpha, s.round_size, s.margin, finite=False),
            sim.naive(gb - ga, s.round_size, s.resamples, rng),
            sim.ours(sim.units(da, db), s.alpha, s.round_size, None, finite=True),
            sim.naive(db - da, s.round_size, s.resamples, rng),
        ]
        rows.append(f"{j.name:<20}" + "".join(f"{_rate(o.rate(*sim.DECIDED), s.sims, s.alpha):<{w}}" for o in outs))
        rows.append(f"{'  mean n':<20}" + "".join(f"{o.n.mean():<{w}.0f}" for o in outs))
    return rows


def form_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    """Why a generator's cells use the i.i.d. sequence: the without-replacement one covers the pool's
    mean, which scatters around the models', and ends by calling its sign."""
    w = 31
    rows = [
        (
            "the form matters: a generator's samples (models' difference 0) under the without-replacement sequence, "
            f"which covers the mean of the {s.pool} drawn samples instead: false decisions about the models"
        ),
        f"{'cell':<20}{'w/o repl., no margin':<{w}}{f'w/o repl., margin {s.margin:g}':<{w}}{f'fixed {s.pool} bootstrap':<{w}}",
    ]
    for j in joints.values():
        a, b = _generator(j, s, rng)
        outs = [sim.ours(sim.units(a, b), s.alpha, s.round_size, m, finite=True) for m in (None, s.margin)]
        outs.append(sim.fixed(b - a, s.resamples, rng))
        rows.append(f"{j.name:<20}" + "".join(f"{_rate(o.rate(*sim.DECIDED), s.sims, s.alpha):<{w}}" for o in outs))
    return rows


def boundary_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    w = 31
    rows = [
        f"equivalence boundary: difference = the margin ({s.margin:g} points); 'equivalent' is the false decision",
        f"{'':<20}{'generator: i.i.d. sequence':<{w + 21}}{'dataset: w/o replacement':<{w + 21}}",
        (
            f"{'cell':<20}{'equivalent (false)':<{w}}{'better':>8}{'mean n':>8}     {'equivalent (false)':<{w}}"
            f"{'better':>8}{'mean n':>8}"
        ),
    ]
    for j in joints.values():
        cols = []
        for make, finite in ((_generator, False), (_dataset, True)):
            try:
                a, b = make(j, s, rng, s.margin)
            except UserError as exc:
                return [*rows, f"{j.name:<20}left out: {exc}"]
            o = sim.ours(sim.units(a, b), s.alpha, s.round_size, s.margin, finite=finite)
            cols.append(
                f"{_rate(o.rate('equivalent'), s.sims, s.alpha):<{w}}{o.rate('better') / s.sims:>8.1%}{o.n.mean():>8.0f}"
            )
        rows.append(f"{j.name:<20}" + "     ".join(cols))
    return rows


def power_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    rows = [
        (
            f"alternatives: arm B better by delta points, our rule with margin {s.margin:g}; generator cells (i.i.d. "
            f"sequence) beside the fixed {s.pool}-sample bootstrap's power on the same pools; dataset cells (w/o replacement)"
        ),
        (
            f"{'cell':<20}{'delta':>6}  {'better':<26}{'equiv':>7}{'worse':>6}{'mean n':>7}{'/fixed':>7}{'fixed power':>12}"
            f"   {'dataset: better':>15}{'mean n':>7}{'/fixed':>7}"
        ),
    ]
    for j in joints.values():
        for delta in s.deltas:
            try:
                ga, gb = _generator(j, s, rng, delta)
            except UserError as exc:
                rows.append(f"{j.name:<20}{delta:>6g}  left out: {exc}")
                continue
            o = sim.ours(sim.units(ga, gb), s.alpha, s.round_size, s.margin, finite=False)
            f = sim.fixed(gb - ga, s.resamples, rng)
            row = (
                f"{j.name:<20}{delta:>6g}  {_rate(o.rate('better'), s.sims):<26}{o.rate('equivalent') / s.sims:>7.1%}"
                f"{o.rate('worse'):>6}{o.n.mean():>7.0f}{o.n.mean() / s.pool:>7.2f}{f.rate('better') / s.sims:>12.1%}"
            )
            try:
                da, db = _dataset(j, s, rng, delta)
            except UserError:  # some drawn pools have less headroom than the generator's mean
                rows.append(f"{row}   {'(no headroom)':>15}")
                continue
            d = sim.ours(sim.units(da, db), s.alpha, s.round_size, s.margin, finite=True)
            rows.append(f"{row}   {d.rate('better') / s.sims:>15.1%}{d.n.mean():>7.0f}{d.n.mean() / s.pool:>7.2f}")
    return rows


def family_rows(joints: dict[str, Joint], s: Settings, rng: np.random.Generator) -> list[str]:
    from harness.core.sequential import cell_alpha

    tasks = [list(joints.values())[t % len(joints)] for t in range(FAMILY_TASKS)]
    rows = [
        (
            f"family: {FAMILY_TASKS} tasks ({', '.join(j.name for j in tasks)}) x {FAMILY_LENGTHS} lengths + "
            f"{FAMILY_LENGTHS} averages, all null; a false decision in any cell; family alpha {s.alpha:g}"
        ),
        f"{'cells':<12}{'rule':<72}{'family false-decision rate':<32}{'worst cell':>10}{'n a task':>10}",
    ]
    for finite, label in ((False, "generator"), (True, "dataset")):
        cells = sim.family_values([j.pairs for j in tasks], FAMILY_LENGTHS, s.sims, s.pool, rng, finite)
        per_cell = cell_alpha(s.alpha, len(cells))
        choices: list[tuple[str, float, float | None]] = [
            (f"Bonferroni (alpha/{len(cells)} a cell), no margin", per_cell, None)
        ]
        choices += [(f"Bonferroni (alpha/{len(cells)} a cell), margin {s.margin:g}", per_cell, s.margin)]
        choices += [("no correction (alpha a cell), no margin", s.alpha, None)] if not finite else []
        for rule, level, margin in choices:
            outcomes = sim.family_outcomes(cells, level, s.round_size, margin, finite)
            worst = max(o.rate(*sim.DECIDED) for o in outcomes.values()) / s.sims
            check = s.alpha if level == per_cell else None
            for held in (True, False) if check else (True,):
                errors = sim.family_errors(outcomes) if held else sim.through_task_errors(outcomes)
                used = sim.samples_used(outcomes, through_tasks=not held).mean() / (len(tasks) * FAMILY_LENGTHS)
                name = f"{rule}, {'averages held' if held else 'through tasks (bound)'}"
                rows.append(
                    f"{label:<12}{name:<72}{_rate(int(errors.sum()), s.sims, check):<32}{worst:>10.2%}{used:>10.0f}"
                )
    return rows


SECTION_ROWS = {
    "null": null_rows,
    "form": form_rows,
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
