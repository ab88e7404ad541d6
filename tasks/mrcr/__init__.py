"""OpenAI-MRCR (hub dataset openai/mrcr): suite mrcr, tasks mrcr_2needle, mrcr_4needle, mrcr_8needle.
Importing this package registers them; see tasks.mrcr.tasks."""

from tasks.mrcr import tasks as _tasks  # noqa: F401  (registers tasks and the suite)
