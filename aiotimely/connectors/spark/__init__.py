"""Spark Structured Streaming and aiotimely, both ways, and aiotimely on a Spark cluster.

Rows from Spark, exactly once per row, with the Spark epoch as the timestamp: on the
aiotimely side, :func:`ingress` is a source listening on a TCP port (worker 0); on
the Spark side, rows reach it from :class:`AiotimelyForeachWriter`
(``writeStream.foreach(...)``, with an :class:`EpochListener` saying when epochs
complete) or :func:`foreach_batch_sink` (``writeStream.foreachBatch(...)``). These
are this package's own names; the rest is in its modules:

* :mod:`.foreach` and :mod:`.row_ingress` — the two sides of the row ingress above;
* :mod:`.datasource` — the native data source ``format("aiotimely")`` (PySpark 4.1+),
  whose writes enter an :class:`~.arrow_ingress.ArrowIngress` (:mod:`.arrow_ingress`)
  as Arrow record batches, released when Spark's driver commits;
* :mod:`.publisher` and :mod:`.reader` — ``spark.readStream.format("aiotimely")`` reads
  what :func:`~.publisher.publish_to_spark` serves, one complete time at a time
  (:mod:`.records`: what they say);
* :mod:`.cluster` — :func:`~.cluster.run_on_spark`: the processes of one computation
  as the tasks of a Spark barrier stage;
* :mod:`.wire` — the framing, the blocking clients and the listeners all of them
  share; :mod:`.session` — pyspark on demand (a local session, the Spark-side classes).

Every connection authenticates with the cluster's handshake (a shared secret:
``secret=`` or ``AIOTIMELY_SECRET``) and may use TLS (``tls=``, ``AIOTIMELY_TLS_*``).
Both row paths work with Spark 3.5 and 4 (classic PySpark: ``foreachBatch`` runs its
function in the driver). The flat modules ``aiotimely.connectors.spark_datasource``,
``spark_reader`` and ``spark_cluster`` are the old paths of :mod:`.datasource` (with
:mod:`.arrow_ingress`), :mod:`.reader` (with :mod:`.publisher`) and :mod:`.cluster`,
kept so that existing programs, and Spark executors loading classes by those names,
go on working.
"""

from .foreach import ROWS_PER_FRAME as ROWS_PER_FRAME
from .foreach import AiotimelyForeachWriter as AiotimelyForeachWriter
from .foreach import EpochListener as EpochListener
from .foreach import ForeachBatchSink as ForeachBatchSink
from .foreach import foreach_batch_sink as foreach_batch_sink
from .row_ingress import ingress as ingress
from .session import local_session as local_session
from .session import spark_class as spark_class
from .wire import IngressClient as IngressClient
from .wire import control_message as control_message

__all__ = ["ingress", "AiotimelyForeachWriter", "foreach_batch_sink", "ForeachBatchSink", "EpochListener",
           "IngressClient", "local_session", "control_message", "spark_class"]
