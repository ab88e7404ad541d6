"""`harness generate`: write task samples as JSONL, one file per (task, length).

    harness generate --suite ruler --lengths 4k-128k --samples 100 --out data/
    harness generate --tasks qa_1,qa_2 --squad dev-v2.0.json --hotpotqa hotpot_dev_distractor_v1.json \\
        --lengths 4k --samples 10 --out data/ --tokenizer path/to/tokenizer

Writes <out>/<task>/<length>.jsonl (one Sample.to_json() per line, see docs/contracts.md) and
<out>/unavailable.json naming the tasks whose data is missing, with the fix. A task/length that
cannot be built (a length below the task's fixed parts) is reported and the others still run;
the command then exits 2. Samples are cached
by content hash (tasks.generate), so a re-run or a larger --samples reuses the finished ones.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Literal

HELP = "generate task samples (JSONL per task and length) for a tokenizer"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", help="suite name, e.g. ruler or ruler-llama2")
    p.add_argument("--tasks", help="comma list of tasks (instead of --suite)")
    p.add_argument("--exclude", help="comma list of tasks to leave out")
    p.add_argument("--lengths", required=True, help="lengths, e.g. 4k-128k, 1k,4k,16k or 4000 (k = 1024)")
    p.add_argument(
        "--protocol",
        choices=["reference", "exact-length", "completion"],
        default="reference",
        help="inputs of the published suites, as `harness eval --protocol` (default reference)",
    )
    p.add_argument("--tokenizer", help="Hugging Face tokenizer directory or hub name (default: the embedded tokenizer)")
    p.add_argument("--samples", type=int, default=100, help="samples per task and length (default 100)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--seed", type=int, default=None, help="seed (default 42)")
    p.add_argument("--cache-dir", help="sample cache directory (default: $HARNESS_CACHE/samples; 'none' disables it)")
    from tasks import data_sources

    data_sources.add_arguments(p.add_argument_group("task data, offline (online: the hub)"))


def run(args) -> int:
    from harness.core.atomic import atomic_write
    from harness.core.errors import UserError
    from harness.core.lengths import parse_lengths
    from harness.core.paths import check_out
    from harness.core.validate import MAX_COUNT, require_at_least, require_at_most, require_given
    from harness.models.embedded import default_tokenizer_dir
    from harness.models.sources import model_tokenizer
    from tasks import data_sources
    from tasks.generate import DEFAULT_SEED
    from tasks.registry import resolve_tasks, split_csv

    require_given(args)  # --tokenizer '' was the embedded tokenizer in silence
    require_at_least((("--samples", args.samples, 1), ("--seed", args.seed, 0)))
    require_at_most((("--samples", args.samples, MAX_COUNT),))
    out = check_out(args.out)
    data_sources.apply(args)
    lengths = parse_lengths(args.lengths)
    names = resolve_tasks(args.suite, split_csv(args.tasks), split_csv(args.exclude))
    seed = DEFAULT_SEED if args.seed is None else args.seed
    tokenizer = model_tokenizer(args.tokenizer or str(default_tokenizer_dir()), light=True)
    # 'none' disables the cache, as in `harness eval` (never a directory called "none")
    cache_dir: Path | Literal[False] | None = (
        False if args.cache_dir == "none" else (Path(args.cache_dir) if args.cache_dir else None)
    )
    tasks, unavailable = _available_tasks(names, args.protocol)

    failed: list[str] = []
    written = 0
    for task in tasks:
        count, errors = _write_task(task, lengths, args.samples, tokenizer, seed, cache_dir, out)
        written += count
        failed += errors
    atomic_write(out / "unavailable.json", json.dumps(unavailable, indent=2, sort_keys=True) + "\n")
    print(
        f"wrote {written} samples for {len(names) - len(unavailable)} tasks to {out}"
        + (f"; unavailable: {', '.join(sorted(unavailable))} (see {out / 'unavailable.json'})" if unavailable else "")
    )
    if failed:
        raise UserError(f"{len(failed)} task/length pairs failed (see above), first: {failed[0]}")
    if not written:
        raise UserError(f"no samples were written to {out}: see the lines above for why")
    return 0


def _available_tasks(names: list[str], protocol: str) -> tuple[list, dict[str, str]]:
    """Plan first: the tasks that have their data, and {name: why} for the others (one line each).
    None available: nothing is written, exit 2 (as eval does)."""
    from harness.core.errors import TaskUnavailable, UserError
    from tasks.registry import get_task

    unavailable: dict[str, str] = {}
    tasks = []
    for name in names:
        task = get_task(name)
        task.set_protocol(protocol)
        try:
            task.check_available()
        except TaskUnavailable as exc:
            unavailable[name] = str(exc)
            continue
        tasks.append(task)
    for name, reason in unavailable.items():
        print(f"{name}: unavailable: {reason}")
    if not tasks:  # one line per task above, one error line here; nothing is written
        if len(unavailable) == 1:
            raise UserError("no task can run: " + "".join(f"{k}: {v}" for k, v in unavailable.items()))
        raise UserError(
            f"no task can run: {', '.join(unavailable)}; give each its data as the lines above say (no samples written)"
        )
    return tasks, unavailable


def _write_task(task, lengths: list[int], samples: int, tokenizer, seed: int, cache_dir, out: Path):
    """One task's samples at each of its lengths into <out>/<task>/<length>.jsonl; returns (samples
    written, the lengths that failed, each as a line). A length that cannot be built is reported
    and the others still run."""
    from harness.core.atomic import atomic_write
    from harness.core.errors import TaskUnavailable, UserError
    from harness.core.lengths import format_length
    from harness.core.progress import progress_bar
    from tasks.generate import generate_samples

    name = task.name
    failed: list[str] = []
    written = 0
    # the task's own lengths under the protocol (NoLiMa's reference reads 1k as a 1000-token haystack)
    own = task.task_lengths(lengths, 0, None) if task.length_controlled else lengths
    for length in [0] if task.no_context else own:
        n = samples
        try:
            avail = _available(task, length, tokenizer)
        except TaskUnavailable as exc:  # no sample at this length (rows that fit it, ppl's windows)
            failed.append(f"{name} {format_length(length)}: {exc}")
            print(f"failed: {name} {format_length(length)}: {exc}")
            continue
        if avail is not None and avail < n:
            print(f"{name}: the data holds {avail} samples; writing {avail}")
            n = avail
        bar = progress_bar(total=n, desc=f"{name} {format_length(length)}", unit="sample")
        last = [0]

        def progress(k, bar=bar, last=last):
            bar.update(k - last[0])
            last[0] = k

        try:
            made = generate_samples(
                task, length, range(n), tokenizer, seed=seed, cache_dir=cache_dir, progress=progress
            )
        except UserError as exc:  # e.g. a length below the task's fixed parts: the other tasks go on
            bar.close()
            failed.append(f"{name} {format_length(length)}: {exc}")
            print(f"failed: {name} {format_length(length)}: {exc}")  # the one `error:` line comes at the end
            continue
        bar.close()
        path = out / name / f"{length}.jsonl"
        atomic_write(path, "".join(s.to_json() + "\n" for s in made))
        written += len(made)
        print(f"{name} {format_length(length)}: {len(made)} samples -> {path}")
    return written, failed


def _available(task, length: int, tokenizer) -> int | None:
    """The samples the data holds at a length, counted with the tokenizer where the task's count
    depends on it (as `harness eval` counts them: GraphWalks' rows that fit, ppl's windows)."""
    counter = getattr(task, "num_samples_with_tokenizer", None)
    return counter(length, tokenizer) if counter is not None else task.num_samples_available(length)
