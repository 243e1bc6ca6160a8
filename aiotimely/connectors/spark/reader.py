"""Spark's side of ``spark.readStream.format("aiotimely")``: the ``DataSourceStreamReader`` of a publisher.

Spark's offsets are aiotimely times (:mod:`.records`): ``latestOffset`` asks the
publisher (:mod:`.publisher`) for its frontier, ``read`` (on the executors) fetches
the records of the times in ``[start, end)`` — all complete, so a micro-batch never
holds part of a time — and ``commit(end)`` lets the publisher forget the times
before ``end``. The data source of :mod:`.datasource` returns this reader from its
``streamReader``.

pyspark is imported only when the reader is first made (the ``[spark]`` extra):
``AiotimelyStreamReader`` is an attribute of this module made on first access.
"""

from __future__ import annotations

import importlib
import logging
import socket
import ssl
import time as _time
from typing import Any, Iterator, Mapping, Sequence

from ...comm.framing import Frame
from ...comm.handshake import HandshakeError
from ...comm.link import parse_address
from ...comm.tls import TLSConfig, TLSOption, connect_blocking, resolve
from ...errors import ClusterError
from .records import ARROW, ROWS, arrow_chunk, as_offset, pack, parse_offset, unpack
from .session import spark_classes
from .wire import CONTROL, WireClient, client_context, ship_secret, tls_refusal

__all__ = ["stream_reader"]

log = logging.getLogger("aiotimely.connectors.spark_reader")  # named as before the package


class _Broken(ClusterError):
    """The connection to the publisher closed or timed out."""


class _Client(WireClient):
    """A blocking authenticated connection to a publisher (from Spark's driver or an executor); it keeps trying
    to reach the publisher for ``connect_timeout`` seconds (the dataflow may still be starting)."""

    _needs_secret = "the aiotimely Spark reader"
    _pack = staticmethod(pack)
    _unpack = staticmethod(unpack)

    def __init__(self, address: str, secret: str | bytes | None, timeout: float, connect_timeout: float,
                 tls: TLSConfig | None = None) -> None:
        self.connect_timeout = connect_timeout
        super().__init__(address, secret, timeout, client_context(tls))

    def _dial(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None) -> socket.socket:
        deadline = _time.monotonic() + self.connect_timeout
        delay = 0.05
        while True:
            try:
                return connect_blocking(host, port, timeout, tls)
            except OSError as e:
                if _time.monotonic() + delay > deadline:
                    raise ClusterError(f"no aiotimely publisher answers at {self.address} (after "
                                       f"{self.connect_timeout:g} s: {e})") from None
                _time.sleep(delay)
                delay = min(2 * delay, 1.0)

    def _refused(self, error: BaseException, over_tls: bool) -> Exception:
        if over_tls and not isinstance(error, HandshakeError):
            return tls_refusal(f"the aiotimely publisher at {self.address}", "this reader", error)
        return ClusterError(f"the aiotimely publisher at {self.address} refused this reader: the handshake failed "
                            f"({error}); is the secret the same on both sides?")

    def _receive(self) -> bytes:
        try:
            return self._sock.recv(1 << 20)
        except socket.timeout:
            raise self._lost("did not answer in time") from None

    def _lost(self, what: str) -> ClusterError:
        return _Broken(f"the aiotimely publisher at {self.address} {what}")

    def _control(self, frame: Frame) -> list[Any]:
        message = unpack(frame.payload)
        if not isinstance(message, list) or not message:
            raise ClusterError(f"the aiotimely publisher at {self.address} sent a malformed reply")
        if message[0] == "error":
            raise ClusterError(f"the aiotimely publisher at {self.address}: {message[1]}")
        return message

    def ask(self, *message: Any) -> list[Any]:
        """Send a request; return the publisher's reply, raising the error it sent."""
        self.send(*message)
        frame = self._next_frame()
        if frame.channel != CONTROL:
            raise ClusterError(f"the aiotimely publisher at {self.address} sent records unasked")
        return self._control(frame)

    def read(self, start: int, end: int, index: int, count: int) -> Iterator[tuple[int, list[Any]]]:
        """The chunks of partition ``index`` of ``count`` of the times in ``[start, end)``: ``(time, records)``."""
        self.send("read", start, end, index, count)
        chunks = 0
        while True:
            frame = self._next_frame()
            if frame.channel == ROWS:
                time, records = unpack(frame.payload)
                chunks += 1
                yield time, records
                continue
            if frame.channel == ARROW:                  # a columnar chunk: (time, a pyarrow Table)
                chunks += 1
                yield arrow_chunk(frame.payload)
                continue
            reply = self._control(frame)
            if reply[0] != "end" or reply[1] != chunks:
                raise ClusterError(f"the aiotimely publisher at {self.address} ended a read oddly: {reply!r}")
            return


