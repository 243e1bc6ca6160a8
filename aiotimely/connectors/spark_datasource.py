"""A native Spark data source, ``format("aiotimely")``: micro-batches as Arrow record batches into a dataflow.

On the Spark side (PySpark 4.1+, the Python Data Source API)::

    from aiotimely.connectors.spark_datasource import register
    register(spark, secret=...)                  # spark.dataSource.register(...) under the name "aiotimely"
    (df.writeStream.format("aiotimely").option("address", "127.0.0.1:7000")
       .option("checkpointLocation", ...).start())

On the aiotimely side, an :class:`ArrowIngress` listens (on worker 0) and is the
source of a stream::

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

pyspark and pyarrow are imported only when needed: the Spark-side classes
(``AiotimelyDataSource``, ``AiotimelyStreamWriter``, ``StagedAttempt``) are
attributes of this module made on first access.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import secrets
import socket
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import msgpack

from ..comm.framing import ANY, HEADER, Frame, Kind, encode_frame
from ..comm.handshake import Acceptor, shared_secret
from ..comm.link import Link, LinkHandler, parse_address
from ..comm.tls import TLSConfig, TLSError, TLSOption, resolve, serve
from ..dataflow.input import source
from ..errors import ClusterError, RecoveryError
from .spark import IngressClient, control_message, spark_class
from .spark_reader import stream_reader

if TYPE_CHECKING:
    from ..dataflow import Capability, OperatorOutput, Scope
    from ..stream import Stream

__all__ = ["ArrowIngress", "register", "end_stream", "NAME", "RECORDS"]

log = logging.getLogger("aiotimely.connectors.spark_datasource")

NAME = "aiotimely"
"""The data source's name: ``df.writeStream.format("aiotimely")``."""
RECORDS = ("tuples", "dicts", "arrow")
"""What a record is in the stream of an :class:`ArrowIngress`."""

CONTROL, SCHEMA, BATCH = 0, 1, 2
"""The frame ``channel`` says what a DATA frame carries: a msgpack message, an Arrow IPC schema, a record batch."""
BATCH_ID_KEY = "streaming.sql.batchId"
"""The local property Spark's micro-batch execution sets on every task: the batch id."""
MAX_SLICE_BYTES = 64 * 1024 * 1024
"""A record batch larger than this is sent in slices (frames stay far below the frame limit)."""
YIELD_EVERY = 16384
"""Rows the ingress hands to the dataflow before it lets the worker run the rest of the dataflow."""
_AFTER_LENGTH = HEADER.size - 4


def _pyarrow() -> Any:
    return importlib.import_module("pyarrow")


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "the aiotimely Spark data source")


# -- the Spark side ------------------------------------------------------------------------------


class _Client(IngressClient):
    """A blocking authenticated connection to an :class:`ArrowIngress`: messages, and Arrow frames; over TLS
    with ``tls`` (default: ``AIOTIMELY_TLS_*``; ``False``: never)."""

    def __init__(self, address: str, secret: str | bytes | None, timeout: float, tls: TLSOption = None) -> None:
        config = resolve(tls)
        context = config.client_context() if config is not None else None
        try:
            super().__init__(address, _secret(secret), timeout, tls=context)
        except (ClusterError, OSError) as e:
            if context is None or isinstance(e, TLSError):
                raise
            raise TLSError(f"the aiotimely ingress at {address} closed the connection during the handshake, over "
                           "TLS: most likely it does not trust this process's certificate (its log says which): "
                           f"{e}") from None
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
        client = self._connect()
        try:
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
        finally:
            client.close()
        return _spark_class("StagedAttempt")(batch_id, partition, token, rows, attempt)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        missing = [i for i, m in enumerate(messages) if m is None]
        if missing:
            raise RuntimeError(f"batch {batchId}: no commit message from partition(s) {missing}")
        client = self._connect()
        try:
            client.ask("commit", batchId, [[m.partition, m.token, m.rows] for m in messages])
        finally:
            client.close()

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        client = self._connect()
        try:
            client.ask("abort", batchId)
        finally:
            client.close()


class _DataSourceLogic:
    """``DataSource``'s methods: the name, a stream writer (``df.writeStream.format("aiotimely")``) and a stream
    reader (``spark.readStream.format("aiotimely")``, :mod:`.spark_reader`) for the query's options."""

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


