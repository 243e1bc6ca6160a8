"""Layer 3: workers — the scheduler task, stepping, and running computations."""

from .execute import execute as execute
from .execute import execute_from_args as execute_from_args
from .worker import Worker as Worker
