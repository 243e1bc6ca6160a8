"""aiotimely -> Spark Structured Streaming: Spark reads what a dataflow publishes, one complete time at a time.

On the aiotimely side, :func:`publish_to_spark` is a sink (on worker 0: records are
exchanged there) that keeps the records of every time and serves them, over the
cluster's authenticated link (the shared-secret handshake of
:mod:`aiotimely.comm.handshake`, then frames), only once the time is *complete*:
once its input frontier has passed it. On the Spark side (PySpark 4, the Python
Data Source API) a ``DataSourceStreamReader`` reads them::

    (spark.readStream.format("aiotimely")      # after spark_datasource.register(spark, secret=...)
     .option("address", "127.0.0.1:7000").schema("key STRING, total LONG").load())

Spark's offsets are aiotimely times: an offset ``{"time": t}`` says "every time
before ``t``", the frontier as of that micro-batch. ``latestOffset`` asks the
publisher for its frontier, ``read`` (on the executors) fetches the records of the
times in ``[start, end)`` — all complete, so a micro-batch never holds part of a
time — and ``commit(end)`` lets the publisher forget the times before ``end``.

Memory and back-pressure: the publisher holds what Spark has not committed. Once it
holds ``max_pending`` records or more, and some of them are complete (so that a
Spark commit can free them), it stops taking input until Spark commits: its
input's mailbox fills, and the operators feeding it stop, back to the sources. It
cannot wait while every record it holds is at a time not yet complete (waiting
could free nothing, and what completes those times may be queued behind what it
would refuse): then it takes one batch per worker round, so that the frontier can
say what completed. What it holds is at most ``max_pending``, plus one batch, plus
the records at times not yet complete.

The end: once the input is done (its frontier is empty) the publisher reports a
*final* offset, ``{"time": t, "final": true}``, past every time it published. A
query reads it like any other (with ``trigger(availableNow=True)`` the query then
ends), and the publisher's operator completes once Spark has committed it — or
fails, after ``end_timeout`` seconds, with an error saying what Spark has not
read. The stream returned by :func:`publish_to_spark` carries the records on, and
its frontier stays at the earliest time Spark has not committed: a probe on it
says what Spark has.

pyspark is imported only when the Spark-side classes are first used (the
``[spark]`` extra): ``AiotimelyStreamReader`` and ``AiotimelyReaderDataSource``
are attributes of this module made on first access. Records cross as msgpack
(with ``datetime``, ``date`` and ``Decimal`` values); a record is a tuple (the
schema's fields in order) or a dict (by field name).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as _dt
import decimal
import importlib
import logging
import os
import socket
import time as _time
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, Mapping, Sequence

import msgpack
from sortedcontainers import SortedDict

from ..comm.framing import MAX_FRAME, Frame, FrameDecoder, Kind, encode_frame
from ..comm.handshake import Acceptor, Dialer, HandshakeError, shared_secret
from ..comm.link import HANDSHAKE_MAX_FRAME, Link, LinkHandler, parse_address
from ..comm.tls import TLSConfig, TLSError, TLSOption, connect_blocking, resolve, serve
from ..errors import ClusterError, RecoveryError
from .spark import control_message, spark_class

if TYPE_CHECKING:
    from ..dataflow import Capability, InputPort, OperatorOutput
    from ..progress.frontier import Antichain
    from ..stream import Stream

__all__ = ["publish_to_spark", "stream_reader", "DEFAULT_MAX_PENDING",
           "DEFAULT_END_TIMEOUT"]

log = logging.getLogger("aiotimely.connectors.spark_reader")

DEFAULT_MAX_PENDING = 100_000
"""Records the publisher holds for Spark before it stops taking input (see the module's docstring)."""
DEFAULT_END_TIMEOUT = 300.0
"""Seconds the publisher waits, once its input is done, for Spark to commit everything."""

CONTROL, ROWS = 0, 1
"""A DATA frame's ``channel``: a msgpack message, or ``[time, [record, ...]]`` (one chunk of one time)."""
CHUNK = 4096
"""Records per chunk: the unit the publisher keeps, sends in one frame, and splits among Spark's partitions."""

_DATETIME, _DATE, _DECIMAL = 1, 2, 3


def _default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return msgpack.ExtType(_DATETIME, value.isoformat().encode())
    if isinstance(value, _dt.date):
        return msgpack.ExtType(_DATE, value.isoformat().encode())
    if isinstance(value, decimal.Decimal):
        return msgpack.ExtType(_DECIMAL, str(value).encode())
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"a {type(value).__name__} cannot be sent to Spark: {value!r:.100}")


