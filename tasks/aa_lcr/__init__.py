"""AA-LCR (hub dataset ArtificialAnalysis/AA-LCR): suite aa-lcr, task aa_lcr. Importing this package
registers them; see tasks.aa_lcr.tasks."""

from tasks.aa_lcr import tasks as _tasks  # noqa: F401  (registers the task and the suite)
