"""User-facing errors.

A `UserError` is a mistake the user can fix (bad flag, missing file, unknown task). The CLI
prints it as one line, `error: <message>`, and exits with code 2. Messages name the problem
and the fix. Invariants inside the code use `assert`, never this class.
"""

import math


class UserError(Exception):
    """A problem with the user's input; printed as one line, exit code 2."""


class TaskUnavailable(UserError):
    """A task's data source is missing. Reported as unavailable, never scored as 0."""


class MissingExtra(UserError):
    """A feature needs an optional dependency that is not installed."""

    def __init__(self, feature: str, install: str):
        super().__init__(f"{feature} needs an optional dependency: install it with `{install}`")


def _require_finite(flag: str, value) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{flag} {value} is not a finite number: give a finite value")


def require_at_least(checks) -> None:
    """Raise a UserError for the first (flag, value, lowest) whose value is NaN, infinite or below
    lowest. A value of None (a flag left at its "not given" default) passes."""
    for flag, value, low in checks:
        if value is None:
            continue
        _require_finite(flag, value)
        if value < low:
            raise UserError(f"{flag} {value} must be at least {low}")


def require_above(checks) -> None:
    """Like require_at_least, for (flag, value, bound) whose value must be strictly above bound."""
    for flag, value, bound in checks:
        if value is None:
            continue
        _require_finite(flag, value)
        if not value > bound:
            raise UserError(f"{flag} {value} must be greater than {bound}")
