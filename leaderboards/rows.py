"""What a leaderboard row says about its run besides the scores: the model and training mode it
shows, its checkpoints, and why its task or length set differs from the other rows'.

    from leaderboards.rows import row_identity
    row_identity(run, runs, root)   # {"model", "model_title", "mode", "mode_title", "is_base"}
"""

from __future__ import annotations

from pathlib import Path

from leaderboards.columns import suite_lengths
from leaderboards.labels import format_length, path_label, suite_label


def flag_sets(runs: list[dict], suite_names: list[str], against: dict[str, tuple] | None) -> tuple[dict, dict]:
    """Per run, why its task or length set differs from the others' (or the baseline's), and in which suites."""
    flags: dict[str, list[str]] = {r["run"]["name"]: [] for r in runs}
    where: dict[str, set] = {r["run"]["name"]: set() for r in runs}
    for sname in suite_names:
        have = [r for r in runs if sname in r["suites"]]
        sets = {
            r["run"]["name"]: (frozenset(r["suites"][sname]["evaluated"]), frozenset(suite_lengths(r["suites"][sname])))
            for r in have
        }
        if against is not None:
            ref = against.get(sname)
        else:
            ref = (
                (frozenset().union(*(s[0] for s in sets.values())), frozenset().union(*(s[1] for s in sets.values())))
                if sets
                else None
            )
        if ref is None or len(set(sets.values()) | {ref}) == 1:
            continue
        label = suite_label(sname, [t for r in have for t in r["suites"][sname]["tasks"]])
        for name, have_sets in sets.items():
            why = _differences(label, have_sets, ref)
            flags[name] += why
            if why:
                where[name].add(sname)
    return flags, where


def _differences(label: str, have: tuple[frozenset, frozenset], ref: tuple[frozenset, frozenset]) -> list[str]:
    """How a run's (tasks, lengths) of one suite differ from the reference's, one line each."""
    tasks, lengths = have
    why = []
    if tasks != ref[0]:
        lacks, extra = sorted(ref[0] - tasks), sorted(tasks - ref[0])
        why.append(
            f"{label}: tasks differ"
            + (f" (lacks {', '.join(lacks)})" if lacks else "")
            + (f" (extra {', '.join(extra)})" if extra else "")
        )
    if lengths != ref[1]:
        lacks = sorted(ref[1] - lengths)
        why.append(f"{label}: lengths differ" + (f" (lacks {', '.join(map(format_length, lacks))})" if lacks else ""))
    return why


def _text(value) -> str:
    """A run field for display: lists (several parents) joined, None as a dash."""
    if value is None or value == "":
        return "—"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, ValueError):
        return a == b


def _continued_from(run: dict) -> set[str]:
    """The models this run's checkpoints were trained from (harness_training.json job.model.path)."""
    out = set()
    for c in run["run"].get("checkpoints", []):
        node = c.get("training")
        for key in ("job", "model", "path"):  # results files are untrusted: any level may be missing
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, str) and node:
            out.add(node)
    return out


def is_base_of(run: dict, runs: list[dict]) -> bool:
    """Whether `run` is one model that other rows were continued from (the demo's base row)."""
    ckpts = run["run"].get("checkpoints", [])
    if len(ckpts) != 1 or not isinstance(ckpts[0].get("path"), str):
        return False
    parents = {p for other in runs if other is not run for p in _continued_from(other)}
    return any(_same_path(ckpts[0]["path"], p) for p in parents)


def row_identity(run: dict, runs: list[dict], root: Path | None = None) -> dict:
    """What a reader needs of a row: the model (a lone model by its own name, a training run by its
    folder relative to `root`) and the training mode, `—` for a base that other rows continue from."""
    info = run["run"]
    ckpts = info.get("checkpoints", [])
    base = is_base_of(run, runs)
    recorded = info.get("model")
    if len(ckpts) == 1 and isinstance(ckpts[0].get("path"), str) and (base or ckpts[0].get("step") is None):
        path = ckpts[0]["path"]
        hub = str(ckpts[0].get("fingerprint", "")).startswith("hub:")
        model, model_title = (path if hub else Path(path).name or path), path
    elif isinstance(recorded, list):
        model, model_title = ", ".join(path_label(str(m), root) for m in recorded), ", ".join(map(str, recorded))
    else:
        model, model_title = path_label(_text(recorded), root), _text(recorded)
    own_mode = _text(info.get("mode"))
    if base:
        mode = "—"
        mode_title = "not trained in this comparison: the model the other rows continue from" + (
            f" (its own training record: {own_mode})" if own_mode != "—" else ""
        )
    else:
        mode, mode_title = own_mode, own_mode
    return {"model": model, "model_title": model_title, "mode": mode, "mode_title": mode_title, "is_base": base}


def _steps_range(steps: list[int]) -> str:
    if not steps:
        return "—"
    steps = sorted(steps)
    return f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


def checkpoint_text(run: dict) -> tuple[str, list[int]]:
    """The row's checkpoints as shown ("1960–2000 (5)") and their steps."""
    steps = sorted(c["step"] for c in run["run"].get("checkpoints", []) if isinstance(c.get("step"), int))
    if not steps:
        return "—", []
    return f"{_steps_range(steps)} ({len(steps)})", steps
