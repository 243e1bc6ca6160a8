"""Columnar streams, as users chain them: ``stream.columnar(schema).filter(pl.col("x") > 0).select("k", "x")``.

A :class:`ColumnarStream` holds a record-path stream whose batches are
:class:`~.batch.ArrowBatch` es, and its schema. Each operator runs once per batch, on the
whole batch, with Polars expressions: no Python runs per row. The operators are
stateless batch operators of the dataflow layer (one input, one output, the batch's time
kept), so consecutive ones fuse into one chain, as ``map`` and ``filter`` do; a batch
left empty is not sent on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import polars as pl

from ..dataflow.builder import check_function
from ..dataflow.capture import Captured, capture
from ..dataflow.input import ProbeHandle, probe_with
from ..dataflow.operators.maplike import batch_operator
from ..dataflow.operators.routing import broadcast
from ..errors import GraphError
from .batch import ArrowBatch
from .exchange import KeyColumns
from .places import frame_of, where
from .schema import as_schema

if TYPE_CHECKING:
    from ..dataflow.scope import ScopeCore
    from ..stream import Stream

__all__ = ["ColumnarStream", "IntoExpr", "frame_of", "where"]

IntoExpr = Any
"""What Polars takes as an expression: a ``pl.Expr``, a column's name, or a literal."""


