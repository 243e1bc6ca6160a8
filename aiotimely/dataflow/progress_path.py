"""How a scope's progress travels from its children to its tracker: the one seam of the speed roads.

Every worker reports what its children did (records consumed and produced, capabilities
changed) and applies every worker's reports, in the same order, to its tracker. With
other workers, or someone reading the ``"timely"`` log, a worker's reports travel as one
:class:`~aiotimely.progress.ProgressBatch` a round, broadcast and applied here at once
(:class:`Broadcast`). Alone (one worker, nobody reading), no batch is made: reports go
straight into the tracker's pending counts, and what can only move the frontiers of
fused operators (which never look at them) may wait for the next propagation
(:class:`Alone`). The scope asks :func:`path_of` which road it is on at each round
(someone may start reading the log at any time) and otherwise does not know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..worker.logging import progress_event

if TYPE_CHECKING:
    from ..progress import Subgraph
    from ..worker import WorkerHandle

__all__ = ["ProgressPath", "Alone", "Broadcast", "path_of"]


class ProgressPath(Protocol):
    """What a scope does with its children's reports."""

    def collect(self, sub: Subgraph, child: int) -> None:
        """Take what ``child`` reported while it ran."""
        ...

    def publish(self, sub: Subgraph) -> bool:
        """Make what was collected since the last call known to every worker and apply it here; ``False`` if there
        was nothing (and nothing waits to be propagated)."""
        ...

    def may_wait(self, sub: Subgraph) -> bool:
        """Whether what waits for propagation may wait for a later one (it moves no frontier anyone looks at)."""
        ...


class Alone:
    """One worker, nobody reading its progress: reports go straight into the tracker (see the module)."""

    __slots__ = ()

    def collect(self, sub: Subgraph, child: int) -> None:
        sub.collect(child, direct=True)

    def publish(self, sub: Subgraph) -> bool:
        return sub.loop_back() or sub.tracker.has_pending()  # (what collect put straight there, too)

    def may_wait(self, sub: Subgraph) -> bool:
        return not sub.must_propagate()


class Broadcast:
    """Reports as one progress batch a round, broadcast on the scope's progress channel and applied here."""

    __slots__ = ("_worker", "_channel")

    def __init__(self, worker: WorkerHandle, channel: tuple[int, int]) -> None:
        self._worker = worker
        self._channel = channel

    def collect(self, sub: Subgraph, child: int) -> None:
        sub.extract(child)

    def publish(self, sub: Subgraph) -> bool:
        batch = sub.send()
        if batch is None:
            return False
        worker = self._worker
        log = worker.logging
        if log is not None:
            log.log(progress_event(batch, True, self._channel))
        worker.fabric.broadcast(self._channel, batch, skip=worker.index)
        sub.receive(batch)
        return True

    def may_wait(self, sub: Subgraph) -> bool:
        return False


ALONE = Alone()


def path_of(worker: WorkerHandle, broadcast: Broadcast) -> ProgressPath:
    """The road a scope's progress takes now: :data:`ALONE` for one worker nobody reads, else ``broadcast``."""
    return ALONE if worker.peers == 1 and worker.logging is None else broadcast
