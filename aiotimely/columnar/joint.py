"""Time order over two columnar inputs: a time's batches from both held until both frontiers have passed it, then
handed over as one frame per input, complete times in order, with the operator's kept state cut between times.

It is :meth:`TimeOrder.joint <aiotimely.dataflow.ports.TimeOrder.joint>` for Arrow batches, as
:class:`~.order.ColumnarOrder` is ``time_order`` for one input: the batches are kept as they came and concatenated
once per time and input (no step per row), and the cuts are the same, so snapshots hold the state as of every
time applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import polars as pl

from .places import frame_of

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import OperatorRuntime
    from ..dataflow.ports import InputPort

__all__ = ["JointOrder", "least_time"]

Sides = tuple[list[pl.DataFrame], list[pl.DataFrame]]
"""The frames one time got: from the left input, from the right."""


def least_time(ports: tuple[InputPort, InputPort]) -> int | None:
    """The least time of the inputs' frontiers (every time not yet applied is at or after it): ``None`` once both
    inputs are complete."""
    lows = [min(frontier) for frontier in (list(port.frontier) for port in ports) if frontier]
    return min(lows) if lows else None


class JointOrder:
    """The batches of two inputs by time, each time handed over once both inputs have passed it (see the
    module)."""

    __slots__ = ("_ports", "_op", "_name", "_pending")

    def __init__(self, ports: tuple[InputPort, InputPort], op: OperatorRuntime, name: str) -> None:
        self._ports = ports
        self._op = op
        self._name = name
        self._pending: dict[Any, tuple[Capability, Sides]] = {}

    def ready(self) -> Iterator[tuple[Capability, pl.DataFrame | None, pl.DataFrame | None]]:
        """Take what arrived; then each time both inputs have completed, in order, with each input's rows at it
        as one frame (``None``: none came). ``cap`` is a capability at that time, dropped when the loop moves on;
        the kept state is cut before each time, and at the frontier once they are done (do what the frontier
        alone completes after this loop)."""
        ports, pending, op = self._ports, self._pending, self._op
        for side, port in enumerate(ports):
            for ref, batch in port.drain():
                entry = pending.get(ref.time)
                if entry is None:
                    entry = pending[ref.time] = (ref.retain(), ([], []))
                entry[1][side].append(frame_of(batch, self._name))
        for time in sorted(t for t in pending if not any(port.less_equal(t) for port in ports)):
            cap, (lefts, rights) = pending.pop(time)
            op.recovery.cut(time)      # every time before this one is applied, and none after
            try:
                yield cap, _one(lefts), _one(rights)
            finally:
                if not cap.dropped:
                    cap.drop()
        low = least_time(ports)
        if low is not None:
            op.recovery.cut(low)
        elif not pending:
            op.recovery.finish()       # nothing more will come: the state stands for every later snapshot


def _one(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The frames of one input at one time as one frame (``None`` if none came)."""
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