class ColumnarStream:
    """A stream whose batches are Arrow record batches (:class:`~.batch.ArrowBatch`), with Polars operators.

    ``stream`` is the underlying stream (a :class:`~aiotimely.Stream` of ``ArrowBatch`` batches; iterated, a
    batch gives rows as tuples); ``schema`` the columns' names and Polars types, when known (``None`` after a
    :meth:`map_batches` that declares none). With a schema, each operator checks its expressions as the dataflow
    is built: a missing column or a type error is a :class:`~aiotimely.GraphError` naming the operator."""

    __slots__ = ("stream", "schema")

    def __init__(self, stream: Stream[Any], schema: pl.Schema | None) -> None:
        self.stream = stream
        self.schema = schema

    @property
    def scope(self) -> ScopeCore[Stream[Any]]:
        """The scope the stream is in."""
        return self.stream.scope

    # -- once per batch, with Polars expressions ---------------------------------------

    def select(self, *exprs: IntoExpr, name: str = "Select", **named: IntoExpr) -> ColumnarStream:
        """Each batch as ``frame.select(*exprs, **named)``: the columns the expressions give (``name`` is the
        operator's: a column called "name" is made with ``.alias("name")``)."""
        return self._per_batch(name, lambda frame: frame.select(*exprs, **named),
                               self._planned(name, lambda lazy: lazy.select(*exprs, **named)))

    def with_columns(self, *exprs: IntoExpr, name: str = "WithColumns", **named: IntoExpr) -> ColumnarStream:
        """Each batch as ``frame.with_columns(*exprs, **named)``: its columns, with those added or replaced (a
        column called "name" with ``.alias("name")``, as for :meth:`select`)."""
        return self._per_batch(name, lambda frame: frame.with_columns(*exprs, **named),
                               self._planned(name, lambda lazy: lazy.with_columns(*exprs, **named)))

    def filter(self, *predicates: IntoExpr, name: str = "Filter") -> ColumnarStream:
        """Only the rows for which every predicate (a boolean expression) is true."""
        return self._per_batch(name, lambda frame: frame.filter(*predicates),
                               self._planned(name, lambda lazy: lazy.filter(*predicates)), passes=True)

    def explode(self, columns: str | Iterable[str], *more: str, name: str = "Explode") -> ColumnarStream:
        """A row for each element of the list ``columns`` of each row (as ``DataFrame.explode``: the other
        columns repeated; empty and null lists as that Polars version does)."""
        return self._per_batch(name, lambda frame: frame.explode(columns, *more),
                               self._planned(name, lambda lazy: lazy.explode(columns, *more)))

    def map_batches(self, fn: Callable[[pl.DataFrame], pl.DataFrame | pl.LazyFrame], *,
                    schema: Any = None, name: str = "MapBatches") -> ColumnarStream:
        """Each batch as ``fn(frame)``: any work on the whole frame (its own copy), a ``DataFrame`` (or a
        ``LazyFrame``, collected) back. ``schema``: the columns it returns (each batch is checked against it);
        without, the schema is unknown downstream."""
        check_function(fn, self.scope, name, "the function", "map_batches(lambda df: df.head(10))")
        declared = None if schema is None else as_schema(schema)

        def work(frame: pl.DataFrame) -> pl.DataFrame:
            out = fn(frame.clone())
            if isinstance(out, pl.LazyFrame):
                out = out.collect()
            if not isinstance(out, pl.DataFrame):
                raise TypeError(f"the function returned a {type(out).__name__}, not a polars DataFrame")
            if declared is not None and out.schema != declared:
                raise TypeError(f"the function returned columns {dict(out.schema)}, not the declared "
                                f"{dict(declared)}")
            return out

        return self._per_batch(name, work, declared)

    # -- routing -----------------------------------------------------------------------

    def exchange(self, *keys: str, name: str = "Exchange") -> ColumnarStream:
        """Send each row to the worker a hash of its ``keys`` columns picks (computed for a whole batch at once):
        rows with equal keys meet on one worker, in every process (see :mod:`.exchange` for the hash)."""
        if not keys:
            raise GraphError(f"{where(self.scope, name)}: give the key columns, e.g. exchange(\"user\")")
        self._planned(name, lambda lazy: lazy.select(keys))
        return ColumnarStream(batch_operator(self.stream, name, _same, exchange=KeyColumns(keys, name), passes=True),
                              self.schema)

    def coalesce(self, rows: int | None = None, *, until: str = "frontier", name: str = "Coalesce") -> ColumnarStream:
        """Small batches of one time merged into batches of at least ``rows`` rows (by default
        :data:`~.coalesce.COALESCE_ROWS`, 65,536); a batch that big already passes as it is. What is held of a
        time is sent once the input frontier passes that time (``until="frontier"``: a capability is held for it
        meanwhile), or at the end of each activation (``until="activation"``). See :mod:`.coalesce`."""
        from .coalesce import COALESCE_ROWS, coalesce_operator

        merged = coalesce_operator(self.stream, COALESCE_ROWS if rows is None else rows, until, name)
        return ColumnarStream(merged, self.schema)

    def broadcast(self) -> ColumnarStream:
        """Send every batch to every worker (the same immutable batch, not a copy, to those on this one)."""
        return ColumnarStream(broadcast(self.stream), self.schema)

    # -- event time: windows and keyed reduce (docs/columnar.md, "Windows over event-time columns") -------------

    def window(self, windows: Any, *aggs: Any, key: str | Sequence[str] | None = None, time: str | None = None,
               lateness: int = 0, late: str = "drop",
               name: str = "Window") -> ColumnarStream | tuple[ColumnarStream, ColumnarStream]:
        """Rows aggregated per key and window (``at.Tumbling``, ``at.Sliding``, ``at.Sessions``) of the event
        time in integer column ``time`` (``None``: the dataflow time), with Polars aggregation expressions or
        ``at.Agg`` built-ins over columns. A window ``[start, end)`` closes exactly when the input frontier
        reaches ``end + lateness``; its results go at that time, one batch per output time, with columns
        ``(key columns..., window_start, window_end, aggregates...)``. A row at dataflow time ``d`` whose window
        ends at or before ``d - lateness`` is late: ``late="drop"``, or ``"count"``/``"stream"`` to also get a
        columnar stream of late counts (``{"late": n}``) or of the late rows, at their dataflow times."""
        from .windows import WindowPlan, window_operator

        plan = WindowPlan(self.scope, self.schema, windows, aggs, key=key, time=time, lateness=lateness, late=late,
                          name=name)
        return self._built(window_operator(self.stream, self.schema, plan, name), late != "drop")

    def reduce(self, *aggs: Any, key: str | Sequence[str] | None = None, time: str | None = None,
               lateness: int = 0, late: str = "drop",
               name: str = "Reduce") -> ColumnarStream | tuple[ColumnarStream, ColumnarStream]:
        """Per key and time, the aggregations (Polars expressions or ``at.Agg`` built-ins over columns) of the
        rows, once the time is complete: columns ``(key columns..., aggregates...)``. Without ``time``, per
        *dataflow* time and sent at it (the record path's ``reduce``); with ``time="ts"``, per *event* time in that
        integer column, sent at ``ts + lateness`` once the frontier passes it, with the time as a column after
        the keys, and late rows as for :meth:`window`."""
        from .reduce import reduce_operator

        built = reduce_operator(self.stream, self.schema, aggs, key=key, time=time, lateness=lateness, late=late,
                                name=name)
        return self._built(built, late != "drop")

    # -- joins (docs/columnar.md, "Joins") ------------------------------------------------

    def join(self, other: ColumnarStream, on: str | Sequence[str] | None = None, *,
             left_on: str | Sequence[str] | None = None, right_on: str | Sequence[str] | None = None,
             how: str = "inner", suffix: str = "_right", name: str = "Join") -> ColumnarStream:
        """Rows of this stream and ``other`` with equal keys (columns ``on``, or ``left_on``/``right_on``) at the
        same dataflow time, side by side as Polars' ``join`` gives them (right columns whose names clash get
        ``suffix``), sent at that time as soon as both are there; a time's rows are forgotten once both
        frontiers have passed it. Each side is exchanged by its key columns first; ``how="inner"`` only."""
        from .join import JoinPlan, join_operator

        plan = JoinPlan(self, other, on=on, left_on=left_on, right_on=right_on, how=how, suffix=suffix, name=name)
        return ColumnarStream(join_operator(self, other, plan, name), plan.schema)

    def interval_join(self, other: ColumnarStream, on: str | Sequence[str] | None = None, *, lower: int,
                      upper: int, time: str | tuple[str | None, str | None] | None = None, lateness: int = 0,
                      left_on: str | Sequence[str] | None = None, right_on: str | Sequence[str] | None = None,
                      suffix: str = "_right", name: str = "IntervalJoin") -> ColumnarStream:
        """Rows of this stream at event time ``t`` and of ``other`` at ``u`` with equal keys and
        ``lower <= u - t <= upper``, side by side as for :meth:`join`, sent at ``max(t, u) + lateness`` once both
        frontiers have passed it. ``time``: the integer event-time column of both sides, a ``(left, right)`` pair
        of them, or ``None`` for the dataflow time; a row at dataflow time ``d`` with ``t < d - lateness`` is
        late and dropped. Rows are kept (by key, in snapshots) until nothing they could meet can come."""
        from .interval import IntervalPlan, interval_join_operator
        from .join import JoinPlan

        joined = JoinPlan(self, other, on=on, left_on=left_on, right_on=right_on, how="inner", suffix=suffix,
                          name=name)
        plan = IntervalPlan(joined, self, other, time=time, lower=lower, upper=upper, lateness=lateness)
        return ColumnarStream(interval_join_operator(self, other, plan, name), joined.schema)

    # -- leaving columns, watching -------------------------------------------------------

    def records(self, *, named: bool = False, name: str = "Records") -> Stream[Any]:
        """The rows as records: tuples in column order (what iterating a batch gives, and what
        :meth:`aiotimely.Stream.columnar` takes back), or dicts by column name with ``named=True``."""
        def transform(_time: Any, batch: Any) -> list[Any]:
            frame = frame_of(batch, name)
            return frame.rows(named=True) if named else frame.rows()

        stream: Stream[Any] = batch_operator(self.stream, name, transform)
        return stream

    def inspect_batch(self, fn: Callable[[Any, pl.DataFrame], object]) -> ColumnarStream:
        """Call ``fn(time, frame)`` on each batch, passing the batches on unchanged."""
        check_function(fn, self.scope, "InspectBatch", "the function", "inspect_batch(lambda t, df: print(t, df))")

        def transform(time: Any, batch: Any) -> Any:
            fn(time, frame_of(batch, "InspectBatch").clone())
            return batch

        return ColumnarStream(batch_operator(self.stream, "InspectBatch", transform, passes=True), self.schema)

    def probe(self) -> ProbeHandle:
        """A new :class:`~aiotimely.ProbeHandle` watching this stream's frontier."""
        handle = ProbeHandle()
        probe_with(self.stream, handle)
        return handle

    def capture(self) -> Captured:
        """Record this stream's batches and frontier changes (on this worker), as ``Stream.capture`` does."""
        return capture(self.stream)

    def __repr__(self) -> str:
        columns = "unknown" if self.schema is None else ", ".join(f"{n}: {t}" for n, t in self.schema.items())
        return f"ColumnarStream({columns}; {self.stream!r})"

    # -- how the operators are built -----------------------------------------------------

    @staticmethod
    def _built(built: tuple[Any, pl.Schema | None, Any, pl.Schema | None],
               with_late: bool) -> ColumnarStream | tuple[ColumnarStream, ColumnarStream]:
        """An operator's results (and late rows) as columnar streams."""
        results = ColumnarStream(built[0], built[1])
        return (results, ColumnarStream(built[2], built[3])) if with_late else results

    def _per_batch(self, name: str, work: Callable[[pl.DataFrame], pl.DataFrame], schema: pl.Schema | None,
                   *, passes: bool = False) -> ColumnarStream:
        """A new operator ``name`` sending ``work(frame)`` of each batch on, unless it has no rows."""

        def transform(_time: Any, batch: Any) -> Any:  # (an ArrowBatch, or None)
            frame = work(frame_of(batch, name))
            return ArrowBatch(frame) if frame.height else None

        return ColumnarStream(batch_operator(self.stream, name, transform, passes=passes), schema)

    def _planned(self, name: str, plan: Callable[[pl.LazyFrame], pl.LazyFrame]) -> pl.Schema | None:
        """The schema an operator ``name`` gives, found by planning it on no rows (its expressions checked as the
        dataflow is built), or ``None`` if this stream's schema is unknown."""
        if self.schema is None:
            return None
        try:
            return plan(pl.LazyFrame(schema=self.schema)).collect_schema()
        except Exception as exc:
            raise GraphError(f"{where(self.scope, name)}: {type(exc).__name__}: {exc}") from exc


def _same(_time: Any, batch: Any) -> Any:
    return batch
