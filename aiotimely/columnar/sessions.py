"""Session windows over event-time columns: per key, a row at ``t`` opens ``[t, t + gap)``, and sessions that
overlap merge — the record path's rule (:mod:`aiotimely.dataflow.operators.windowing.sessions`), on frames.

Applying a complete time ``d`` (horizon ``h = d - lateness``): a row whose own ``[t, t + gap)`` ends at or before
``h`` is late; the others, with the sessions still open at ``d`` (ending after ``h``), form per key the
connected components of overlapping intervals (sorted by start, a new component wherever a start is at or after
the running maximum end), found for the whole frame at once. A session complete at ``d`` but not yet sent is
not merged into, as in the record path. A session is its rows (labelled with a session id), so any Polars
aggregation is exact, and its span is ``[least t, greatest t + gap)``: a snapshot keeps only the rows.
"""

from __future__ import annotations

from typing import Any, Sequence

import polars as pl

from ..dataflow.capability import Capability
from ..dataflow.operators.pool import CapabilityPool
from .eventtime import TIME
from .kept import HASH
from .results import END, OUT, START

__all__ = ["SID", "SessionWindows"]

SID = "__aiotimely_session__"
"""The column of a kept row's session id (unique on its worker)."""
_ROW, _COMPONENT, _OLDS = "__aiotimely_row__", "__aiotimely_component__", "__aiotimely_olds__"


