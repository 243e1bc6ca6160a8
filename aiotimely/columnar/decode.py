"""Columns from outside: message values decoded a batch at a time, and event time from a column as a watermark.

What the columnar sources share (the Spark ingress's ``columnar(...)``, ``kafka.source(..., columnar=)``,
``from_aiter(..., columnar=)``; docs/columnar.md, "Spark and sources"):

* :func:`decode_values` — a list of message values (``bytes``: JSON objects, or msgpack maps or arrays) as one
  Polars frame of a schema, in one call per batch: JSON by Polars' own reader (Rust), msgpack by msgpack's C
  unpacker over the values joined, then Polars. No Python code runs per message.
* :class:`Watermark` — event time from an integer column, as Spark's ``withWatermark`` does it: each batch goes
  at the current watermark (its dataflow time), carrying its rows' event times in the column; once it is sent,
  the watermark moves to the latest event time seen so far minus ``lateness`` (never back). A columnar
  ``window(..., time="ts")`` downstream then closes a window as soon as the watermark passes its end, and
  treats a row whose window ended at or before the watermark as late (its ``late=`` policy).
"""

from __future__ import annotations

import io
from typing import Any, Callable, Sequence

import polars as pl

from .batch import ArrowBatch
from .convert import frame_of_records
from .schema import as_schema

__all__ = ["DECODERS", "Watermark", "BatchMaker", "decode_values", "check_decode", "column_max"]

DECODERS = ("json", "msgpack")
"""The message encodings :func:`decode_values` reads."""


def check_decode(decode: Any, schema: Any, where: str) -> pl.Schema:
    """``decode=`` and ``columnar=`` of a source, checked as the dataflow is built: the schema as Polars'."""
    if decode not in DECODERS:
        raise ValueError(f"{where}: decode must be one of {', '.join(map(repr, DECODERS))}, not {decode!r}")
    if schema is None:
        raise ValueError(f"{where}: decode={decode!r} needs the columns' schema: columnar={{'user': pl.String, "
                         "'ts': pl.Int64, ...}")
    return as_schema(schema)


def decode_values(values: Sequence[bytes | None], decode: str, schema: pl.Schema) -> pl.DataFrame:
    """``values`` (JSON objects, or msgpack maps by column name or arrays in column order) as one frame of
    ``schema``: a field the schema lacks is left out, a column a message lacks is null there. A ``None`` value
    (a Kafka tombstone) is a row of nulls."""
    if not values:
        return pl.DataFrame(schema=schema)
    if decode == "json":
        return _json(values, schema)
    if decode == "msgpack":
        return _msgpack(values, schema)
    raise ValueError(f"decode must be one of {', '.join(map(repr, DECODERS))}, not {decode!r}")


def _present(values: Sequence[bytes | None], empty: bytes) -> Sequence[bytes]:
    """``values`` with ``empty`` for each ``None`` (only copied if there is one)."""
    if None not in values:
        return values  # type: ignore[return-value]
    return [empty if v is None else v for v in values]


def _json(values: Sequence[bytes | None], schema: pl.Schema) -> pl.DataFrame:
    present = _present(values, b"{}")
    joined = b"\n".join(present)
    if joined.count(b"\n") == len(present) - 1:  # one line each: newline-delimited JSON, Polars' fastest reader
        return pl.read_ndjson(io.BytesIO(joined), schema=schema)
    # a message with a newline inside (pretty-printed): the values as one JSON array, joined by commas
    return pl.read_json(io.BytesIO(b"[" + b",".join(present) + b"]"), schema=schema)


def _msgpack(values: Sequence[bytes | None], schema: pl.Schema) -> pl.DataFrame:
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=0)
    present = _present(values, b"\x80")
    unpacker.feed(b"".join(present))  # (0x80: an empty map)
    rows = list(unpacker)
    if len(rows) != len(values):
        raise ValueError(f"{len(values)} msgpack values held {len(rows)} objects: each value must be one map or "
                         "array")
    if rows and isinstance(rows[0], dict):
        return pl.from_dicts(rows, schema=schema)
    return pl.DataFrame(rows, schema=schema, orient="row")