def _ext_hook(code: int, data: bytes) -> Any:
    text = data.decode()
    if code == _DATETIME:
        return _dt.datetime.fromisoformat(text)
    if code == _DATE:
        return _dt.date.fromisoformat(text)
    if code == _DECIMAL:
        return decimal.Decimal(text)
    return msgpack.ExtType(code, data)


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, ext_hook=_ext_hook)


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "the aiotimely Spark reader")


def _offset(offset: Mapping[str, Any]) -> tuple[int, bool]:
    try:
        return int(offset["time"]), bool(offset.get("final", False))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{offset!r} is not an offset of the aiotimely reader") from None


def _as_offset(time: int, final: bool) -> dict[str, Any]:
    return {"time": time, "final": True} if final else {"time": time}


# -- the aiotimely side: the publisher -----------------------------------------------------------


class _Refused(Exception):
    """A well-formed request the publisher cannot honour: the reader is told why (and raises it)."""


class _Published:
    """The publisher's state, shared by its operator and its connections (all on the worker's event loop).

    ``times`` maps each time held to its chunks ``(records, packed bytes)``. Every time before
    ``complete`` is complete; every time before ``base`` was committed by Spark and forgotten.
    """

    def __init__(self, name: str, max_pending: int, statistics: dict[str, Any] | None) -> None:
        self.name = name
        self.max_pending = max_pending
        self.times: Any = SortedDict()
        self.held = 0
        self.complete_rows = 0
        self.base = 0
        self.complete = 0
        self.max_time: int | None = None
        self.final = False
        self.final_committed = False
        self.address = "?"
        self.changed = asyncio.Event()
        self.wake: Callable[[], None] = lambda: None   # activates the operator
        self.reads = 0
        self.rows_served = 0
        self.waits = 0
        self.peak_held = 0
        self.statistics = statistics
        self._update()

    def _update(self) -> None:
        if self.statistics is not None:
            self.statistics.update(
                address=self.address, held=self.held, peak_held=self.peak_held, complete=self.complete,
                committed=self.base, final=self.final, final_committed=self.final_committed, reads=self.reads,
                rows_served=self.rows_served, waits=self.waits, max_pending=self.max_pending)

    def _time(self, time: Any, what: str) -> int:
        if type(time) is not int:
            raise TypeError(f"{self.name}: Spark's offsets are integer times, and this stream has {what} "
                            f"{time!r} (a {type(time).__name__}); publish a stream with int times")
        return time

    def start(self, frontier: Antichain[Any]) -> None:
        times = [self._time(t, "the time") for t in frontier]
        self.base = self.complete = min(times) if times else 0
        self._update()

    def add(self, time: Any, batch: list[Any]) -> None:
        time = self._time(time, "the time")
        chunks = self.times.get(time)
        if chunks is None:
            chunks = self.times[time] = []
        for i in range(0, len(batch), CHUNK):
            chunk = batch[i:i + CHUNK]
            chunks.append((len(chunk), _pack(chunk)))
        self.held += len(batch)
        self.peak_held = max(self.peak_held, self.held)
        if self.max_time is None or time > self.max_time:
            self.max_time = time

    def _rows(self, start: int, end: int) -> int:
        return sum(n for t in self.times.irange(start, end, inclusive=(True, False)) for n, _ in self.times[t])

    def advance(self, frontier: Antichain[Any]) -> None:
        """The input's frontier as of this activation: the times before its element are complete."""
        times = [self._time(t, "the frontier") for t in frontier]
        if times and min(times) > self.complete:
            low = min(times)
            self.complete_rows += self._rows(self.complete, low)
            self.complete = low
        self._update()

    def finish(self) -> None:
        """The input is done: every time is complete, and the offset past the last one is final."""
        if self.max_time is not None:
            self.complete = max(self.complete, self.max_time + 1)
        self.complete_rows = self.held
        self.final = True
        self._update()
        log.info("%s: the stream ended; Spark's final offset is %s (%d records wait for Spark)",
                 self.name, _as_offset(self.complete, True), self.held)

    def offset(self) -> list[Any]:
        return [self.complete, self.final]

    def commit(self, time: int, final: bool) -> None:
        if time > self.complete:
            raise _Refused(f"{self.name} cannot take a commit of time {time}: only the times before "
                           f"{self.complete} are complete (is this the query's publisher?)")
        if time > self.base:
            for t in list(self.times.irange(self.base, time, inclusive=(True, False))):
                freed = sum(n for n, _ in self.times.pop(t))
                self.held -= freed
                self.complete_rows -= freed
            self.base = time
            log.debug("%s: Spark committed the times before %d; %d records held", self.name, time, self.held)
        if final and self.final and time == self.complete and not self.final_committed:
            self.final_committed = True
            log.info("%s: Spark committed the final offset: it has read everything", self.name)
        self._update()
        self.changed.set()
        self.wake()

    def chunks(self, start: int, end: int, index: int, count: int) -> list[tuple[int, bytes]]:
        """The frames' payloads of partition ``index`` of ``count`` of the times in ``[start, end)``."""
        if start < self.base:
            raise _Refused(f"{self.name} no longer holds the times before {self.base}: Spark committed them "
                           f"(a read from {start}: two queries reading one publisher?)")
        if end > self.complete:
            raise _Refused(f"{self.name} cannot serve times up to {end}: only the times before "
                           f"{self.complete} are complete")
        if not 0 <= index < count:
            raise _Refused(f"partition {index} of {count}?")
        payloads = []
        k = 0
        for t in self.times.irange(start, end, inclusive=(True, False)):
            head = b"\x92" + _pack(t)                      # [time, records]: a 2-array, then the packed chunk
            for n, packed in self.times[t]:
                if k % count == index:
                    payloads.append((n, head + packed))
                k += 1
        self.reads += 1
        return payloads

    def timeout_message(self, seconds: float) -> str:
        first = self.times.keys()[0] if self.times else self.base
        return (f"{self.name}: the stream ended {seconds:g} s ago and Spark has not read and committed all of it: "
                f"it committed the times before {self.base}; {self.held} records at times {first}.."
                f"{self.complete - 1} wait, and the final offset is {_as_offset(self.complete, True)}. Is a Spark "
                f"query reading from {self.address} (with the same secret)? (end_timeout=None waits for ever)")