class SessionWindows:
    """The open sessions of one worker: their rows (frames), their spans (one frame), their output times held."""

    __slots__ = ("gap", "group", "lateness", "pool", "chunks", "spans", "next_sid")

    def __init__(self, gap: int, keys: Sequence[str], lateness: int, pool: CapabilityPool[Any]) -> None:
        self.gap = gap
        self.group = list(keys) if keys else [HASH]
        self.lateness = lateness
        self.pool = pool
        self.chunks: list[pl.DataFrame] = []
        """The rows of open sessions (input columns, the key hash, :data:`TIME`, :data:`SID`)."""
        self.spans: pl.DataFrame | None = None
        """One row per open session: the key columns, :data:`SID`, :data:`START`, :data:`END`."""
        self.next_sid = 0

    def rows(self) -> pl.DataFrame | None:
        """Every kept row as one frame (what a snapshot holds), ``None`` if none."""
        return pl.concat(self.chunks, how="vertical") if self.chunks else None

    def restore(self, rows: pl.DataFrame | None, initial: Capability, resume: int) -> None:
        """The sessions of restored ``rows`` (of one or several workers: their ids made unique here), those
        sent and delivered before the snapshot (output time before ``resume``) forgotten; the rest wait, held."""
        if rows is None:
            return
        rows = rows.with_columns(pl.struct(*self.group, SID).rank("dense").cast(pl.Int64).alias(SID))
        spans = self._spans_of(rows).filter(pl.col(END) + self.lateness >= resume)
        self.chunks = [rows.join(spans.select(SID), on=SID, how="semi")]
        self.spans = spans
        self.next_sid = int(rows.get_column(SID).max() or 0) + 1  # type: ignore[arg-type]
        self._hold(spans, initial)

    def _spans_of(self, rows: pl.DataFrame) -> pl.DataFrame:
        return rows.group_by(*self.group, SID).agg(pl.col(TIME).min().alias(START),
                                                   (pl.col(TIME).max() + self.gap).alias(END))

    def apply(self, cap: Capability, rows: pl.DataFrame) -> pl.DataFrame:
        """Merge the rows of the complete time ``cap.time`` into the sessions; the late ones are returned."""
        horizon = cap.time - self.lateness
        is_late = pl.col(TIME) + self.gap <= horizon
        late, new = rows.filter(is_late), rows.filter(~is_late)
        if new.height:
            self._merge(cap, new, horizon)
        return late

    def _merge(self, cap: Capability, new: pl.DataFrame, horizon: int) -> None:
        """Components of the new rows' intervals and the sessions open at ``horizon``; each changed one becomes
        one session (the least old id it holds, or a new one), its rows relabelled, its span replaced."""
        spans = self.spans
        eligible = spans.filter(pl.col(END) > horizon) if spans is not None else None
        components = self._components(new, eligible)
        olds = components.filter(pl.col(_ROW).is_null())
        per = (components.group_by(_COMPONENT).agg(
            pl.col(SID).min().alias("__sid"), pl.col(SID).count().alias(_OLDS), pl.col(_ROW).count().alias("__new"),
            pl.col(START).min(), pl.col(END).max(), *(pl.col(g).first() for g in self.group))
            .with_columns(pl.coalesce(pl.col("__sid"), pl.col(_COMPONENT) + self.next_sid).alias("__sid")))
        self.next_sid += int(components.get_column(_COMPONENT).max() or 0) + 1  # type: ignore[arg-type]
        changed = per.filter((pl.col("__new") > 0) | (pl.col(_OLDS) > 1))
        relabel = olds.join(changed.select(_COMPONENT, "__sid"), on=_COMPONENT).filter(pl.col(SID) != pl.col("__sid"))
        if relabel.height:
            old, to = relabel.get_column(SID), relabel.get_column("__sid")
            self.chunks = [chunk.with_columns(pl.col(SID).replace(old, to)) for chunk in self.chunks]
        labels = components.filter(pl.col(_ROW).is_not_null()).join(per.select(_COMPONENT, "__sid"), on=_COMPONENT)
        new = new.with_row_index(_ROW).join(labels.select(_ROW, pl.col("__sid").alias(SID)), on=_ROW).drop(_ROW)
        self.chunks.append(new)
        replaced = olds.join(changed.select(_COMPONENT), on=_COMPONENT).select(SID)
        added = changed.select(*self.group, pl.col("__sid").alias(SID), START, END)
        self._hold(added, cap)
        if spans is not None:
            gone = spans.join(replaced, on=SID, how="semi")
            self._release(gone)
            spans = spans.join(replaced, on=SID, how="anti")
        self.spans = added if spans is None else pl.concat([spans, added], how="vertical")

    def _components(self, new: pl.DataFrame, eligible: pl.DataFrame | None) -> pl.DataFrame:
        """The intervals of the new rows (with their row number) and of the open sessions (with their id), each
        with its component: per key, sorted by start, a new one where a start is at or after every end before."""
        fresh = new.with_row_index(_ROW).select(
            *self.group, pl.col(_ROW), pl.lit(None, dtype=pl.Int64).alias(SID), pl.col(TIME).alias(START),
            (pl.col(TIME) + self.gap).alias(END))
        parts = [fresh]
        if eligible is not None and eligible.height:
            parts.append(eligible.select(*self.group, pl.lit(None, dtype=pl.UInt32).alias(_ROW), SID, START, END))
        intervals = pl.concat(parts, how="vertical").sort([*self.group, START])
        before = pl.col(END).cum_max().shift(1).over(self.group)
        starts = before.is_null() | (pl.col(START) >= before)
        return intervals.with_columns(starts.cum_sum().cast(pl.Int64).alias(_COMPONENT))

    def _hold(self, spans: pl.DataFrame, cap: Capability) -> None:
        """Each session of ``spans`` waits for its output time, ``end + lateness`` (held from ``cap``)."""
        for out, count in _out_counts(spans, self.lateness):
            for _ in range(count):
                self.pool.hold(out, cap)

    def _release(self, spans: pl.DataFrame) -> None:
        self.pool.release_all(dict(_out_counts(spans, self.lateness)))

    def close(self, frontier: list[Any]) -> tuple[pl.DataFrame, dict[int, int]] | None:
        """Take the rows of every session the frontier has reached (all, once it is empty), with their span and
        output time, and the holds they release; ``None`` if none is due."""
        spans = self.spans
        if spans is None or not self.chunks:
            return None
        reached = frontier[0] if frontier else None
        due = spans if reached is None else spans.filter(pl.col(END) + self.lateness <= reached)
        if due.height == 0:
            return None
        rows = pl.concat(self.chunks, how="vertical")
        self.chunks = [rows.join(due.select(SID), on=SID, how="anti")]
        self.spans = spans.join(due.select(SID), on=SID, how="anti")
        closed = rows.join(due.select(SID, START, END), on=SID).with_columns(
            (pl.col(END) + self.lateness).alias(OUT)).drop(TIME, SID)
        return closed, dict(_out_counts(due, self.lateness))


def _out_counts(spans: pl.DataFrame, lateness: int) -> list[tuple[int, int]]:
    """How many sessions of ``spans`` wait for each output time (a step per distinct time, not per session)."""
    counts = spans.group_by(pl.col(END) + lateness).len()
    return [(int(out), int(n)) for out, n in counts.iter_rows()]
