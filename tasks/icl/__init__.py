"""HELMET-style many-shot ICL classification: tasks icl_*, suites "icl" and "icl-natural".

harness eval --suite icl --lengths 4k-128k ...   (offline: export HARNESS_ICL_DATA=DIR)
"""

from tasks.icl import tasks as _tasks  # noqa: F401  (registers tasks and suites)
