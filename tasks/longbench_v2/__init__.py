"""LongBench v2 (THUDM/LongBench v2): suites longbench-v2, longbench-v2-cot, longbench-v2-nocontext,
longbench-v2-untruncated.
Importing this package registers them; see tasks.longbench_v2.tasks."""

from tasks.longbench_v2 import tasks as _tasks  # noqa: F401  (registers tasks and suites)
from tasks.longbench_v2.tasks import SUITE_CATEGORIES  # noqa: F401
