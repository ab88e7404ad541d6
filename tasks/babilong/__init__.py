"""BABILong (booydar/babilong): suites babilong (qa1-qa10), babilong-qa1-5, babilong-all (qa1-qa20),
babilong-0k, babilong-0k-all. Importing this package registers them; see tasks.babilong.tasks."""

from tasks.babilong import tasks as _tasks  # noqa: F401  (registers tasks and suites)
