"""Time order for columnar inputs: a time's batches held until the input frontier has passed it, then handed
over as one frame, complete times in order, with the operator's kept state cut between times.

It is :meth:`InputPort.time_order <aiotimely.dataflow.ports.InputPort.time_order>` for Arrow batches: that one
extends a list with each batch (a step per row for an Arrow batch); this one keeps the batches and concatenates
them once per time. The cuts are the same, so snapshots hold the state as of every time applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import polars as pl

from .places import frame_of

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import OperatorRuntime
    from ..dataflow.ports import InputPort

__all__ = ["ColumnarOrder"]


class ColumnarOrder:
    """The batches of one input by time, handed over once complete (see the module)."""

    __slots__ = ("_port", "_op", "_name", "_pending")

    def __init__(self, port: InputPort, op: OperatorRuntime, name: str) -> None:
        self._port = port
        self._op = op
        self._name = name
        self._pending: dict[Any, tuple[Capability, list[pl.DataFrame]]] = {}

    def ready(self) -> Iterator[tuple[Capability, pl.DataFrame]]:
        """Take what arrived; then each complete time, in order, with its rows as one frame (``cap`` is a
        capability at that time, dropped when the loop moves on); the kept state is cut before each time, and at
        the frontier once they are done (close what the frontier completes after this loop)."""
        port, pending, op = self._port, self._pending, self._op
        for ref, batch in port.drain():
            entry = pending.get(ref.time)
            if entry is None:
                entry = pending[ref.time] = (ref.retain(), [])
            entry[1].append(frame_of(batch, self._name))
        for time in sorted(t for t in pending if not port.less_equal(t)):
            cap, frames = pending.pop(time)
            op.recovery.cut(time)
            try:
                yield cap, frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
            finally:
                if not cap.dropped:
                    cap.drop()
        frontier = list(port.frontier)
        if frontier:
            op.recovery.cut(min(frontier))
        elif not pending:
            op.recovery.finish()
