"""harness: evaluate long-context checkpoints (RULER, LongBench, ICL, short-context retention)."""

__version__ = "0.1.0"
