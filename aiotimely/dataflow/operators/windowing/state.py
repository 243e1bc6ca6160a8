"""The open windows of a window operator (base class): what every kind of window (fixed, sessions, combined)
keeps and shares.

The kept state is ``key -> {window id: [end, accumulator]}`` (:meth:`InputPort.keyed_state`: saved in snapshots,
moved by key between numbers of workers). Each open window waits, in a heap of its kind, for its deadline, and
holds the pool's capability for its output time while it waits.
"""

from __future__ import annotations

from typing import Any

from ...capability import Capability
from ...windowing import Aggregation
from ..pool import CapabilityPool
from .deadlines import Deadlines

__all__ = ["Windows", "Due"]

Due = tuple[dict[Any, list[Any]], dict[Any, int]]
"""What closing windows found: their result rows by output time, and how many pool holds each time releases."""


class Windows:
    """Open windows, applied a complete time at a time and closed by the frontier (base class)."""

    __slots__ = ("windows", "deadlines", "pool", "init", "add", "merge", "result", "keyed", "touched", "late")

    def __init__(self, windows: dict[Any, dict[Any, list[Any]]], deadlines: Deadlines, pool: CapabilityPool[Any],
                 aggregation: Aggregation, *, keyed: bool, early: bool) -> None:
        self.windows = windows
        """key -> {window id: [end, accumulator]}: the operator's kept state (without ``key=``, key 0)."""
        self.deadlines = deadlines
        self.pool = pool
        self.init, self.add, self.merge, self.result = (aggregation.init, aggregation.add, aggregation.merge,
                                                        aggregation.result)
        self.keyed = keyed
        """Results carry their key: ``(key, (start, end), value)``, else ``((start, end), value)``."""
        self.touched: dict[tuple[Any, Any], list[Any]] | None = {} if early else None
        """With early results: the windows changed since the last early results, by ``(key, window id)``."""
        self.late: list[Any] = []
        """The late records of the time applied (the operator sends or drops them, then clears this)."""

    def restore(self, initial: Capability, resume: Any) -> None:
        """Wait again for the windows restored from a snapshot (the dataflow resumed at ``resume``), holding
        their output times from ``initial``; forget those already sent, and delivered, before the snapshot."""
        windows, out_time, delivered = self.windows, self.deadlines.out_time, self.deadlines.delivered
        for k, per_key in list(windows.items()):
            for wid, w in list(per_key.items()):
                if delivered(out_time(wid, w[0]), resume):
                    del per_key[wid]
                else:
                    self.track(k, wid, w, initial)
            if not per_key:
                del windows[k]

    def track(self, k: Any, wid: Any, w: list[Any], cap: Capability) -> None:
        """Let window ``wid`` of key ``k`` wait for its deadline (its output time held from ``cap``)."""
        raise NotImplementedError

    def apply(self, cap: Capability, records: list[Any]) -> None:
        """Add the records of a complete time (``cap.time``) to their windows; late ones go to :attr:`late`."""
        raise NotImplementedError

    def close(self, frontier: list[Any]) -> Due:
        """Forget every window the frontier has passed (all of them once it is empty): their results."""
        raise NotImplementedError

    def next_end(self) -> Any:
        """The end of the first window still waiting (``None`` if none waits)."""
        raise NotImplementedError

    def take_changed(self) -> list[Any]:
        """The rows of the windows changed since the last call (early results) that are still open, as they
        stand; forgets them."""
        touched = self.touched
        assert touched is not None
        windows, start_of, result = self.windows, self.deadlines.start_of, self.result
        changed = [(k, wid, w) for (k, wid), w in touched.items()
                   if windows.get(k, {}).get(wid) is w]       # (not merged into another session since)
        touched.clear()
        if self.keyed:
            return [(k, (start_of(wid), w[0]), result(w[1])) for k, wid, w in changed]
        return [((start_of(wid), w[0]), result(w[1])) for k, wid, w in changed]