class _ReaderLogic:
    """``DataSourceStreamReader``'s methods (and ``SupportsTriggerAvailableNow``'s).

    Options: ``address`` (required), ``secret`` (else the one registered, else
    ``AIOTIMELY_SECRET``), ``timeColumn`` (a field of the schema that receives each
    record's aiotimely time; the record gives the others), ``numPartitions`` (Spark
    tasks per micro-batch, default 1: the chunks of a batch are dealt among them),
    ``timeout`` (seconds a reply may take, default 60), ``connectTimeout`` (seconds to
    keep trying to reach the publisher, default 30), ``untilEnd`` (``"true"``: with
    ``trigger(availableNow=True)``, read until the end of the stream — the final
    offset — waiting for it, rather than what is complete when the query starts).
    """

    def __init__(self, options: Mapping[str, str], schema: Any, default_secret: str | bytes | None = None,
                 tls: TLSOption = None) -> None:
        if options.get("address") is None:
            raise ValueError('the aiotimely reader needs .option("address", "host:port") of a publish_to_spark sink')
        self.address = str(options["address"])
        parse_address(self.address)
        secret = options.get("secret")
        self.secret: str | bytes | None = secret if secret is not None else ship_secret(default_secret)
        self.timeout = float(options.get("timeout", "60"))
        self.tls = resolve(tls)
        self.connect_timeout = float(options.get("connectTimeout", "30"))
        self.partition_count = int(options.get("numPartitions", "1"))
        if self.partition_count < 1:
            raise ValueError(f"numPartitions must be at least 1, not {self.partition_count}")
        self.schema = schema
        self.fields: list[str] = list(schema.fieldNames() if hasattr(schema, "fieldNames") else schema)
        time_column = options.get("timeColumn")
        self.time_column: str | None = None if time_column is None else str(time_column)
        if self.time_column is not None and self.time_column not in self.fields:
            raise ValueError(f"timeColumn {self.time_column!r} is not a field of the schema {self.fields}")
        self._client: _Client | None = None
        self.until_end = str(options.get("untilEnd", "false")).lower() == "true"
        self._target: dict[str, Any] | None = None
        self._wait_for_news = False
        self._final_committed = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        return state

    # -- the driver's connection

    def _connect(self) -> _Client:
        return _Client(self.address, self.secret, self.timeout, self.connect_timeout, self.tls)

    def _ask(self, *message: Any, retry: bool = True) -> list[Any]:
        """A request on the driver's connection (every request is idempotent: one made again on a new
        connection, when the one kept from an earlier call has broken, does no harm)."""
        reused = self._client is not None
        if self._client is None:
            self._client = _Client(self.address, self.secret, self.timeout, self.connect_timeout if retry else 0.0,
                                   self.tls)
        try:
            return self._client.ask(*message)
        except (OSError, ClusterError) as e:
            self._client.close()
            self._client = None
            if not reused or not isinstance(e, (OSError, _Broken)):
                raise
        return self._ask(*message, retry=retry)       # once more, on a new connection

    def _commit(self, time: int, final: bool) -> None:
        if not final:
            self._ask("commit", time, False)
            return
        if self._final_committed:
            return
        self._final_committed = True
        try:                    # after the end the publisher may be gone: it completes once it hears this
            self._ask("commit", time, True, retry=False)
        except (OSError, ClusterError) as e:
            log.debug("the final commit did not reach %s (it has already completed?): %s", self.address, e)

    def _latest(self) -> dict[str, Any]:
        reply = self._ask("offset")
        return as_offset(int(reply[1]), bool(reply[2]))

    def _news(self, start_time: int) -> dict[str, Any]:
        """The latest offset, once it is past ``start_time`` or final (``untilEnd``: an offset equal to the
        start would end an availableNow query)."""
        delay = 0.02
        while True:
            latest = self._latest()
            if latest["time"] > start_time or latest.get("final"):
                return latest
            _time.sleep(delay)
            delay = min(2 * delay, 0.5)

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        return {"time": int(self._ask("hello")[1])}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:  # noqa: N802
        if start is None:       # the old signature: no admission control
            return self._target if self._target is not None else self._latest()
        start_time, start_final = parse_offset(start)
        if start_final:         # after the end nothing comes: and Spark only asks once it has committed `start`
            self._commit(start_time, True)
            return dict(start)
        self._commit(start_time, False)     # Spark asks once the batch that ended at `start` is committed
        if self._target is not None:
            latest = self._target
        elif self._wait_for_news:
            latest = self._news(start_time)
        else:
            latest = self._latest()
        if parse_offset(latest)[0] < start_time:
            raise ClusterError(f"the aiotimely publisher at {self.address} is at {latest}, before this query's "
                               f"offset {start}: is it the same dataflow?")
        return latest

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        if self.until_end:
            self._wait_for_news = True      # the query ends at the final offset, however long it takes
        else:
            self._target = self._latest()   # the query ends at what is complete now

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        start_time, end_time = parse_offset(start)[0], parse_offset(end)[0]
        if end_time <= start_time:
            return []
        partition = importlib.import_module("pyspark.sql.datasource").InputPartition
        n = self.partition_count
        return [partition((start_time, end_time, i, n)) for i in range(n)]

    def read(self, partition: Any) -> Iterator[Any]:
        start, end, index, count = partition.value
        with self._connect() as client:
            row = self._row
            for time, records in client.read(start, end, index, count):
                if isinstance(records, list):
                    for record in records:
                        yield row(time, record)
                else:                                   # a columnar publisher's chunk: record batches for Spark
                    yield from self._record_batches(time, records)

    def _record_batches(self, time: int, table: Any) -> Iterator[Any]:
        """A columnar chunk (a pyarrow ``Table``) at ``time`` as record batches of the query's Arrow schema: the
        fields by name (``timeColumn`` gets the time), each cast to Spark's type, in one call per column."""
        import pyarrow as pa
        import pyarrow.compute as pc

        target = self._arrow_schema()
        n = table.num_rows
        columns = []
        for field in target:
            if field.name == self.time_column:
                columns.append(pc.fill_null(pa.nulls(n, field.type), pa.scalar(time, field.type)))
                continue
            if field.name not in table.column_names:
                raise ValueError(f"a columnar chunk at time {time} has no column {field.name!r} of the schema "
                                 f"{self.fields}: its columns are {table.column_names}")
            column = table.column(field.name)
            columns.append(column if column.type == field.type else column.cast(field.type))
        out = pa.Table.from_arrays(columns, schema=target)
        yield from out.to_batches()

    def _arrow_schema(self) -> Any:
        """The Arrow schema Spark expects of a record batch ``read`` yields (as its Python data source has it)."""
        schema = self.__dict__.get("_arrow")
        if schema is None:
            to_arrow_schema = importlib.import_module("pyspark.sql.pandas.types").to_arrow_schema
            schema = self._arrow = to_arrow_schema(self.schema, timezone="UTC")
        return schema

    def _row(self, time: int, record: Any) -> tuple[Any, ...]:
        fields, column = self.fields, self.time_column
        if isinstance(record, dict):
            if column is None:
                return tuple(record.get(f) for f in fields)
            return tuple(time if f == column else record.get(f) for f in fields)
        values = list(record) if isinstance(record, (list, tuple)) else [record]
        if column is not None:
            values.insert(fields.index(column), time)
        if len(values) != len(fields):
            raise ValueError(f"a record at time {time} has {len(values)} fields with its time column, the schema "
                             f"{len(fields)} ({', '.join(fields)}): {record!r:.200}")
        return tuple(values)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit(*parse_offset(end))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


_SPARK_CLASSES = ("AiotimelyStreamReader",)


def _bases() -> dict[str, tuple[type, ...]]:
    datasource = importlib.import_module("pyspark.sql.datasource")
    streaming = importlib.import_module("pyspark.sql.streaming.datasource")
    return {"AiotimelyStreamReader": (_ReaderLogic, datasource.DataSourceStreamReader,
                                      streaming.SupportsTriggerAvailableNow)}


_spark_class = __getattr__ = spark_classes(globals(), _SPARK_CLASSES, _bases)


def stream_reader(options: Mapping[str, str], schema: Any, *, secret: str | bytes | None = None,
                  tls: TLSOption = None) -> Any:
    """The ``DataSourceStreamReader`` for a query's ``options`` and ``schema`` (a ``StructType``): what a
    ``DataSource.streamReader(schema)`` returns. ``secret`` is the default when the options give none;
    ``tls`` as for :func:`publish_to_spark` (default ``AIOTIMELY_TLS_*``)."""
    return _spark_class("AiotimelyStreamReader")(options, schema, secret, tls)
