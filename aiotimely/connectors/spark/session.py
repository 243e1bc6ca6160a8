"""pyspark on demand (it is an optional extra): a local session, and the Spark-side classes made on first use.

A class Spark instantiates must derive from pyspark's own (``DataSource``,
``DataSourceStreamArrowWriter``, ...), so it cannot be written at module level
without importing pyspark. Each connector module keeps its logic in plain classes
and names the classes to make; :func:`spark_classes` gives it a module
``__getattr__`` that makes them (importing pyspark) the first time anything asks,
executors included: Spark pickles the classes by reference, as attributes of the
module that made them.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

__all__ = ["local_session", "spark_class", "spark_classes"]

_classes_lock = threading.Lock()


def spark_class(namespace: dict[str, Any], name: str, bases: Callable[[], dict[str, tuple[type, ...]]]) -> Any:
    """The Spark-side class ``name`` of a module (``namespace``: its ``globals()``), made on first use, with every
    other one ``bases()`` names: ``{class name: (our logic, pyspark's base classes...)}``. pyspark is imported
    only then (it is an optional extra)."""
    cls = namespace.get(name)
    if cls is None:
        with _classes_lock:
            if name not in namespace:
                for made, parents in bases().items():
                    namespace[made] = type(made, parents, {"__module__": namespace["__name__"],
                                                           "__doc__": parents[0].__doc__})
            cls = namespace[name]
    return cls


def spark_classes(namespace: dict[str, Any], names: tuple[str, ...],
                  bases: Callable[[], dict[str, tuple[type, ...]]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module whose ``globals()`` are ``namespace``: its Spark-side classes
    ``names`` (see :func:`spark_class`), made on first access; any other name is missing as usual."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return spark_class(namespace, name, bases)
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")

    __getattr__.__doc__ = "The Spark-side classes, made (importing pyspark) on first access."
    return __getattr__


def local_session(master: str = "local[2]", *, workdir: str | None = None, app: str = "aiotimely") -> Any:
    """A SparkSession in local mode bound to loopback, quiet, its scratch files in ``workdir``.

    Spark's Python workers run this interpreter. ``local[N,F]`` lets each task fail
    F times before the query fails.
    """
    import sys
    import tempfile

    workdir = workdir or tempfile.mkdtemp(prefix="aiotimely-spark-")
    os.environ.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master(master).appName(app)
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.local.dir", workdir)
               .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={workdir}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session
