"""A row's event time on a columnar stream: an integer column (``time="ts"``), or its batch's dataflow time.

Each row carries its own time under its batch's one capability (the timestamp-token paper's §6.2). A row's
time may be earlier than its batch's dataflow time ``d``, as with the record path's ``time=fn``: the lateness
rule says what becomes of it (late if its window ends at or before ``d - lateness``), and rows at or after their
batch's time (the record path's ``timed=True`` contract) are never late. Event times must be integers without
nulls: a column of another type is refused as the dataflow is built (with a known schema) or when its first
batch is applied, a null when met, each naming the operator.
"""

from __future__ import annotations

import polars as pl

from ..errors import GraphError

__all__ = ["TIME", "check_time_column", "with_event_time"]

TIME = "__aiotimely_event_time__"
"""The column of each row's event time, as an ``Int64``, while an operator assigns windows."""


def check_time_column(schema: pl.Schema | None, column: str | None, where: str) -> None:
    """Refuse, as the dataflow is built, an event-time column the schema lacks or has with another type."""
    if column is not None and type(column) is not str:
        raise TypeError(f"{where}: time must name an integer column (time=\"ts\"), or be None for the dataflow "
                        f"time, not {column!r:.100}")
    if schema is None or column is None:
        return
    if column not in schema:
        raise GraphError(f"{where}: there is no event-time column {column!r}: the columns are {list(schema)}")
    if not schema[column].is_integer():
        raise GraphError(f"{where}: the event-time column {column!r} is {schema[column]}, not an integer type")


def with_event_time(frame: pl.DataFrame, column: str | None, d: int) -> pl.DataFrame:
    """``frame`` with :data:`TIME`: its ``column`` as ``Int64`` (``None``: the batch's dataflow time ``d``);
    a column missing, not of integers, or with nulls is refused (``TypeError``, ``ValueError``)."""
    if column is None:
        return frame.with_columns(pl.lit(d, dtype=pl.Int64).alias(TIME))
    if column not in frame.schema:
        raise TypeError(f"there is no event-time column {column!r}: the batch's columns are {frame.columns}")
    dtype = frame.schema[column]
    if not dtype.is_integer():
        raise TypeError(f"the event-time column {column!r} is {dtype}, not an integer type")
    nulls = frame.get_column(column).null_count()
    if nulls:
        raise ValueError(f"the event-time column {column!r} has {nulls} null(s) in the batch at time {d}: every "
                         "row needs its event time")
    return frame.with_columns(pl.col(column).cast(pl.Int64).alias(TIME))
