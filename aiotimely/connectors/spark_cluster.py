"""The old path of :mod:`aiotimely.connectors.spark.cluster` (``run_on_spark``: aiotimely's processes as the
tasks of a Spark barrier stage).

Kept so that programs importing it go on working: it offers the same names, each
the very object of the new module.
"""

from .spark import cluster as _cluster
from .spark.cluster import run_on_spark as run_on_spark
from .spark.compat import forward as _forward

__all__ = ["run_on_spark"]

__getattr__ = _forward(__name__, _cluster)
