"""NoLiMa (adobe-research/NoLiMa): tasks nolima and nolima_direct, suites "nolima" and "nolima-direct".

    harness eval --suite nolima --lengths 512,1k,2k,4k,8k --nolima-data DIR ...

See tasks.nolima.tasks for what carries over from the reference and the length convention.
"""

from tasks.nolima import tasks as _tasks  # noqa: F401  (registers tasks and suites)
