"""What closed windows give: their rows grouped by key and window, the aggregations evaluated, one frame per
output time, with the result schema ``(key columns..., window_start, window_end, aggregates...)``.

The state hands over the rows of every window due, each with the internal columns :data:`START`, :data:`END`
(its window's span) and :data:`OUT` (its output time); one ``group_by(...).agg(...)`` evaluates every
aggregation for every key and window at once, and the result is split by output time. With a
:class:`~.combine.Combiner` (every aggregation decomposable, fixed windows), what the state hands over are
partial aggregates per key and window instead: they are merged and finished, to the same results.
"""

from __future__ import annotations

from typing import Sequence

import polars as pl

from ..errors import GraphError
from .combine import Combiner
from .kept import HASH

__all__ = ["START", "END", "OUT", "WINDOW_SPANS", "Results"]

START = "__aiotimely_window_start__"
END = "__aiotimely_window_end__"
OUT = "__aiotimely_out_time__"

WINDOW_SPANS: tuple[tuple[str, str], ...] = (("window_start", START), ("window_end", END))
"""The span columns of a window's result: its start and end (a half-open interval of event time)."""


class Results:
    """Result rows of closed windows: per key and window, the aggregations (see the module). ``spans`` names the
    span columns of a result and the internal column each is (a keyed reduce by event time has just one)."""

    __slots__ = ("keys", "exprs", "spans", "names", "schema", "combiner")

    def __init__(self, keys: Sequence[str], exprs: Sequence[pl.Expr], spans: Sequence[tuple[str, str]],
                 rows: pl.Schema | None, where: str, *, combine: bool = False) -> None:
        self.keys = list(keys)
        self.exprs = list(exprs)
        self.spans = list(spans)
        self.names: list[str] | None = None
        """The aggregates' column names (``None`` until known: the input's schema is unknown)."""
        self.schema: pl.Schema | None = None
        """The results' schema, when the input's is known."""
        self.combiner: Combiner | None = None
        """Set when the state keeps partial aggregates (``combine``, known schemas, all decomposable: see
        :mod:`.combine`); ``None`` when it keeps raw rows. Planned after the raw rows' schema, which it keeps."""
        if rows is not None:
            planned = self._planned(rows, where)
            self.schema = pl.Schema({n: t for n, t in planned.items() if n != OUT})
            self.names = [n for n in self.schema if n not in self.keys and n not in dict(self.spans)]
        if combine:
            self.combiner = Combiner.plan(self.exprs, self.group(), rows, self.schema)

    def group(self) -> list[str]:
        """What rows are grouped by besides their window: the key columns, or the key hash without keys."""
        return self.keys or [HASH]

    def _planned(self, rows: pl.Schema, where: str) -> pl.Schema:
        """The result schema, found by planning the aggregation on no rows (a bad expression is a GraphError)."""
        spans = {inner: pl.Int64 for _, inner in self.spans}
        hashes = {} if self.keys else {HASH: pl.UInt64}   # (keyed rows carry no hash: see .logic.RowTimes)
        empty = pl.LazyFrame(schema={**rows, **hashes, **spans, OUT: pl.Int64})
        try:
            return self._shaped(self._grouped(empty)).collect_schema()
        except Exception as exc:
            raise GraphError(f"{where}: the aggregations cannot be evaluated: {type(exc).__name__}: {exc}") from exc

    def _grouped(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """Per group, window and output time, the aggregates (of raw rows, or merged from partials)."""
        by = [*self.group(), *(i for _, i in self.spans), OUT]
        if self.combiner is not None:
            return self.combiner.merged(rows, by)
        return rows.group_by(by, maintain_order=True).agg(self.exprs)

    def _shaped(self, grouped: pl.LazyFrame) -> pl.LazyFrame:
        """The grouped rows in the result's column order (the output time kept, for the split)."""
        spans = [pl.col(inner).alias(outer) for outer, inner in self.spans]
        aggregates = pl.exclude([*self.keys, HASH, OUT, *(i for _, i in self.spans)])
        return grouped.select(*self.keys, *spans, aggregates, OUT)

    def by_output_time(self, rows: pl.DataFrame) -> list[tuple[int, pl.DataFrame]]:
        """The results of ``rows`` (of windows due), one frame per output time, earliest first."""
        results = self._shaped(self._grouped(rows.lazy())).collect()
        parts = results.partition_by(OUT, as_dict=True, include_key=False, maintain_order=True)
        return sorted(((int(out), part) for (out,), part in parts.items()), key=_first)


def _first(item: tuple[int, pl.DataFrame]) -> int:
    return item[0]
