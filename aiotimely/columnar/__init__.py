"""Columnar streams: batches that are Arrow record batches, operators that take Polars expressions and run once
per batch (docs/columnar.md).

This package needs the ``columnar`` extra (``pip install aiotimely[columnar]``): importing it imports Polars
(and PyArrow when Arrow data comes in or goes out). ``import aiotimely`` does not import it:
``Stream.columnar`` and ``aiotimely.from_arrow`` do, when first used.
"""

from .batch import ArrowBatch as ArrowBatch
from .convert import columnar as columnar
from .schema import as_schema as as_schema
from .source import from_arrow as from_arrow
from .stream import ColumnarStream as ColumnarStream

__all__ = ["ArrowBatch", "ColumnarStream", "as_schema", "columnar", "from_arrow"]
