"""GraphWalks (openai/graphwalks): suites graphwalks, graphwalks-flexible, graphwalks-exact-length.
Importing this package registers them; see tasks.graphwalks.tasks."""

from tasks.graphwalks import tasks as _tasks  # noqa: F401  (registers tasks and suites)
from tasks.graphwalks.tasks import SUITE_CATEGORIES  # noqa: F401