def _reply(link: Link, *message: Any) -> None:
    link.send(encode_frame(Kind.DATA, _pack(list(message)), channel=CONTROL))


class _Connection(LinkHandler):
    """One reader's connection: requests and their replies; a read streams its chunks from a helper task."""

    log = log

    def __init__(self, state: _Published, links: set[Link],
                 spawn: Callable[[Coroutine[Any, Any, Any], str], Any]) -> None:
        self.state = state
        self.name = state.name
        self.links = links
        self.spawn = spawn

    def link_established(self, link: Link) -> None:
        self.links.add(link)

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        self.links.discard(link)

    def frame_received(self, link: Link, frame: Frame) -> None:
        state = self.state
        try:
            message = control_message(frame)
            kind = message[0]
            try:
                if kind == "hello":
                    _reply(link, "ok", state.base)
                elif kind == "offset":
                    _reply(link, "ok", *state.offset())
                elif kind == "commit":
                    state.commit(int(message[1]), bool(message[2]))
                    _reply(link, "ok")
                elif kind == "read":
                    start, end, index, count = (int(v) for v in message[1:5])
                    payloads = state.chunks(start, end, index, count)
                    self.spawn(self._send(link, payloads), f"{state.name}: serving a read of [{start}, {end})")
                else:
                    raise ValueError(f"unknown request {kind!r}")
            except _Refused as e:
                log.warning("%s: refused a reader's %r: %s", state.name, kind, e)
                _reply(link, "error", str(e))
        except (ValueError, TypeError, IndexError) as e:
            link.reject(str(e))

    async def _send(self, link: Link, payloads: list[tuple[int, bytes]]) -> None:
        """The chunks, then ``end``; waits while the connection's write buffer is full (a slow reader)."""
        for _, payload in payloads:
            if link.congested():
                await asyncio.shield(link.writable)
            if link.closed.done():
                return
            link.send(encode_frame(Kind.DATA, payload, channel=ROWS))
        self.state.rows_served += sum(n for n, _ in payloads)
        self.state._update()
        _reply(link, "end", len(payloads))


