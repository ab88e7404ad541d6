"""Our run beside an imported lm-eval, RULER or HELMET run of the same tasks (issue 50), built as a
user builds it: `harness import` on the other harness's files (tests/imports/sampled_formats.py,
each in its harness's own format), then `harness leaderboard` with our run as the baseline."""

from __future__ import annotations

from pathlib import Path

from harness.cli import main
from tests.imports import sampled_formats as sf

OURS = "smollm2-ours"
IMPORTED = {
    "lm-eval": "SmolLM2-135M-Instruct-lm-eval",
    "ruler": "SmolLM2-135M-Instruct-ruler",
    "helmet": "SmolLM2-135M-Instruct-helmet",
}
TASKS = ["niah_single_1", "niah_multikey_1", "vt"]


def other_files(kind: str, folder: Path) -> list[Path]:
    """The other harness's result files, as it writes them (with their per-sample files beside)."""
    if kind == "lm-eval":
        return [sf.write_lm_eval(folder)]
    if kind == "ruler":
        return sf.write_ruler(folder)
    return sf.write_helmet(folder)


def comparison(tmp: Path, kind: str, baseline: str | None = OURS, trec: bool = False) -> tuple[Path, list[Path]]:
    """(the site folder, the run folders) of our run beside the imported one."""
    ours = sf.write_our_run(tmp / "ours", trec=trec).parent
    imported = tmp / f"imp-{kind}"
    files = [sf.write_lm_eval(tmp / "lm", longbench_trec=True)] if trec else other_files(kind, tmp / kind)
    assert main(["import", *map(str, files), "--out", str(imported)]) == 0
    site = tmp / f"site-{kind}"
    extra = ["--baseline", baseline] if baseline else []
    assert main(["leaderboard", str(ours), str(imported), "--out", str(site), *extra]) == 0
    return site, [ours, imported]
