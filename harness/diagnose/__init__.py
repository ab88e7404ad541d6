"""Diagnostics of numerical behaviour; `harness diagnose rope` (see harness/diagnose/rope.py)."""
