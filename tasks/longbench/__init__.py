"""LongBench v1 (THUDM/LongBench): 21 tasks, LongBench-E and its buckets, suites longbench,
longbench-en, longbench-icl, longbench-e*. Importing this package registers them.

    harness eval --suite longbench-icl ...      (offline: export HARNESS_LONGBENCH=DIR first)

See tasks.longbench.tasks for the truncation/length convention.
"""

from tasks.longbench import tasks as _tasks  # noqa: F401  (registers tasks and suites)
from tasks.longbench.tasks import SUITE_CATEGORIES  # noqa: F401
