"""Naiad-style notifications on top of capabilities: "tell me when time t is complete"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from sortedcontainers import SortedDict

from ..errors import CapabilityError
from .capability import Capability, CapabilityRef

if TYPE_CHECKING:
    from .operator import OperatorRuntime
    from .ports import InputPort

__all__ = ["FrontierNotificator", "Notificator"]


class FrontierNotificator:
    """Holds capabilities until frontiers pass their times, then hands them back in time order.

    ``notify_at(cap)`` asks to be told when ``cap.time`` is complete (one request per
    time is kept). ``ready(frontiers)`` yields each capability whose time no frontier
    can still reach, earliest first, one at a time (as timely's ``next``): the
    capability is valid inside the loop body and is dropped when the loop moves on
    (``cap.delayed(...)`` keeps a time longer).
    Pending times are kept sorted, so for totally ordered times (``int``) finding the
    ready ones costs only the ready ones.
    """

    def __init__(self) -> None:
        self._pending: SortedDict = SortedDict()

    def notify_at(self, cap: Capability | CapabilityRef) -> None:
        if isinstance(cap, CapabilityRef):
            if cap.time in self._pending:
                return
            cap = cap.retain()
        if cap.time in self._pending:
            cap.drop()
        else:
            self._pending[cap.time] = cap

    def ready(self, frontiers: Iterable[Any]) -> Iterator[Capability]:
        """Each capability whose time no frontier can still reach, least first, one at a time: a request
        made inside the loop for a time already complete comes next in turn, and breaking out of the
        loop leaves the rest pending. The capability is dropped when the loop moves on."""
        frontiers = list(frontiers)
        while True:
            cap = self._next(frontiers)
            if cap is None:
                return
            try:
                yield cap
            finally:
                if not cap.dropped:
                    cap.drop()

    def next(self, frontiers: Iterable[Any]) -> Capability | None:
        """The least capability no frontier can reach (it is yours: drop it when done), or ``None``."""
        return self._next(list(frontiers))

    def _next(self, frontiers: list[Any]) -> Capability | None:
        pending = self._pending
        if not pending:
            return None
        total = type(pending.peekitem(0)[0]) is int
        for t in pending:
            if any(f.less_equal(t) for f in frontiers):
                if total:
                    return None  # every later time is reachable too
                continue
            cap: Capability = pending.pop(t)
            return cap
        return None

    def pending(self) -> list[Any]:
        """The times waiting to be notified, earliest first."""
        return list(self._pending)

    def __len__(self) -> int:
        return len(self._pending)


class Notificator(FrontierNotificator):
    """A :class:`FrontierNotificator` bound to an operator's inputs: ``ready()`` needs no frontiers.

    ``init`` asks for notifications up front (timely's ``init`` of ``unary_notify``): one at each of those
    times, held with the capability of output 0 among ``initial``.

    In a recoverable dataflow, given the operator's initial capabilities, it takes up the times pending in
    the snapshot resumed from, and its pending times are part of every snapshot the operator takes part in
    (that is, when it keeps state of its own); an ``init`` time before the time resumed from was notified
    before the snapshot and is not asked for again."""

    def __init__(self, op: OperatorRuntime, initial: list[Capability] | None = None,
                 init: Iterable[Any] = ()) -> None:
        super().__init__()
        self._inputs: list[InputPort] = op.inputs
        recoverable = initial is not None and op.scope.dataflow.snapshotter is not None
        if recoverable:
            assert initial is not None
            for output, time in op.recovery.restored_alongside("notifications"):
                self.notify_at(initial[output].delayed(time))
            op.recovery.keep_alongside("notifications", self._pending_pairs)
        times = list(init)
        if times:
            if not initial:
                raise CapabilityError(f"{op.describe()}: notifications asked for up front need a capability "
                                      "to hold them: the operator has no output")
            less_equal = op.ttype.less_equal
            start = op.recovery.resume_time() if recoverable and op.scope.parent is None else op.ttype.minimum
            for time in times:
                if less_equal(start, time):
                    self.notify_at(initial[0].delayed(time))

    def _pending_pairs(self) -> list[tuple[int, Any]]:
        return [(cap.output, t) for t, cap in self._pending.items()]

    def ready(self, frontiers: Iterable[Any] | None = None) -> Iterator[Capability]:
        return super().ready(self._inputs if frontiers is None else frontiers)

    def next(self, frontiers: Iterable[Any] | None = None) -> Capability | None:
        return super().next(self._inputs if frontiers is None else frontiers)
