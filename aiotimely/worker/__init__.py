"""Layer 3: workers — the scheduler task, stepping, and running computations."""

from .execution import execute as execute
from .execution import execute_async as execute_async
from .execution import execute_from_args as execute_from_args
from .worker import Worker as Worker
