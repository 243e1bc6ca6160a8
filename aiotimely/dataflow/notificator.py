"""Naiad-style notifications on top of capabilities: "tell me when time t is complete"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from sortedcontainers import SortedDict

from .capability import Capability, CapabilityRef

if TYPE_CHECKING:
    from .operator import OperatorRuntime
    from .ports import InputPort

__all__ = ["FrontierNotificator", "Notificator"]


class FrontierNotificator:
    """Holds capabilities until frontiers pass their times, then hands them back in time order.

    ``notify_at(cap)`` asks to be told when ``cap.time`` is complete (one request per
    time is kept). ``ready(frontiers)`` yields each capability whose time no frontier
    can still reach, earliest first; the capability is valid inside the loop body and
    is dropped when the loop moves on (``cap.delayed(...)`` keeps a time longer).
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
        frontiers = list(frontiers)
        pending = self._pending
        if not pending:
            return
        total = type(pending.peekitem(0)[0]) is int
        due = []
        for t in pending:
            if any(f.less_equal(t) for f in frontiers):
                if total:
                    break  # every later time is reachable too
                continue
            due.append(t)
        if not due:
            return
        caps = [pending.pop(t) for t in due]
        for cap in caps:
            yield cap
            if not cap.dropped:
                cap.drop()

    def pending(self) -> list[Any]:
        """The times waiting to be notified, earliest first."""
        return list(self._pending)

    def __len__(self) -> int:
        return len(self._pending)


class Notificator(FrontierNotificator):
    """A :class:`FrontierNotificator` bound to an operator's inputs: ``ready()`` needs no frontiers."""

    def __init__(self, op: OperatorRuntime) -> None:
        super().__init__()
        self._inputs: list[InputPort] = op.inputs

    def ready(self, frontiers: Iterable[Any] | None = None) -> Iterator[Capability]:
        return super().ready(self._inputs if frontiers is None else frontiers)
