"""Arrow data into a dataflow: PyArrow tables and record batches and Polars frames, as a columnar stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import polars as pl

from ..dataflow.builder import OperatorBuilder
from ..errors import GraphError
from .batch import ArrowBatch
from .schema import as_schema
from .stream import ColumnarStream, where

if TYPE_CHECKING:
    from ..dataflow import Capability
    from ..dataflow.scope import ScopeCore
    from ..stream import Stream

__all__ = ["from_arrow"]


def from_arrow(scope: ScopeCore[Stream[Any]], data: Any, *, times: Iterable[Any] | None = None, schema: Any = None,
               rows: int | None = None, name: str = "FromArrow") -> ColumnarStream:
    """A columnar stream of ``data``: a PyArrow ``Table`` or ``RecordBatch``, a Polars ``DataFrame``, or an
    iterable of them (read as the dataflow runs, batch by batch, while there is room downstream); it closes
    itself once ``data`` is exhausted.

    ``times``: the time of each item of ``data`` (not decreasing), or ``None``: all at the minimum time.
    ``rows``: cut each item into batches of at most that many rows (by default a ``Table`` is its record
    batches, a frame one batch). ``schema``: the stream's (see :func:`~.schema.as_schema`); by default the
    first item's; every item must have it. As ``aiotimely.to_stream`` does, every worker introduces all of
    ``data``: give each worker its share (by ``scope.worker.index``) to introduce it once.
    """
    if rows is not None and rows < 1:
        raise ValueError(f"{where(scope, name)}: rows must be at least 1, not {rows}")
    everything, columns = _with_schema(scope, name, data, schema)
    builder = OperatorBuilder(scope, name)
    port, stream = builder.new_output()
    op = builder.op

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        cap = capabilities[0]
        pending = _timed_batches(everything, times, rows, columns)

        def run() -> None:  # batch by batch, while there is room downstream (as to_stream does)
            if cap.dropped:
                return
            for time, batch in pending:
                if time is not None and time != cap.time:
                    cap.downgrade(time)
                port.push(cap.time, batch)
                if op.wait_for_room():
                    return
            cap.drop()

        return run

    builder.build(constructor)
    return ColumnarStream(stream, columns)


def _with_schema(scope: ScopeCore[Stream[Any]], name: str, data: Any, schema: Any) -> tuple[Iterator[Any], pl.Schema]:
    """The items of ``data``, and the stream's schema: ``schema``, or the first item's (read ahead for it)."""
    items = iter([data] if _is_one(data) else data)
    if schema is not None:
        return items, as_schema(schema)
    first = next(items, None)
    if first is None:
        raise GraphError(f"{where(scope, name)}: there is no data to take the schema from: give schema=")
    return _chain(first, items), _batch(first).schema


def _is_one(data: Any) -> bool:
    """Whether ``data`` is one table, record batch or frame (not an iterable of them)."""
    return isinstance(data, pl.DataFrame) or type(data).__module__.startswith("pyarrow")


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


_NO_TIME = object()


def _timed_batches(items: Iterator[Any], times: Iterable[Any] | None, rows: int | None,
                   schema: pl.Schema) -> Iterator[tuple[Any, Any]]:
    """``(time, batch)`` for each non-empty batch of each item (time ``None``: no time given), checked against
    the stream's ``schema``."""
    clock = None if times is None else iter(times)
    for index, item in enumerate(items):
        time = None
        if clock is not None:
            time = next(clock, _NO_TIME)
            if time is _NO_TIME:
                raise ValueError(f"times ran out at item {index} of the data: give a time for each item")
        for batch in _batches(item, rows):
            if batch.schema != schema:
                raise TypeError(f"item {index} of the data has columns {dict(batch.schema)}, not the stream's "
                                f"{dict(schema)}")
            if len(batch):
                yield time, batch


def _batch(item: Any) -> ArrowBatch:
    """One item as one batch (for its schema)."""
    if isinstance(item, pl.DataFrame):
        return ArrowBatch(item.head(0))
    frame = pl.from_arrow(item.slice(0, 0))
    assert isinstance(frame, pl.DataFrame)
    return ArrowBatch(frame)


def _batches(item: Any, rows: int | None) -> Iterator[ArrowBatch]:
    """The batches of one item of the data."""
    if isinstance(item, pl.DataFrame):
        frames = [item] if rows is None else item.iter_slices(rows)
        return (ArrowBatch(frame) for frame in frames)
    import pyarrow as pa

    if isinstance(item, pa.Table):
        return (ArrowBatch(record) for record in item.to_batches(max_chunksize=rows))
    if isinstance(item, pa.RecordBatch):
        if rows is None:
            return iter([ArrowBatch(item)])
        return (ArrowBatch(item.slice(start, rows)) for start in range(0, item.num_rows, rows))
    raise TypeError(f"from_arrow takes PyArrow tables and record batches and Polars frames, not a "
                    f"{type(item).__module__}.{type(item).__qualname__}")
