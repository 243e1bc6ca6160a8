"""The workers of one process: the fabric they share, the first failure among them, and stuck detection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..comm.local import LocalFabric
from ..errors import DataflowError

if TYPE_CHECKING:
    from ..comm.fabric import Fabric
    from .scheduler import Scheduler

__all__ = ["Computation"]


class Computation:
    """The workers of one process: their fabric (mailboxes, and links to other processes), and the first
    failure among them, which stops them all."""

    def __init__(self, peers: int, *, fabric: Fabric | None = None, distributed: bool = False) -> None:
        self.peers = peers
        self.fabric: Fabric = fabric if fabric is not None else LocalFabric(peers)
        self.distributed = distributed
        self.workers: list[Scheduler] = []
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        """Record the first failure and wake every worker so that all of them stop."""
        if self.error is None:
            self.error = error
        for worker in self.workers:
            worker.wake_up()

    def check_stuck(self) -> None:
        """If every worker waits for completion and none can move, fail with what blocks them."""
        workers = self.workers
        if self.distributed or not workers or any(not w.idle_for_good() for w in workers):
            return  # (other processes could still wake these workers)
        blocked = [line for w in workers for line in w.blockers()]
        if not blocked:
            return  # every worker is complete
        self.fail(DataflowError(
            "the computation cannot complete: nothing can run, but "
            + "; ".join(blocked)
            + ". Drop capabilities (or let the operator's logic return) once their times are done."
        ))
