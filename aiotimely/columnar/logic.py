"""The logic of a columnar window operator, run at each activation: apply the complete times in order (each
time's rows as one frame: event time and key hash added, windows assigned, late rows dealt with), then send
the results of the windows the frontier has passed, one batch per output time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence

import polars as pl

from .batch import ArrowBatch
from .eventtime import TIME, with_event_time
from .exchange import key_hash
from .kept import HASH
from .order import ColumnarOrder
from .results import Results

if TYPE_CHECKING:
    from ..dataflow.capability import Capability
    from ..dataflow.operator import OperatorRuntime
    from ..dataflow.operators.pool import CapabilityPool
    from ..dataflow.ports import InputPort, OutputPort

__all__ = ["LATE_POLICIES", "LateRows", "OpenWindows", "RowTimes", "WindowLogic", "hashed", "unhashed"]

LATE_POLICIES = ("drop", "count", "stream")
"""What ``window(late=...)`` does with late rows: drop them, send their count per time, or send them."""


class OpenWindows(Protocol):
    """What the logic drives: the open windows of one kind (fixed: :mod:`.fixed`; sessions: :mod:`.sessions`)."""

    def rows(self) -> pl.DataFrame | None:
        """Every kept row as one frame, with the key hash (what a snapshot holds); ``None`` if none."""
        ...

    def restore(self, rows: pl.DataFrame | None, initial: Capability, resume: int) -> None:
        """Wait again for the windows of rows restored from a snapshot (resumed at ``resume``), their output
        times held from ``initial``."""
        ...

    def apply(self, cap: Capability, rows: pl.DataFrame) -> pl.DataFrame:
        """Add a complete time's rows to their windows; return the late ones."""
        ...

    def close(self, frontier: list[Any]) -> tuple[pl.DataFrame, dict[int, int]] | None:
        """The rows of the windows the frontier has passed (with span and output-time columns), taken out, and
        how many pool holds each output time releases; ``None`` if none is due."""
        ...


class RowTimes:
    """A time's rows made ready for the windows: each row's event time (:data:`~.eventtime.TIME`), and without
    key columns a :data:`~.kept.HASH` of 0 (what groups them). Keyed rows get their key hash only when a
    snapshot is cut (:func:`hashed`): nothing else reads it."""

    __slots__ = ("keys", "column")

    def __init__(self, keys: Sequence[str], column: str | None) -> None:
        self.keys = list(keys)
        self.column = column

    def __call__(self, frame: pl.DataFrame, d: int) -> pl.DataFrame:
        frame = with_event_time(frame, self.column, d)
        if self.keys:
            return frame
        return frame.with_columns(pl.lit(0, dtype=pl.UInt64).alias(HASH))


def hashed(rows: pl.DataFrame | None, keys: Sequence[str]) -> pl.DataFrame | None:
    """Kept ``rows`` as a snapshot holds them: with the hash of their key columns (:data:`~.kept.HASH`), which
    keyed rows do not carry while the dataflow runs."""
    if rows is None or not keys:
        return rows
    return rows.with_columns(key_hash(rows, keys).alias(HASH))


def unhashed(rows: pl.DataFrame | None, keys: Sequence[str]) -> pl.DataFrame | None:
    """Restored ``rows`` as the windows keep them (keyed rows without their hash)."""
    if rows is None or not keys:
        return rows
    return rows.drop(HASH, strict=False)


class LateRows:
    """``late=``: a time's late rows dropped (``"drop"``), or sent on the second output at that time, as they came
    (``"stream"``) or as their count, a one-row frame ``{"late": n}`` (``"count"``)."""

    __slots__ = ("policy", "output")

    def __init__(self, policy: str, output: OutputPort | None) -> None:
        self.policy = policy
        self.output = output

    def send(self, cap: Capability, late: pl.DataFrame) -> None:
        if late.height == 0 or self.output is None:
            return
        batch: Any  # (an ArrowBatch: ports move containers as they move lists)
        if self.policy == "stream":
            batch = ArrowBatch(late.drop(TIME, HASH, strict=False))
        else:
            batch = ArrowBatch(pl.DataFrame({"late": [late.height]}, schema={"late": pl.Int64}))
        with cap.delayed(cap.time, 1):
            self.output.push(cap.time, batch)


class WindowLogic:
    """Called at each activation: apply what is complete, then close what the frontier has passed."""

    __slots__ = ("op", "input", "order", "times", "windows", "results", "output", "pool", "late")

    def __init__(self, op: OperatorRuntime, inp: InputPort, times: RowTimes, windows: OpenWindows,
                 results: Results, output: OutputPort, pool: CapabilityPool[Any], late: LateRows) -> None:
        self.op = op
        self.input = inp
        self.order = ColumnarOrder(inp, op, op.name)
        self.times = times
        self.windows = windows
        self.results = results
        self.output = output
        self.pool = pool
        self.late = late

    def __call__(self) -> None:
        for cap, frame in self.order.ready():
            self.op.current_time = cap.time          # (an error names the time being applied)
            late = self.windows.apply(cap, self.times(frame, cap.time))
            self.late.send(cap, late)
        due = self.windows.close(list(self.input.frontier))
        if due is not None:
            self.send(*due)

    def send(self, due: pl.DataFrame, holds: dict[int, int]) -> None:
        """The results of the windows due, a batch per output time (earliest first), each sent with the pool's
        capability for its time; then the holds of the windows closed (``holds``: per output time) released."""
        output = self.output
        for out, frame in self.results.by_output_time(due):
            batch: Any = ArrowBatch(frame)   # (a container, as ports move lists)
            output.push(out, batch)
        self.pool.release_all(holds)
