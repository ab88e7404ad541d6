"""Short-context retention checks through lm-eval: tasks mmlu and hellaswag, suite "short".

harness eval --suite short ...   (offline: export HARNESS_MMLU=DIR HARNESS_HELLASWAG=DIR)
"""

from tasks.short import tasks as _tasks  # noqa: F401  (registers tasks and the suite)