def _spark_class(name: str) -> Any:
    return spark_class(globals(), name, _bases)


def __getattr__(name: str) -> Any:
    """The Spark-side classes, made (importing pyspark) on first access."""
    if name in _SPARK_CLASSES:
        return _spark_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    shipped = secret if secret is not None else os.environ.get("AIOTIMELY_SECRET")
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
    client = _Client(address, secret, timeout, tls)
    try:
        client.ask("end")
    finally:
        client.close()


# -- the aiotimely side: the ingress -------------------------------------------------------------


class _Attempt:
    """One write task's partition, as staged."""

    __slots__ = ("batch", "partition", "token", "attempt", "schema", "batches", "rows", "late")

    def __init__(self, batch: int, partition: int, token: str, attempt: int, late: bool) -> None:
        self.batch, self.partition, self.token, self.attempt, self.late = batch, partition, token, attempt, late
        self.schema: Any = None
        self.batches: list[Any] = []
        self.rows = 0


class _Ingress:
    """The ingress's state (on worker 0's event loop): staged attempts, committed batches, the release queue."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.staged: dict[int, dict[tuple[int, str], _Attempt]] = {}
        self.committed = -1
        self.released: deque[tuple[int, list[_Attempt]]] = deque()
        self.unfinished = 0            # committed batches not yet wholly handed to the dataflow
        self.blocked: list[Link] = []  # commits waiting for their acknowledgement (back-pressure)
        self.ended = False
        self.wakeup: asyncio.Future[None] | None = None
        self.statistics: dict[str, int] = dict.fromkeys(
            ("epochs_committed", "rows_committed", "replays_ignored", "attempts_discarded", "epochs_aborted"), 0)

    def _wake(self) -> None:
        if self.wakeup is not None and not self.wakeup.done():
            self.wakeup.set_result(None)

    async def next_release(self) -> tuple[int, list[_Attempt]] | None:
        while not self.released:
            if self.ended:
                return None
            self.wakeup = asyncio.get_running_loop().create_future()
            await self.wakeup
        return self.released[0]

    def handed_in(self) -> None:
        self.released.popleft()
        self.unfinished -= 1
        while self.blocked and self.unfinished <= 1:
            _reply(self.blocked.pop(0), "ok")

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            dropped = sum(len(attempts) for attempts in self.staged.values())
            if dropped:
                self.statistics["attempts_discarded"] += dropped
                log.info("%s: the stream ended; %d staged attempt(s) of uncommitted batches are discarded",
                         self.name, dropped)
            self.staged.clear()
            self._wake()

    def _discard_through(self, batch: int) -> None:
        for b in [b for b in self.staged if b <= batch]:
            self.statistics["attempts_discarded"] += len(self.staged.pop(b))

    def control(self, connection: _Connection, link: Link, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if self.ended and kind != "end":
            raise ValueError(f"the stream has ended: {kind!r} refused")
        if kind == "stage":
            batch, partition, token, attempt = int(message[1]), int(message[2]), str(message[3]), int(message[4])
            if connection.attempt is not None:
                raise ValueError("stage twice on one connection")
            connection.attempt = _Attempt(batch, partition, token, attempt, late=batch <= self.committed)
        elif kind == "staged":
            staged = connection.attempt
            if staged is None:
                raise ValueError("staged before stage")
            connection.attempt = None
            if int(message[1]) != staged.rows:
                raise ValueError(f"batch {staged.batch} partition {staged.partition}: {message[1]} rows sent, "
                                 f"{staged.rows} received")
            if staged.late or staged.batch <= self.committed:
                self.statistics["replays_ignored"] += 1
                log.info("%s: batch %d is already committed; a write of its partition %d is ignored",
                         self.name, staged.batch, staged.partition)
            else:
                self.staged.setdefault(staged.batch, {})[(staged.partition, staged.token)] = staged
            _reply(link, "ok", staged.rows)
        elif kind == "commit":
            self.commit(link, int(message[1]), message[2])
        elif kind == "abort":
            batch = int(message[1])
            dropped = self.staged.pop(batch, {})
            self.statistics["attempts_discarded"] += len(dropped)
            self.statistics["epochs_aborted"] += 1
            log.info("%s: Spark aborted batch %d; %d staged attempt(s) discarded", self.name, batch, len(dropped))
            _reply(link, "ok")
        elif kind == "end":
            self.end()
            _reply(link, "ok")
        else:
            raise ValueError(f"unknown message {kind!r}")

    def commit(self, link: Link, batch: int, parts: Any) -> None:
        if batch <= self.committed:
            self.statistics["replays_ignored"] += 1
            log.info("%s: batch %d is already committed (up to %d); the commit is ignored",
                     self.name, batch, self.committed)
            self.staged.pop(batch, None)
            _reply(link, "ok", "replay")
            return
        staged = self.staged.get(batch, {})
        chosen: list[_Attempt] = []
        for partition, token, rows in parts:
            attempt = staged.get((int(partition), str(token)))
            if attempt is None or attempt.rows != rows:
                _reply(link, "error", f"batch {batch} partition {partition}: the attempt committed "
                                      f"({rows} rows) was not staged here")
                return
            chosen.append(attempt)
        chosen.sort(key=lambda a: a.partition)
        for attempt in chosen:
            del staged[(attempt.partition, attempt.token)]
        self._discard_through(batch)
        self.committed = batch
        self.statistics["epochs_committed"] += 1
        self.statistics["rows_committed"] += sum(a.rows for a in chosen)
        self.released.append((batch, chosen))
        self.unfinished += 1
        if self.unfinished <= 1:
            _reply(link, "ok")
        else:
            self.blocked.append(link)
        self._wake()


def _reply(link: Link, *message: Any) -> None:
    link.send(encode_frame(Kind.DATA, msgpack.packb(list(message)), channel=CONTROL))


class _Connection(LinkHandler):
    """One connection from Spark: a write task's attempt, or the driver's commit or abort."""

    log = log

    def __init__(self, ingress: _Ingress) -> None:
        self.ingress = ingress
        self.name = ingress.name
        self.attempt: _Attempt | None = None

    def frame_received(self, link: Link, frame: Frame) -> None:
        try:
            if frame.kind is not Kind.DATA:
                raise ValueError(f"unexpected {frame.kind.name} frame")
            channel = frame.channel
            if channel == CONTROL:
                self.ingress.control(self, link, control_message(frame))
                return
            attempt = self.attempt
            if attempt is None:
                raise ValueError("Arrow data before stage")
            pa = _pyarrow()
            try:
                if channel == SCHEMA:
                    attempt.schema = pa.ipc.read_schema(pa.py_buffer(frame.payload))
                elif channel == BATCH:
                    if attempt.schema is None:
                        raise ValueError("a record batch before its schema")
                    record_batch = pa.ipc.read_record_batch(pa.py_buffer(frame.payload), attempt.schema)
                    attempt.rows += record_batch.num_rows
                    if not attempt.late:
                        attempt.batches.append(record_batch)
                else:
                    raise ValueError(f"unknown channel {channel}")
            except pa.ArrowException as e:
                raise ValueError(f"malformed Arrow data: {e}") from None
        except (ValueError, TypeError, IndexError) as e:
            link.reject(str(e))

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        attempt = self.attempt
        if attempt is not None:
            self.ingress.statistics["attempts_discarded"] += 1
            log.info("%s: a connection closed in the middle of batch %d partition %d (attempt %d); "
                     "its rows are discarded", self.name, attempt.batch, attempt.partition, attempt.attempt)
        if link in self.ingress.blocked:
            self.ingress.blocked.remove(link)


def _records(record_batch: Any, records: str) -> Any:
    if records == "arrow":
        return (record_batch,)
    if records == "dicts":
        return record_batch.to_pylist()
    return list(zip(*[column.to_pylist() for column in record_batch.columns], strict=True))


class ArrowIngress:
    """The aiotimely end of ``format("aiotimely")``: a source listening at ``address`` (on worker 0).

    ``records`` is ``"tuples"``, ``"dicts"`` or ``"arrow"`` (whole record batches). With
    ``tls`` (a :class:`~aiotimely.comm.tls.TLSConfig`; default ``AIOTIMELY_TLS_*``;
    ``False``: none) it accepts only TLS connections (:func:`register` ships the
    configuration to Spark's side), and logs a refusal naming any other.
    :meth:`stream` makes the source in a dataflow; :attr:`address` (once listening:
    :meth:`wait_listening` from any thread, ``await`` :meth:`listening` on the loop)
    is the ``host:port`` to give Spark (pass port 0 for a free one). :meth:`close`
    ends the stream; :attr:`statistics` counts epochs committed, rows, replays
    ignored, attempts discarded and epochs aborted.
    """

    def __init__(self, address: str = "127.0.0.1:0", *, secret: str | bytes | None = None,
                 records: str = "tuples", name: str = "SparkArrowIngress", tls: TLSOption = None) -> None:
        if records not in RECORDS:
            raise ValueError(f"records must be one of {RECORDS}, not {records!r}")
        self._key = _secret(secret)
        self.tls = resolve(tls)
        """The TLS configuration, or ``None`` for plain TCP."""
        self._tls_context = self.tls.server_context() if self.tls is not None else None
        self._host, self._port = parse_address(address)
        self.records = records
        self.name = name
        self._state = _Ingress(name)
        self.statistics = self._state.statistics
        self.address: str | None = None
        """The ``host:port`` listened on, once listening."""
        self._listening = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[str] | None = None
        self._workers: set[int] = set()
        self._close_requested = False

    def stream(self, scope: Scope[Stream]) -> Stream:
        """The stream of what Spark commits, each epoch's rows at time ``batchId``; worker 0 listens."""
        worker = scope.worker
        if worker.index in self._workers:
            raise RuntimeError(f"{self.name}: an ArrowIngress feeds one stream (on each worker); make one per "
                               "dataflow")
        if scope.dataflow.snapshotter is not None:
            raise RecoveryError(
                f"the Spark ingress {self.name!r} cannot be in a recoverable dataflow yet: Spark counts an epoch "
                "delivered once its commit is acknowledged, before a snapshot keeps its rows, so a crash would "
                "lose them; build this dataflow without recovery")
        self._workers.add(worker.index)
        state, records = self._state, self.records

        async def logic(output: OperatorOutput, cap: Capability) -> None:
            if worker.index != 0:
                cap.drop()
                return
            loop = asyncio.get_running_loop()
            self._loop = loop
            server = await serve(
                lambda: Link(Acceptor(self._key, 2, 0, allowed=lambda i: True), _Connection(state)),
                self._host, self._port, self._tls_context, name=self.name, log=log)
            try:
                host, port = server.sockets[0].getsockname()[:2]
                self.address = f"{host}:{port}"
                self._listening.set()
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(self.address)
                if self._close_requested:
                    state.end()
                while (item := await state.next_release()) is not None:
                    batch, attempts = item
                    with cap.delayed(batch) as at_batch:
                        given = 0
                        for attempt in attempts:
                            for record_batch in attempt.batches:
                                output.session(at_batch).give_many(_records(record_batch, records))
                                given += record_batch.num_rows
                                if given >= YIELD_EVERY:
                                    given = 0
                                    await asyncio.sleep(0)  # let the dataflow take what was given
                    cap.downgrade(batch + 1)
                    state.handed_in()
            finally:
                server.close()
                state.end()
                for link in state.blocked:
                    _reply(link, "error", "the ingress stopped")
                state.blocked.clear()
            cap.drop()

        return source(scope, self.name, logic)

    def wait_listening(self, timeout: float | None = None) -> str:
        """Block until the ingress listens; its ``host:port``. (From a thread other than the worker's.)"""
        if not self._listening.wait(timeout):
            raise TimeoutError(f"{self.name} is not listening after {timeout} s")
        assert self.address is not None
        return self.address

    async def listening(self) -> str:
        """Wait (on the worker's event loop) until the ingress listens; its ``host:port``."""
        if self.address is not None:
            return self.address
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
        return await self._ready

    def close(self) -> None:
        """End the stream (from any thread): every epoch committed so far enters, then the stream completes;
        what is staged and not committed is discarded, and Spark's later writes are refused."""
        self._close_requested = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._state.end)
            except RuntimeError:  # the loop closed meanwhile: the stream is over anyway
                pass
