"""The workers of one process: the fabric they share, the first failure among them, stuck detection, and
stopping on request: the sources end and the dataflows drain what they hold and complete; or, when the dataflows
keep snapshots, they are suspended at a final snapshot (nothing ends, so no window closes early)."""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..comm.local import LocalFabric
from ..errors import DataflowError

if TYPE_CHECKING:
    from ..comm.fabric import Fabric
    from .scheduler import Scheduler

__all__ = ["Computation", "Halted", "STALL_AFTER", "stall_after"]

log = logging.getLogger("aiotimely")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

STALL_AFTER = 10.0
"""Seconds a worker waited on (a probe's ``wait_beyond`` / ``wait_done``, ``step_while``) may do nothing before it
says, in one log line, what holds time back; ``AIOTIMELY_STALL_AFTER`` overrides it (0: never)."""


def stall_after(seconds: float | None = None) -> float:
    """``seconds``, else ``AIOTIMELY_STALL_AFTER`` when set, else :data:`STALL_AFTER`; 0 turns stall reports off."""
    where = "stall_after"
    if seconds is None:
        text = os.environ.get("AIOTIMELY_STALL_AFTER")
        if text is None or not text.strip():
            return STALL_AFTER
        where = "AIOTIMELY_STALL_AFTER"
        try:
            seconds = float(text)
        except ValueError:
            raise ValueError(f"AIOTIMELY_STALL_AFTER={text!r} is not a number of seconds: give e.g. 10, or 0 to "
                             "turn stall reports off") from None
    if not seconds >= 0:  # (NaN too)
        raise ValueError(f"{where} must be a number of seconds, at least 0 (0 turns stall reports off), "
                         f"not {seconds!r}")
    return float(seconds)


_stall_after = stall_after  # (for Computation, whose argument of that name hides it)


class Halted(Exception):
    """What a computation asked to stop fails with when it cannot drain: the grace period ended, or it was asked
    again. (It never reaches a user: :func:`aiotimely.execute` says it in one line, an application whose task was
    cancelled sees its ``CancelledError``.)"""


class Computation:
    """The workers of one process: their fabric (mailboxes, and links to other processes), and the first
    failure among them, which stops them all."""

    def __init__(self, peers: int, *, fabric: Fabric | None = None, distributed: bool = False,
                 recoverable: bool = False, stall_after: float | None = None) -> None:
        self.peers = peers
        self.fabric: Fabric = fabric if fabric is not None else LocalFabric(peers)
        self.distributed = distributed
        self.workers: list[Scheduler] = []
        self.error: BaseException | None = None
        self.stopping = False
        """A stop was asked for (:meth:`request_stop`)."""
        self.recoverable = recoverable
        """The dataflows keep snapshots: a stop suspends them at a final snapshot instead of draining them."""
        self._on_stop: dict[int, Callable[[], None]] = {}
        self._next_stop = 0
        self._final_snapshots: dict[int, Callable[[], asyncio.Future[None]]] = {}
        self._taken: list[asyncio.Future[None]] = []
        self.stall_after = _stall_after(stall_after)
        """Seconds a waited-on worker may do nothing before it says what holds time back (0: never)."""
        self._watchers: weakref.WeakKeyDictionary[Any, Callable[[Any, BaseException], None]] = (
            weakref.WeakKeyDictionary())
        self._on_failure: list[Callable[[BaseException], None]] = []

    @property
    def suspending(self) -> bool:
        """A stop was asked for, and the dataflows keep snapshots: they are being suspended, not drained."""
        return self.stopping and self.recoverable

    def fail(self, error: BaseException) -> None:
        """Record the first failure and wake every worker so that all of them stop; tell who watches for it
        (:meth:`watch_failure`, :meth:`on_failure`) at once, unless it is a stop (:class:`Halted`, a cancellation)."""
        first = self.error is None
        if first:
            self.error = error
        for worker in self.workers:
            worker.wake_up()
        if not first or isinstance(error, (Halted, asyncio.CancelledError)):
            return
        for owner, told in list(self._watchers.items()):
            told(owner, error)
        for fn in list(self._on_failure):
            try:
                fn(error)
            except Exception:  # (a listener's bug must not stop the others, nor the workers stopping)
                log.exception("a listener for the computation's failure raised")

    def watch_failure(self, owner: T, told: Callable[[T, BaseException], None]) -> None:
        """Call ``told(owner, error)`` when the computation fails (at once if it has), holding ``owner`` weakly:
        what an :class:`~aiotimely.InputHandle` uses to refuse records from then on, at no cost per record."""
        if self.error is not None and not isinstance(self.error, (Halted, asyncio.CancelledError)):
            told(owner, self.error)
        else:
            self._watchers[owner] = told

    def on_failure(self, fn: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``fn(error)`` when the computation fails (not when it is stopped); returns a function that
        forgets ``fn``."""
        self._on_failure.append(fn)

        def forget() -> None:
            if fn in self._on_failure:
                self._on_failure.remove(fn)

        return forget

    def request_stop(self) -> None:
        """Stop gracefully: every source registered with :meth:`on_stop` is told to end (it ends as if its input
        had ended), so that the dataflows drain what they hold and complete. Who runs the workers closes their
        inputs (the workers' builds end) and bounds the wait. Asking twice is harmless.

        A recoverable computation is suspended instead: ending a source would close every open window with a
        part of its records, a value no crash-free run publishes. Nothing ends; each dataflow takes a final
        snapshot of what it was given so far (:meth:`on_final_snapshot`), and once those are complete
        everywhere, who runs the workers stops them where they are, as a crash would, at a chosen point."""
        if self.stopping:
            return
        self.stopping = True
        if self.recoverable:
            self._taken.extend(take() for take in self._final_snapshots.values())
        else:
            callbacks, self._on_stop = self._on_stop, {}
            for fn in callbacks.values():
                fn()
        for worker in self.workers:
            worker.wake_up()

    def on_stop(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` when a stop is asked for (at once if it was already); returns a function that forgets
        ``fn`` (call it when what ``fn`` stops has ended by itself)."""
        if self.stopping:
            fn()
            return _nothing
        return self._keep(self._on_stop, fn)

    def on_final_snapshot(self, take: Callable[[], asyncio.Future[None]]) -> Callable[[], None]:
        """A recoverable dataflow: when the computation is suspended, ``take()`` starts its final snapshot and
        returns a future done once that snapshot is complete everywhere (at once if the suspension began
        already). Returns a function that forgets ``take`` (call it once the dataflow is complete)."""
        if self.suspending:
            self._taken.append(take())
            return _nothing
        return self._keep(self._final_snapshots, take)

    def _keep(self, registry: dict[int, F], fn: F) -> Callable[[], None]:
        """Keep ``fn`` in ``registry`` until the function returned is called."""
        key = self._next_stop
        self._next_stop += 1
        registry[key] = fn

        def forget() -> None:
            registry.pop(key, None)

        return forget

    async def final_snapshots(self) -> None:
        """Wait until the final snapshot of every dataflow of these workers is complete everywhere (those of
        dataflows built while waiting too)."""
        while True:
            taken = [fut for fut in self._taken if not fut.done()]
            if not taken:
                for fut in self._taken:
                    fut.result()  # (a failure is what the computation failed with: say it)
                return
            await asyncio.wait(taken)

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


def _nothing() -> None:
    pass
