"""One line of `harness doctor` (harness/pipeline/doctor.py): a check's name, status and detail.

    from harness.pipeline.doctor_check import Check, FAIL
    Check("context", FAIL, "longest length 16K > the context 8192 of m: ...").line()

Its own module so the doctor's checks can live in several modules (doctor_prompt.py,
doctor_served.py) without importing the doctor itself.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.name:<16} {self.detail}"