def _announce(ready: asyncio.Future[str] | concurrent.futures.Future[str] | None, where: str) -> None:
    if ready is not None and not ready.done():
        ready.set_result(where)


def publish_to_spark(
    stream: Stream,
    address: str = "127.0.0.1:0",
    *,
    secret: str | bytes | None = None,
    ready: asyncio.Future[str] | concurrent.futures.Future[str] | None = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    end_timeout: float | None = DEFAULT_END_TIMEOUT,
    statistics: dict[str, Any] | None = None,
    name: str = "SparkPublisher",
    tls: TLSOption = None,
) -> Stream:
    """Serve the records of ``stream`` to Spark, each time once it is complete (on worker 0, at ``address``).

    Spark reads them with the ``aiotimely`` data source (:func:`aiotimely.connectors.spark_datasource.register`,
    ``.option("address", ...)``). Readers authenticate with ``secret`` (else
    ``AIOTIMELY_SECRET``). ``ready`` (an asyncio or a ``concurrent.futures`` future) is
    given the ``host:port`` listened on (port 0: a free one). The times must be ints.

    At most about ``max_pending`` records wait for Spark before the sink stops taking
    input (back-pressure; see the module's docstring for the exact bound). Once the
    input is done, the operator completes when Spark has committed the final offset,
    or fails after ``end_timeout`` seconds (``None``: waits for ever), saying what
    Spark has not read. ``statistics`` (a dict) is kept up to date: ``held``,
    ``peak_held``, ``complete``, ``committed``, ``final``, ``final_committed``,
    ``reads``, ``rows_served``, ``waits`` (times the sink stopped for Spark), ``address``.

    Returns the records, passed on (on worker 0) at their times; the returned stream's
    frontier stays at the earliest time Spark has not committed. With ``tls`` (a
    :class:`~aiotimely.comm.tls.TLSConfig`; default ``AIOTIMELY_TLS_*``; ``False``: none)
    only TLS readers are served (``spark_datasource.register(spark, tls=...)``).
    """
    if stream.scope.dataflow.snapshotter is not None:
        raise RecoveryError(
            f"the Spark publisher {name!r} cannot be in a recoverable dataflow yet: the records Spark has not "
            "committed are not in the snapshots, so a resumed dataflow would not serve the times before its "
            "snapshot again; build this dataflow without recovery")
    key = _secret(secret)
    config = resolve(tls)
    context = config.server_context() if config is not None else None
    host, port = parse_address(address)
    if max_pending < 1:
        raise ValueError(f"max_pending must be at least 1, not {max_pending}")
    worker = stream.scope.worker

    async def logic(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        if worker.index != 0:                       # every record is exchanged to worker 0
            cap.drop()
            async for _ in input.activations():
                for time, batch in input.drain():
                    output.session(time).give_many(batch)
            return
        state = _Published(name, max_pending, statistics)
        state.start(input.frontier)
        links: set[Link] = set()
        state.wake = output.activator().activate   # a commit moves the output's frontier

        def spawn(coro: Coroutine[Any, Any, Any], what: str) -> Any:
            return input.start_soon(coro, name=what)

        def hold() -> None:                         # the output's frontier: the earliest time not committed
            if state.base > cap.time:
                cap.downgrade(state.base)

        loop = asyncio.get_running_loop()
        server = await serve(
            lambda: Link(Acceptor(key, 2, 0, allowed=lambda i: i == 1), _Connection(state, links, spawn)),
            host, port, context, name=name, log=log)
        try:
            listening = server.sockets[0].getsockname()
            state.address = f"{listening[0]}:{listening[1]}"
            state._update()
            _announce(ready, state.address)
            async for _ in input.activations():
                took = False
                while True:                         # batch by batch, within the bound
                    state.advance(input.frontier)
                    hold()
                    if state.held >= max_pending:
                        if state.complete_rows:     # back-pressure: take nothing more until Spark commits
                            state.waits += 1
                            state._update()
                            state.changed.clear()
                            await state.changed.wait()
                            continue
                        if took:                    # what was taken may be complete: let the frontier say so
                            await asyncio.sleep(0)  # (a bare yield: the operator runs again next round)
                            took = False
                            continue
                    taken = input.next()
                    if taken is None:
                        break
                    time, batch = taken
                    state.add(time.time, batch)
                    output.session(time).give_many(batch)
                    took = True
            state.finish()
            deadline = None if end_timeout is None else loop.time() + end_timeout
            while not state.final_committed:
                state.changed.clear()
                if deadline is None:
                    await state.changed.wait()
                else:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise ClusterError(state.timeout_message(end_timeout))  # type: ignore[arg-type]
                    try:
                        await asyncio.wait_for(state.changed.wait(), remaining)
                    except TimeoutError:
                        pass
                hold()
        finally:
            server.close()
            for link in list(links):
                if link.transport is not None:
                    link.transport.close()          # what was written (a last reply) still goes out
            state._update()

    result: Stream = stream.unary_frontier(logic, exchange=lambda record: 0, name=name)
    return result


# -- the Spark side: the reader ------------------------------------------------------------------


class _Broken(ClusterError):
    """The connection to the publisher closed or timed out."""


class _Client:
    """A blocking authenticated connection to a publisher (from Spark's driver or an executor)."""

    def __init__(self, address: str, secret: str | bytes | None, timeout: float, connect_timeout: float,
                 tls: TLSConfig | None = None) -> None:
        self.address = address
        host, port = parse_address(address)
        context = tls.client_context() if tls is not None else None
        deadline = _time.monotonic() + connect_timeout
        delay = 0.05
        while True:                                 # the dataflow may still be starting
            try:
                self._sock = connect_blocking(host, port, timeout, context)
                break
            except OSError as e:
                if _time.monotonic() + delay > deadline:
                    raise ClusterError(f"no aiotimely publisher answers at {address} (after {connect_timeout:g} s: "
                                       f"{e})") from None
                _time.sleep(delay)
                delay = min(2 * delay, 1.0)
        self._decoder = FrameDecoder(HANDSHAKE_MAX_FRAME)
        try:
            dialer = Dialer(_secret(secret), 2, 1, expect=0)
            self._sock.sendall(dialer.start())
            while not dialer.done:
                reply = dialer.receive(self._next_frame())
                if reply:
                    self._sock.sendall(reply)
        except (HandshakeError, ClusterError, OSError) as e:
            self.close()
            if context is not None and not isinstance(e, HandshakeError):
                raise TLSError(f"the aiotimely publisher at {address} closed the connection during the handshake, "
                               "over TLS: most likely it does not trust this reader's certificate (its log says "
                               f"which): {e}") from None
            raise ClusterError(f"the aiotimely publisher at {address} refused this reader: the handshake failed "
                               f"({e}); is the secret the same on both sides?") from None
        self._decoder.limit(MAX_FRAME)

    def _next_frame(self) -> Frame:
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            try:
                data = self._sock.recv(1 << 20)
            except socket.timeout:
                raise _Broken(f"the aiotimely publisher at {self.address} did not answer in time") from None
            if not data:
                raise _Broken(f"the aiotimely publisher at {self.address} closed the connection")
            self._decoder.append(data)

    def _control(self, frame: Frame) -> list[Any]:
        message = _unpack(frame.payload)
        if not isinstance(message, list) or not message:
            raise ClusterError(f"the aiotimely publisher at {self.address} sent a malformed reply")
        if message[0] == "error":
            raise ClusterError(f"the aiotimely publisher at {self.address}: {message[1]}")
        return message

    def ask(self, *message: Any) -> list[Any]:
        """Send a request; return the publisher's reply, raising the error it sent."""
        self._sock.sendall(encode_frame(Kind.DATA, _pack(list(message)), channel=CONTROL))
        frame = self._next_frame()
        if frame.channel != CONTROL:
            raise ClusterError(f"the aiotimely publisher at {self.address} sent records unasked")
        return self._control(frame)

    def read(self, start: int, end: int, index: int, count: int) -> Iterator[tuple[int, list[Any]]]:
        """The chunks of partition ``index`` of ``count`` of the times in ``[start, end)``: ``(time, records)``."""
        self._sock.sendall(encode_frame(Kind.DATA, _pack(["read", start, end, index, count]), channel=CONTROL))
        chunks = 0
        while True:
            frame = self._next_frame()
            if frame.channel == ROWS:
                time, records = _unpack(frame.payload)
                chunks += 1
                yield time, records
                continue
            reply = self._control(frame)
            if reply[0] != "end" or reply[1] != chunks:
                raise ClusterError(f"the aiotimely publisher at {self.address} ended a read oddly: {reply!r}")
            return

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


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
        self.secret: str | bytes | None = secret if secret is not None else (
            default_secret if default_secret is not None else os.environ.get("AIOTIMELY_SECRET"))
        self.timeout = float(options.get("timeout", "60"))
        self.tls = resolve(tls)
        self.connect_timeout = float(options.get("connectTimeout", "30"))
        self.partition_count = int(options.get("numPartitions", "1"))
        if self.partition_count < 1:
            raise ValueError(f"numPartitions must be at least 1, not {self.partition_count}")
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
        return _as_offset(int(reply[1]), bool(reply[2]))

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
        start_time, start_final = _offset(start)
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
        if _offset(latest)[0] < start_time:
            raise ClusterError(f"the aiotimely publisher at {self.address} is at {latest}, before this query's "
                               f"offset {start}: is it the same dataflow?")
        return latest

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        if self.until_end:
            self._wait_for_news = True      # the query ends at the final offset, however long it takes
        else:
            self._target = self._latest()   # the query ends at what is complete now

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[Any]:
        start_time, end_time = _offset(start)[0], _offset(end)[0]
        if end_time <= start_time:
            return []
        partition = importlib.import_module("pyspark.sql.datasource").InputPartition
        n = self.partition_count
        return [partition((start_time, end_time, i, n)) for i in range(n)]

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        start, end, index, count = partition.value
        client = self._connect()
        try:
            row = self._row
            for time, records in client.read(start, end, index, count):
                for record in records:
                    yield row(time, record)
        finally:
            client.close()

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
        self._commit(*_offset(end))

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


def _spark_class(name: str) -> Any:
    return spark_class(globals(), name, _bases)


def __getattr__(name: str) -> Any:
    """The Spark-side classes, made (importing pyspark) on first access."""
    if name in _SPARK_CLASSES:
        return _spark_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stream_reader(options: Mapping[str, str], schema: Any, *, secret: str | bytes | None = None,
                  tls: TLSOption = None) -> Any:
    """The ``DataSourceStreamReader`` for a query's ``options`` and ``schema`` (a ``StructType``): what a
    ``DataSource.streamReader(schema)`` returns. ``secret`` is the default when the options give none;
    ``tls`` as for :func:`publish_to_spark` (default ``AIOTIMELY_TLS_*``)."""
    return _spark_class("AiotimelyStreamReader")(options, schema, secret, tls)
