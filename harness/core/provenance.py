"""Where a result came from: package version, git hash of the checkout, creation time.

    from harness.core.provenance import provenance
    provenance()  # {"package_version": "0.1.0", "git_hash": "ab12...", "created": "2026-...Z"}

The git hash is that of the checkout the `harness` package is imported from (an editable
install or a source tree); a wheel install has no checkout and records null. A checkout with
uncommitted changes gets a "-dirty" suffix, because its scores may not be reproducible from
the hash alone.
"""

from __future__ import annotations

import functools
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from harness import __version__


def package_version() -> str:
    return __version__


@functools.lru_cache(maxsize=1)
def git_hash() -> str | None:
    """HEAD of the checkout holding this package (+ "-dirty"), or None outside a checkout."""
    root = Path(__file__).resolve().parents[2]  # harness/core/provenance.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):  # no git binary, or a hung filesystem
        return None
    suffix = "-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else ""
    return head.stdout.strip() + suffix


def now_iso() -> str:
    """UTC time as ISO 8601 with a Z suffix, to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance() -> dict:
    return {"package_version": package_version(), "git_hash": git_hash(), "created": now_iso()}
