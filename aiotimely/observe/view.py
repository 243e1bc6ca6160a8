"""What looking inside a worker reads: :class:`SchedulerView`, the read-only face of a worker's scheduler.

The metrics, the live page and the drawings read a worker through this view, never through its private
fields: ``worker.scheduler_view`` gives it (a :class:`~aiotimely.worker.Scheduler` is one too, so code that
passes schedulers goes on working).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from ..worker.schedule import Schedule
from ..worker.scheduler import WorkerStatistics

__all__ = ["SchedulerView"]


@runtime_checkable
class SchedulerView(Protocol):
    """A worker's scheduler, read only: which worker it is, what it has done, and the dataflows it runs."""

    @property
    def index(self) -> int:
        """The worker's index, in ``range(peers)``."""

    @property
    def peers(self) -> int:
        """The number of workers in the computation (every process's)."""

    @property
    def rounds(self) -> int:
        """Rounds of scheduling done so far."""

    @property
    def operators_run(self) -> int:
        """Operator activations run so far."""

    def statistics(self) -> WorkerStatistics:
        """What the worker has done so far, with every operator's counts."""

    def dataflows(self) -> Sequence[Schedule]:
        """The dataflows the worker runs that are not complete yet, in the order they were built."""
