"""Fixed windows (tumbling, sliding) over event-time columns: the rows of each open window, kept as frames.

What is kept is the raw rows of each open window (their columns as they came, with the key hash and the window
start), appended a frame per applied time and concatenated when the window closes. Raw rows rather than
partial aggregates because that is what makes *any* Polars aggregation exact: a median, a quantile, ``n_unique``
or a sorted list cannot be merged from partial results; the built-ins could, but one kind of state for every
aggregation keeps the operator small, and the rows of a window are evaluated once, when it closes.

Unless every aggregation is decomposable (:mod:`.combine`): then what is kept per window start is partial
aggregates, a frame per applied time of one row per group (key columns, or the key hash) and window start, made
by one ``group_by`` of the time's rows; the same code keeps, snapshots, restores and closes them.

A window ``[start, end)`` waits for the input frontier to reach ``end + lateness``; its result goes at that
time plus ``shift`` (0 for windows; -1 for a keyed reduce by event time, whose "window" ``[t, t + 1)`` reports
at ``t + lateness``). Window starts have distinct output times, so the operator holds one capability per open
window start, in a :class:`~aiotimely.dataflow.operators.pool.CapabilityPool`.
"""

from __future__ import annotations

import heapq
from typing import Any

import polars as pl

from ..dataflow.capability import Capability
from ..dataflow.operators.pool import CapabilityPool
from .combine import Combiner
from .eventtime import TIME
from .results import END, OUT, START

__all__ = ["FixedShape", "FixedWindows"]


class FixedShape:
    """Windows of ``size`` starting every ``step`` (tumbling: ``step == size``) from ``offset``: which a row's
    event time falls in, for a whole frame at once."""

    __slots__ = ("size", "step", "offset")

    def __init__(self, size: int, step: int, offset: int) -> None:
        self.size, self.step, self.offset = size, step, offset

    def first_start(self) -> pl.Expr:
        """The start of each row's earliest window: the least ``s > t - size`` on the grid (``s > t``: none)."""
        low = pl.col(TIME) - (self.size - 1)
        return low + (self.offset - low) % self.step

    def assign(self, rows: pl.DataFrame, horizon: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        """``rows`` (with :data:`TIME`) split into the late ones (a window of theirs ends at or before
        ``horizon``: reported once, as the record path does) and, with :data:`START`, a row per window of theirs
        still open (a row in no window, in the gaps of sliding windows with ``step > size``, is in neither)."""
        return self.late(rows, horizon), self.on_time(rows.lazy(), horizon).collect()

    def late(self, rows: pl.DataFrame, horizon: int) -> pl.DataFrame:
        """The late rows of ``rows`` (see :meth:`assign`)."""
        first = self.first_start()
        return rows.filter((first <= pl.col(TIME)) & (first + self.size <= horizon))

    def on_time(self, rows: pl.LazyFrame, horizon: int) -> pl.LazyFrame:
        """A row per open window of each row, with :data:`START` (see :meth:`assign`), as a lazy query (so a
        combiner's ``group_by`` runs in the same plan)."""
        first, size = self.first_start(), self.size
        if self.step >= size:            # at most one window: no list per row
            on_time = rows.with_columns(first.alias(START)).filter(pl.col(START) <= pl.col(TIME))
        else:
            on_time = rows.with_columns(pl.int_ranges(first, pl.col(TIME) + 1, self.step).alias(START)
                                        ).explode(START)
        return on_time.filter(pl.col(START) + size > horizon)


class FixedWindows:
    """The open fixed windows of one worker: rows by window start, a heap of starts, their output times held."""

    __slots__ = ("shape", "lateness", "shift", "pool", "combiner", "chunks", "_starts")

    def __init__(self, shape: FixedShape, lateness: int, shift: int, pool: CapabilityPool[Any],
                 combiner: Combiner | None = None) -> None:
        self.shape = shape
        self.lateness = lateness
        self.shift = shift
        self.pool = pool
        self.combiner = combiner
        """With a combiner, partial aggregates are kept instead of rows."""
        self.chunks: dict[int, list[pl.DataFrame]] = {}
        """Window start -> the frames of its rows (input columns, :data:`START`; unkeyed, a hash of 0), or of
        its partials (the group columns, :data:`START`, the partial columns)."""
        self._starts: list[int] = []

    def out_time(self, start: int) -> int:
        """When window ``start``'s result goes (and what the frontier must reach, less ``shift``)."""
        return start + self.shape.size + self.lateness + self.shift

    def rows(self) -> pl.DataFrame | None:
        """Every kept row as one frame (what a snapshot holds), ``None`` if none."""
        frames = [frame for chunk in self.chunks.values() for frame in chunk]
        return pl.concat(frames, how="vertical") if frames else None

    def restore(self, rows: pl.DataFrame | None, initial: Capability, resume: int) -> None:
        """Wait again for the windows of the restored ``rows``, their output times held from ``initial``; those
        whose output time is before ``resume`` were sent, and delivered, before the snapshot: forgotten."""
        if rows is None:
            return
        waiting = rows.filter(pl.col(START) + (self.shape.size + self.lateness + self.shift) >= resume)
        self._add(waiting, initial)

    def apply(self, cap: Capability, rows: pl.DataFrame) -> pl.DataFrame:
        """Add the rows of the complete time ``cap.time`` (with :data:`TIME`) to their windows;
        the late ones are returned."""
        horizon, combiner = cap.time - self.lateness, self.combiner
        if combiner is None:
            late, on_time = self.shape.assign(rows, horizon)
            self._add(on_time.drop(TIME), cap)
            return late
        self._add(combiner.partials(self.shape.on_time(rows.lazy(), horizon), START), cap)
        return self.shape.late(rows, horizon)

    def _add(self, rows: pl.DataFrame, cap: Capability) -> None:
        """Append ``rows`` (with :data:`START`) to their windows, once per window; a new one waits, held."""
        if rows.height == 0:
            return
        chunks, pool = self.chunks, self.pool
        for (start,), part in rows.partition_by(START, as_dict=True, maintain_order=True).items():
            chunk = chunks.get(start)
            if chunk is None:
                chunks[start] = [part]
                heapq.heappush(self._starts, start)
                pool.hold(self.out_time(start), cap)
            else:
                chunk.append(part)

    def close(self, frontier: list[Any]) -> tuple[pl.DataFrame, dict[int, int]] | None:
        """Take the rows of every window the frontier has reached (all, once it is empty), with :data:`END` and
        :data:`OUT`, and their output times (one hold each); ``None`` if none is due."""
        reached = frontier[0] if frontier else None
        starts, wait = self._starts, self.shape.size + self.lateness
        due = []
        while starts and (reached is None or starts[0] + wait <= reached):
            due.append(heapq.heappop(starts))
        if not due:
            return None
        rows = pl.concat([frame for start in due for frame in self.chunks.pop(start)], how="vertical")
        rows = rows.with_columns((pl.col(START) + self.shape.size).alias(END),
                                 (pl.col(START) + (wait + self.shift)).alias(OUT))
        return rows, {self.out_time(start): 1 for start in due}
