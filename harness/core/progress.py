"""Progress bars on stderr, shown only on a terminal.

    from harness.core.progress import progress_bar
    bar = progress_bar(total=n, desc="samples", unit="sample", enabled=not args.no_progress)

A bar is for a person watching: on a terminal it redraws one line (and harness.cli erases that
line before printing an `error:`, so a failed command still ends in exactly one line). Written to a
file or a pipe (a log, a test harness, `2>&1 | tee`), tqdm's redraws would be a stream of partial
lines ahead of the error line; there the bar is off.
"""

from __future__ import annotations

import sys


def progress_bar(total: int, desc: str, unit: str, enabled: bool = True, leave: bool = False):
    from tqdm import tqdm

    # disable=None: tqdm's own "only when the stream is a terminal"
    return tqdm(total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr, disable=None if enabled else True)
