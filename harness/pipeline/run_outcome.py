"""What an evaluation run did, said in its last line (issue 49 item 4).

    from harness.pipeline.run_outcome import stored_keys, Outcome
    before = stored_keys(plan)
    execute(plan)
    outcome = Outcome.of(plan, before, stored_keys(plan))
    outcome.refuse_if_nothing()       # UserError: evaluated nothing and the run is not complete
    print(outcome.line())             # "nothing new to evaluate: ..." / "evaluated 3 of 6 ..." / None

A run that evaluated nothing and is not complete (every checkpoint left to evaluate was deleted
before its turn by a training run's --keep-last) exits 2 with one line saying so, instead of 0
after a table of dashes. A resumed run whose samples were all stored already evaluated nothing
new but is complete: its last line says that results.json was re-written from the stored samples,
and it exits 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.errors import UserError


def stored_keys(plan) -> set[tuple]:
    """The plan's store keys the store holds now (other processes' appends included)."""
    from harness.pipeline.store import ResultStore

    path = plan.out / "samples.jsonl"
    if not path.exists():
        return set()
    return ResultStore(path).done_keys() & plan.planned_keys


@dataclass(frozen=True)
class Outcome:
    planned: int  # samples x checkpoints the plan asks for
    before: int  # of them, stored before this run
    after: int  # ... and after it
    missing: tuple  # checkpoints (harness.models.checkpoints.Checkpoint) with samples still not stored

    @classmethod
    def of(cls, plan, before: set[tuple], after: set[tuple]) -> Outcome:
        lacking = {key[0] for key in plan.planned_keys - after}  # key[0]: the checkpoint's fingerprint
        missing = tuple(c for c in plan.ckpts if c.fingerprint in lacking)
        return cls(len(plan.planned_keys), len(before), len(after), missing)

    @property
    def new(self) -> int:
        return self.after - self.before

    def _why_missing(self) -> str:
        from harness.models.sources.base import vanished

        gone = [c for c in self.missing if vanished(c)]
        shown = ", ".join(c.path for c in self.missing[:3]) + (
            f" (+{len(self.missing) - 3})" if len(self.missing) > 3 else ""
        )
        if gone and len(gone) == len(self.missing):
            return (
                f"{shown} {'was' if len(gone) == 1 else 'were'} deleted before {'its' if len(gone) == 1 else 'their'} "
                "turn (a training run's --keep-last?): evaluate after the training run, or pass checkpoints it keeps"
            )
        return f"{shown} {'has' if len(self.missing) == 1 else 'have'} samples left to evaluate: re-run the command"

    def refuse_if_nothing(self) -> None:
        """UserError when this run evaluated nothing and its plan is not complete."""
        if self.new == 0 and self.after < self.planned:
            held = (
                f"; results.json holds the {self.after} of {self.planned} samples stored before" if self.after else ""
            )
            raise UserError(f"evaluated nothing: {self._why_missing()}{held}")

    def line(self) -> str | None:
        """The run's closing line where the table alone would not say what happened."""
        if self.planned and self.new == 0 and self.after == self.planned:
            return (
                f"nothing new to evaluate: all {self.planned} samples of this run were stored already "
                "(results.json re-written from them)"
            )
        if self.new and self.after < self.planned:
            return (
                f"warning: evaluated {self.new} samples, {self.after} of {self.planned} stored: {self._why_missing()}"
            )
        return None