def column_max(data: Any, column: str) -> int | None:
    """The largest value of integer ``column`` in ``data`` (a Polars frame, a pyarrow ``RecordBatch`` or
    ``Table``, or a list of them), in one vectorized call each; ``None`` if there are no (non-null) values."""
    parts = data if isinstance(data, list) else [data]
    best: int | None = None
    for part in parts:
        top: Any
        if isinstance(part, pl.DataFrame):
            top = part.get_column(column).max() if part.height else None
        else:
            import pyarrow.compute as pc

            top = pc.max(part.column(column)).as_py() if part.num_rows else None
        if top is not None and (best is None or int(top) > best):
            best = int(top)
    return best


class Watermark:
    """Event time from integer column ``column``: the dataflow time a batch goes at (:attr:`current`), and after
    it, the latest event time seen so far minus ``lateness`` (never earlier than before, nor than ``start``).

    The watermark is the *maximum* seen, as Spark's: what is behind it by more than ``lateness`` is late. A
    source whose parts are stable and read apart (Kafka's partitions) keeps one per part and moves its time to
    the least of them; one that sees each batch whole (Spark's micro-batches) keeps one.
    """

    __slots__ = ("column", "lateness", "current", "seen")

    def __init__(self, column: str, lateness: int = 0, start: int = 0) -> None:
        if type(column) is not str:
            raise TypeError(f"time must name an integer column (time=\"ts\"), not {column!r:.100}")
        if type(lateness) is not int or lateness < 0:
            raise ValueError(f"lateness must be a non-negative int, not {lateness!r}")
        self.column = column
        self.lateness = lateness
        self.current = start
        """The watermark: the dataflow time of the next batch; nothing earlier is sent any more."""
        self.seen: int | None = None
        """The latest event time seen (``None``: none yet)."""

    def check(self, names_types: Sequence[tuple[str, Any]], integer: bool) -> None:
        """Refuse a batch whose columns (``names_types``) lack the time column, or have it of a type that is not an
        integer one (``integer``: whether it is)."""
        names = [n for n, _ in names_types]
        if self.column not in names:
            raise TypeError(f"there is no event-time column {self.column!r}: the batch's columns are {names}")
        if not integer:
            kind = dict(names_types)[self.column]
            raise TypeError(f"the event-time column {self.column!r} is {kind}, not an integer type (a Spark "
                            "timestamp: send unix_millis(ts) or unix_micros(ts) as a LONG column)")

    def saw(self, latest: int | None) -> int:
        """A batch whose latest event time is ``latest`` (``None``: it had none) was sent: the new watermark."""
        if latest is not None and (self.seen is None or latest > self.seen):
            self.seen = latest
        if self.seen is not None and self.seen - self.lateness > self.current:
            self.current = self.seen - self.lateness
        return self.current

    def snapshot(self) -> tuple[int, int | None]:
        return self.current, self.seen

    def resume(self, state: tuple[int, int | None] | None, start: int) -> None:
        if state is not None:
            self.current, self.seen = state
        self.current = max(self.current, start)


class BatchMaker:
    """How a columnar source makes one Arrow batch of a group of what it read, in one call: message values
    decoded (``decode``: ``"json"`` or ``"msgpack"``; ``value`` takes a record's value, e.g. a Kafka record's
    ``.value``), or, without ``decode``, records that are tuples in column order or dicts."""

    __slots__ = ("decode", "schema", "value")

    def __init__(self, decode: str | None, schema: pl.Schema, value: Callable[[Any], Any] | None = None) -> None:
        self.decode = decode
        self.schema = schema
        self.value = value

    def __call__(self, records: list[Any]) -> ArrowBatch:
        if self.decode is None:
            return ArrowBatch(frame_of_records(records, self.schema))
        values = records if self.value is None else list(map(self.value, records))
        return ArrowBatch(decode_values(values, self.decode, self.schema))
