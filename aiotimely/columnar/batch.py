"""One batch of a columnar stream: an Arrow record batch, seen through Polars, as a registered container.

:class:`ArrowBatch` is what sessions, ports, channels, the exchange and the wire move for
a columnar stream (see :mod:`aiotimely.dataflow.containers`): its length is its rows,
it splits by route in one vectorized call, and it crosses processes as Arrow IPC
stream bytes, without a step per record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence, overload

import polars as pl

from ..dataflow.containers import Container, register_container

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowBatch", "ROUTE", "Whole", "as_arrow"]

ROUTE = "__aiotimely_route__"
"""The name of the column that holds each row's route while a batch is partitioned (it never leaves)."""
FILTER_PARTS = 4
"""Up to this many parts, a batch splits by a filter per part; past it, by one ``partition_by``."""


class ArrowBatch:
    """Rows of columns, held as a Polars ``DataFrame`` or a pyarrow ``RecordBatch`` (either converts to the other
    on demand, zero-copy for most types, and the conversion is kept).

    Why both: the operators take Polars expressions, so a chain of them runs frame to frame with no conversion;
    Arrow data from outside (PyArrow tables, Spark) enters as record batches without one either, and
    :meth:`to_arrow` hands record batches out. Both are immutable here (no operator changes a batch in place,
    and user functions get a clone of the frame), so :meth:`copy` returns the batch itself. Iterating yields
    each row as a tuple, in column order; on the wire a batch is Arrow IPC stream bytes.
    """

    __slots__ = ("_frame", "_record")

    def __init__(self, data: pl.DataFrame | pa.RecordBatch) -> None:
        if isinstance(data, pl.DataFrame):
            self._frame: pl.DataFrame | None = data
            self._record: pa.RecordBatch | None = None
        else:
            import pyarrow as pa

            if not isinstance(data, pa.RecordBatch):
                raise TypeError(f"an ArrowBatch holds a polars DataFrame or a pyarrow RecordBatch, not a "
                                f"{type(data).__module__}.{type(data).__qualname__}")
            self._frame = None
            self._record = data

    @property
    def frame(self) -> pl.DataFrame:
        """The rows as a Polars frame, to read only (the same object each time: use :meth:`to_polars` to keep
        one that may be changed)."""
        frame = self._frame
        if frame is None:
            converted = pl.from_arrow(self._record)
            assert isinstance(converted, pl.DataFrame)
            frame = self._frame = converted
        return frame

    @property
    def schema(self) -> pl.Schema:
        """The columns' names and Polars types."""
        return self.frame.schema

    def to_polars(self) -> pl.DataFrame:
        """The rows as a Polars frame of the caller's own (a clone: cheap, the columns are shared)."""
        return self.frame.clone()

    def to_arrow(self) -> pa.RecordBatch:
        """The rows as one pyarrow ``RecordBatch``."""
        record = self._record
        if record is None:
            record = self._record = _record_batch(self.frame)
        return record

    @property
    def nbytes(self) -> int:
        """Its size in bytes (an estimate of the buffers it holds), for back-pressure."""
        if self._record is not None:
            return int(self._record.nbytes)
        return int(self.frame.estimated_size())

    def __len__(self) -> int:
        if self._frame is not None:
            return self._frame.height
        assert self._record is not None
        return int(self._record.num_rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.frame.rows())

    def __getitem__(self, part: slice) -> ArrowBatch:
        if self._record is not None:
            return ArrowBatch(self._record[part])
        return ArrowBatch(self.frame[part])

    def copy(self) -> ArrowBatch:
        return self

    def partition(self, routes: Sequence[int], parts: int) -> list[Container]:
        """Row ``i`` in part ``routes[i]``, in one vectorized split (the rows of each part keep their order).

        ``routes`` may be a list, a Polars ``Series`` (taken as it is: what a bulk key gives) or a :class:`Whole`;
        a batch whose rows all go to one part is not split: that part is the batch itself."""
        to: Any
        if isinstance(routes, Whole):
            to = routes.to
        else:
            series = routes if isinstance(routes, pl.Series) else pl.Series(ROUTE, routes, dtype=pl.UInt32)
            to = series.min()
            if to != series.max():
                return self._split(series, parts)
        if to is None:          # (no rows)
            return [self] * parts
        empty_batch = ArrowBatch(self.frame.clear())
        return [self if i == to else empty_batch for i in range(parts)]

    def _split(self, routes: pl.Series, parts: int) -> list[Container]:
        """The rows split by route: a filter per part for a few parts (each a quick pass), one partition for
        more (one slower pass)."""
        frame = self.frame
        if parts <= FILTER_PARTS:
            return [ArrowBatch(frame.filter(routes == to)) for to in range(parts)]
        split = frame.with_columns(routes.cast(pl.UInt32).alias(ROUTE)).partition_by(
            ROUTE, as_dict=True, include_key=False, maintain_order=True)
        empty = frame.clear()
        return [ArrowBatch(split.get((to,), empty)) for to in range(parts)]

    def to_ipc(self) -> bytes:
        """The batch as Arrow IPC stream bytes (what crosses processes): written by PyArrow, one record batch per
        chunk of the frame. Strings go as Arrow's (large) strings, not Polars' views: a view column shares the
        buffers of the column it was filtered or sliced from, and would carry all of them."""
        import pyarrow as pa

        record = self._record
        data = self.frame.to_arrow() if record is None else record
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, data.schema) as writer:
            if record is None:
                writer.write_table(data)
            else:
                writer.write_batch(data)
        return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]

    @staticmethod
    def from_ipc(data: bytes) -> ArrowBatch:
        """A batch from Arrow IPC stream bytes: its columns are read in place from ``data`` (kept alive by them),
        not copied."""
        import pyarrow as pa

        frame = pl.from_arrow(pa.ipc.open_stream(pa.py_buffer(data)).read_all(), rechunk=False)
        assert isinstance(frame, pl.DataFrame)
        return ArrowBatch(frame)

    def __reduce__(self) -> tuple[Any, ...]:
        return ArrowBatch.from_ipc, (self.to_ipc(),)

    def __repr__(self) -> str:
        columns = ", ".join(f"{name}: {dtype}" for name, dtype in self.schema.items())
        return f"ArrowBatch({len(self)} rows; {columns})"


class Whole(Sequence[int]):
    """The routes of a batch whose ``length`` rows all go to part ``to``: it is sent whole, not split."""

    __slots__ = ("length", "to")

    def __init__(self, length: int, to: int) -> None:
        self.length = length
        self.to = to

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self.to] * len(range(*index.indices(self.length)))
        if not -self.length <= index < self.length:
            raise IndexError(index)
        return self.to


def _record_batch(frame: pl.DataFrame) -> pa.RecordBatch:
    """A frame as one record batch (a frame's columns may be in several chunks: combined)."""
    import pyarrow as pa

    table = frame.to_arrow()
    return pa.RecordBatch.from_arrays([column.combine_chunks() for column in table.columns], schema=table.schema)


def as_arrow(batch: Any, operator: str) -> ArrowBatch:
    """``batch`` as an :class:`~.batch.ArrowBatch`, or a ``TypeError`` saying how a columnar operator got a list."""
    if type(batch) is ArrowBatch:
        return batch
    raise TypeError(f"{operator} takes batches of Arrow rows, and got a {type(batch).__name__}: make a columnar "
                    "stream with stream.columnar(schema) or aiotimely.from_arrow(...)")


register_container(ArrowBatch, ArrowBatch.to_ipc, ArrowBatch.from_ipc)
