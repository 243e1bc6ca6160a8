"""A native Spark data source, ``format("aiotimely")``: micro-batches as Arrow record batches into a dataflow.

On the Spark side (PySpark 4.1+, the Python Data Source API)::

    from aiotimely.connectors.spark.datasource import register
    register(spark, secret=...)                  # spark.dataSource.register(...) under the name "aiotimely"
    (df.writeStream.format("aiotimely").option("address", "127.0.0.1:7000")
       .option("checkpointLocation", ...).start())

On the aiotimely side, an :class:`~.arrow_ingress.ArrowIngress` listens (on worker 0)
and is the source of a stream::

    ingress = ArrowIngress("127.0.0.1:7000", secret=..., records="tuples")   # or "dicts", "arrow"
    worker.dataflow(lambda s: ingress.stream(s).map(...))
    ...
    ingress.close()                               # the stream ends (see "The end of the stream")

How an epoch gets in, exactly once:

* Each write task (on an executor: one attempt at one partition of micro-batch
  ``batchId``) connects, authenticates with the cluster's shared-secret handshake
  (:mod:`aiotimely.comm.handshake`), and sends its partition as Arrow IPC messages
  (the schema, then one record batch per frame, over :mod:`aiotimely.comm.framing`).
  The ingress *stages* them under (batch, partition, attempt token): the token is
  fresh for every task attempt, so a retried task, a speculative copy, or the same
  batch re-run by a restarted query never mixes with another attempt. The task
  succeeds once the ingress acknowledges the whole partition; its commit message
  names the attempt.
* Spark's driver calls ``commit(messages, batchId)`` once every task succeeded: the
  commit names the one staged attempt per partition that counts, and the ingress
  releases exactly those into the dataflow at time ``batchId``, then moves the
  time past ``batchId`` (the frontier passes the epoch: no listener needed). Every
  other attempt staged for that batch is discarded.
* ``abort(messages, batchId)`` discards what was staged for the batch.
* A commit of a batch already committed (a query restarted from a checkpoint whose
  commit log missed it), or a write of one, is acknowledged and ignored.

The end of the stream: Spark's writer API has no end-of-query call (commit and
abort are per micro-batch), and a query that stops or fails may be restarted from
its checkpoint and go on into the same dataflow: only the application knows that
the stream is over. So it says so: :meth:`ArrowIngress.close` (any thread), or
:func:`end_stream` from another process. Every epoch committed before then is
delivered; anything staged and not committed is discarded; the ingress stops
listening and its stream completes.

Records reach operators as ``records="tuples"`` (one tuple per row, in the column
order), ``"dicts"`` (column name -> value), or ``"arrow"`` (each record a whole
``pyarrow.RecordBatch``, for vectorised operators; a partition's batches as Spark
made them, ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows at most).

Back-pressure: the commit of batch ``b`` is acknowledged once every earlier batch
has been handed to the dataflow, so the ingress holds at most the batch being
staged and one committed batch waiting; Spark waits for the acknowledgement before
it plans the next micro-batch.

This module is Spark's side (the data source and its writer; the reader is
:mod:`.reader`); :mod:`.arrow_ingress` is aiotimely's. pyspark and pyarrow are
imported only when needed: the Spark-side classes (``AiotimelyDataSource``,
``AiotimelyStreamWriter``, ``StagedAttempt``) are attributes of this module made on
first access.
"""

from __future__ import annotations

import importlib
import secrets
import socket
from typing import Any, Iterator, Mapping

from ...comm.framing import ANY, HEADER, Kind
from ...comm.handshake import shared_secret
from ...comm.link import parse_address
from ...comm.tls import TLSConfig, TLSError, TLSOption, resolve
from ...errors import ClusterError
from .reader import stream_reader
from .session import spark_classes
from .wire import CONTROL, WireClient, client_context, ship_secret, tls_refusal

__all__ = ["register", "end_stream", "NAME", "CONTROL", "SCHEMA", "BATCH"]

NAME = "aiotimely"
"""The data source's name: ``df.writeStream.format("aiotimely")``."""

