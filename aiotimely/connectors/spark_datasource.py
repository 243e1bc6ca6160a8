"""The old path of the ``format("aiotimely")`` data source: :mod:`aiotimely.connectors.spark.datasource` (Spark's
side) and :mod:`aiotimely.connectors.spark.arrow_ingress` (aiotimely's), as one module.

Kept so that programs importing it, and Spark processes loading its classes by this
name, go on working: it offers the same names, each the very object of the new module.
"""

from .spark import arrow_ingress as _arrow_ingress
from .spark import datasource as _datasource
from .spark.arrow_ingress import ArrowIngress as ArrowIngress
from .spark.arrow_ingress import RECORDS as RECORDS
from .spark.compat import forward as _forward
from .spark.datasource import NAME as NAME
from .spark.datasource import end_stream as end_stream
from .spark.datasource import register as register

__all__ = ["ArrowIngress", "register", "end_stream", "NAME", "RECORDS"]

__getattr__ = _forward(__name__, _datasource, _arrow_ingress)
