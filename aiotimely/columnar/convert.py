"""Records into columns: a record stream's batches as Arrow batches of a schema, once per batch.

``ColumnarStream.records()`` is the way back; a record is a tuple of the row's values in
the schema's column order (a dict by column name is taken too), so that
``stream.columnar(schema).records()`` gives the records it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from ..dataflow.operators.maplike import batch_operator
from .batch import ArrowBatch
from .schema import as_schema
from .stream import ColumnarStream

if TYPE_CHECKING:
    from ..stream import Stream

__all__ = ["columnar", "frame_of_records"]


def columnar(stream: Stream[Any], schema: Any, *, name: str = "Columnar") -> ColumnarStream:
    """``stream``'s records as a columnar stream of ``schema`` (see :func:`~.schema.as_schema`): each batch
    becomes one :class:`~.batch.ArrowBatch` (a batch that already is one goes on as it is)."""
    columns = as_schema(schema)

    def transform(_time: Any, batch: Any) -> Any:  # (an ArrowBatch)
        if type(batch) is ArrowBatch:
            return batch
        return ArrowBatch(frame_of_records(batch if type(batch) is list else list(batch), columns))

    return ColumnarStream(batch_operator(stream, name, transform), columns)


def frame_of_records(records: list[Any], schema: pl.Schema) -> pl.DataFrame:
    """A frame of ``records``: tuples of values in ``schema``'s column order, or dicts by column name."""
    if isinstance(records[0], Mapping):
        return pl.from_dicts(records, schema=schema)
    return pl.DataFrame(records, schema=schema, orient="row")