SCHEMA, BATCH = 1, 2
"""The frame ``channel`` of a DATA frame that is not a message (:data:`CONTROL`): an Arrow IPC schema, a record
batch."""
BATCH_ID_KEY = "streaming.sql.batchId"
"""The local property Spark's micro-batch execution sets on every task: the batch id."""
MAX_SLICE_BYTES = 64 * 1024 * 1024
"""A record batch larger than this is sent in slices (frames stay far below the frame limit)."""
_AFTER_LENGTH = HEADER.size - 4


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "the aiotimely Spark data source")


class _Client(WireClient):
    """A blocking authenticated connection to an :class:`ArrowIngress`: messages, and Arrow frames; over TLS
    with ``tls`` (default: ``AIOTIMELY_TLS_*``; ``False``: never)."""

    def __init__(self, address: str, secret: str | bytes | None, timeout: float, tls: TLSOption = None) -> None:
        context = client_context(resolve(tls))
        try:
            super().__init__(address, _secret(secret), timeout, tls=context)
        except (ClusterError, OSError) as e:
            if context is None or isinstance(e, TLSError):
                raise
            raise tls_refusal(f"the aiotimely ingress at {address}", "this process", e) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_arrow(self, channel: int, buffer: Any) -> None:
        view = memoryview(buffer)
        self._sock.sendall(HEADER.pack(_AFTER_LENGTH + view.nbytes, Kind.DATA, ANY, ANY, 0, channel))
        self._sock.sendall(view)

    def ask(self, *message: Any) -> Any:
        """Send a message; return the ingress's reply, raising its error if it refused."""
        reply = self.request(*message)
        if not isinstance(reply, list) or not reply or reply[0] != "ok":
            raise ClusterError(f"the aiotimely ingress refused {message[0]!r}: {reply[1] if reply else reply!r}")
        return reply


class _StagedAttemptFields:
    """What a write task tells the driver: which attempt at which partition of which batch, and its rows."""

    def __init__(self, batch: int, partition: int, token: str, rows: int, attempt: int) -> None:
        self.batch, self.partition, self.token, self.rows, self.attempt = batch, partition, token, rows, attempt

    def __repr__(self) -> str:
        return (f"StagedAttempt(batch={self.batch}, partition={self.partition}, attempt={self.attempt}, "
                f"rows={self.rows}, token={self.token!r})")


