"""User-facing errors.

A `UserError` is a mistake the user can fix (bad flag, missing file, unknown task). The CLI
prints it as one line, `error: <message>`, and exits with code 2. Messages name the problem
and the fix. Invariants inside the code use `assert`, never this class.
"""


class UserError(Exception):
    """A problem with the user's input; printed as one line, exit code 2."""


class TaskUnavailable(UserError):
    """A task's data source is missing. Reported as unavailable, never scored as 0."""


class MissingExtra(UserError):
    """A feature needs an optional dependency that is not installed."""

    def __init__(self, feature: str, install: str):
        super().__init__(f"{feature} needs an optional dependency: install it with `{install}`")


__all__ = ["MissingExtra", "TaskUnavailable", "UserError"]
