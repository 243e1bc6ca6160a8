"""The old path of Spark's reads from aiotimely: :mod:`aiotimely.connectors.spark.publisher` (aiotimely's side),
:mod:`aiotimely.connectors.spark.reader` (Spark's) and :mod:`aiotimely.connectors.spark.records`, as one module.

Kept so that programs importing it, and Spark processes loading its classes by this
name, go on working: it offers the same names, each the very object of the new module.
"""

from .spark import publisher as _publisher
from .spark import reader as _reader
from .spark import records as _records
from .spark.compat import forward as _forward
from .spark.publisher import DEFAULT_END_TIMEOUT as DEFAULT_END_TIMEOUT
from .spark.publisher import DEFAULT_MAX_PENDING as DEFAULT_MAX_PENDING
from .spark.publisher import publish_to_spark as publish_to_spark
from .spark.reader import stream_reader as stream_reader

__all__ = ["publish_to_spark", "stream_reader", "DEFAULT_MAX_PENDING", "DEFAULT_END_TIMEOUT"]

__getattr__ = _forward(__name__, _reader, _publisher, _records)