class _StreamWriterLogic:
    """``DataSourceStreamArrowWriter``'s methods: ``write`` on executors, ``commit``/``abort`` on the driver."""

    def __init__(self, options: Mapping[str, str], default_secret: str | bytes | None,
                 tls: TLSConfig | None = None) -> None:
        if "address" not in options:
            raise ValueError('the aiotimely data source needs .option("address", "host:port") of an ArrowIngress')
        self.address = str(options["address"])
        parse_address(self.address)
        secret = options.get("secret")
        self.secret: str | bytes | None = secret if secret is not None else default_secret
        self.timeout = float(options.get("timeout", "120"))
        self.tls = tls
        """TLS as :func:`register` shipped it (not this executor's environment)."""

    def _connect(self) -> _Client:
        return _Client(self.address, self.secret, self.timeout, self.tls if self.tls is not None else False)

    def write(self, iterator: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_KEY) if context is not None else None
        if context is None or batch is None:
            raise RuntimeError("the aiotimely data source is a streaming sink: use df.writeStream.format('aiotimely')")
        batch_id, partition, attempt = int(batch), context.partitionId(), context.attemptNumber()
        token = secrets.token_hex(12)
        rows = 0
        with self._connect() as client:
            client.send("stage", batch_id, partition, token, attempt, context.taskAttemptId())
            schema_sent = False
            for record_batch in iterator:
                if not schema_sent:
                    client.send_arrow(SCHEMA, record_batch.schema.serialize())
                    schema_sent = True
                n = record_batch.num_rows
                if n == 0:
                    continue
                size = record_batch.nbytes
                step = n if size <= MAX_SLICE_BYTES else max(1, n * MAX_SLICE_BYTES // size)
                for offset in range(0, n, step):
                    part = record_batch if step == n else record_batch.slice(offset, step)
                    client.send_arrow(BATCH, part.serialize())
                rows += n
            client.ask("staged", rows)
        return _spark_class("StagedAttempt")(batch_id, partition, token, rows, attempt)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        missing = [i for i, m in enumerate(messages) if m is None]
        if missing:
            raise RuntimeError(f"batch {batchId}: no commit message from partition(s) {missing}")
        with self._connect() as client:
            client.ask("commit", batchId, [[m.partition, m.token, m.rows] for m in messages])

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        with self._connect() as client:
            client.ask("abort", batchId)


class _DataSourceLogic:
    """``DataSource``'s methods: the name, a stream writer (``df.writeStream.format("aiotimely")``) and a stream
    reader (``spark.readStream.format("aiotimely")``, :mod:`.reader`) for the query's options."""

    options: Mapping[str, str]
    _secret: str | bytes | None = None
    _tls: TLSConfig | None = None
    _name: str = NAME

    @classmethod
    def name(cls) -> str:
        return cls._name

    def schema(self) -> Any:
        raise ValueError("reading from aiotimely needs the records' schema: spark.readStream.format('aiotimely')"
                         ".schema('key STRING, total LONG')")

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        return _spark_class("AiotimelyStreamWriter")(self.options, self._secret, self._tls)

    def streamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        return stream_reader(self.options, schema, secret=self._secret, tls=self._tls if self._tls else False)


_SPARK_CLASSES = ("AiotimelyDataSource", "AiotimelyStreamWriter", "StagedAttempt")


def _bases() -> dict[str, tuple[type, ...]]:
    datasource = importlib.import_module("pyspark.sql.datasource")
    if not hasattr(datasource, "DataSourceStreamArrowWriter"):
        raise ImportError("the aiotimely Spark data source needs PySpark 4.1 or later "
                          "(pyspark.sql.datasource.DataSourceStreamArrowWriter)")
    return {"AiotimelyDataSource": (_DataSourceLogic, datasource.DataSource),
            "AiotimelyStreamWriter": (_StreamWriterLogic, datasource.DataSourceStreamArrowWriter),
            "StagedAttempt": (_StagedAttemptFields, datasource.WriterCommitMessage)}


_spark_class = __getattr__ = spark_classes(globals(), _SPARK_CLASSES, _bases)


def register(spark: Any, *, secret: str | bytes | None = None, name: str = NAME, tls: TLSOption = None) -> Any:
    """Register the data source with ``spark`` (``spark.dataSource.register``) as ``format(name)``.

    The shared secret travels with the registered class to Spark's Python workers
    (which may not have ``AIOTIMELY_SECRET`` in their environment): ``secret``, else
    this process's ``AIOTIMELY_SECRET`` now. A query may still pass
    ``.option("secret", ...)``, though options show in Spark's plans and logs.
    So does ``tls`` (a :class:`~aiotimely.comm.tls.TLSConfig`, else this process's
    ``AIOTIMELY_TLS_*`` now; ``False``: none): its file paths, which must hold the same
    files on every executor. Returns the registered class.
    """
    shipped = ship_secret(secret)
    base = _spark_class("AiotimelyDataSource")
    # a class of its own (pickled by value with the secret), not the module's (pickled by reference)
    cls = type("AiotimelyDataSource", (base,), {"__module__": __name__, "_secret": shipped, "_name": name,
                                                "_tls": resolve(tls)})
    spark.dataSource.register(cls)
    return cls


def end_stream(address: str, secret: str | bytes | None = None, timeout: float = 30.0, *,
               tls: TLSOption = None) -> None:
    """Tell the :class:`ArrowIngress` at ``address`` that the stream is over (from any process):
    what was committed is delivered, then its stream completes. ``tls`` as for the ingress."""
    with _Client(address, secret, timeout, tls) as client:
        client.ask("end")
