"""aiotimely -> Spark Structured Streaming: Spark reads what a dataflow publishes, one complete time at a time.

On the aiotimely side, :func:`publish_to_spark` is a sink (on worker 0: records are
exchanged there) that keeps the records of every time and serves them, over the
cluster's authenticated link (the shared-secret handshake of
:mod:`aiotimely.comm.handshake`, then frames), only once the time is *complete*:
once its input frontier has passed it. On the Spark side (PySpark 4, the Python
Data Source API) a ``DataSourceStreamReader`` reads them::

    (spark.readStream.format("aiotimely")      # after spark.datasource.register(spark, secret=...)
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

This module is aiotimely's side; Spark's reader is :mod:`.reader`, and what the two
say to each other (records, offsets) is :mod:`.records`. It needs no pyspark.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from sortedcontainers import SortedDict

from ...comm.framing import Kind, encode_frame
from ...comm.link import Link
from ...comm.tls import TLSOption
from ...errors import ClusterError
from .records import ARROW, ARROW_CHUNK, ROWS, arrow_chunks, as_offset, pack
from .wire import Endpoint, WireConnection, refuse_recovery, reply

if TYPE_CHECKING:
    from ...columnar import ColumnarStream
    from ...dataflow import Capability, InputPort, OperatorOutput
    from ...progress.frontier import Antichain
    from ...stream import Stream

__all__ = ["publish_to_spark", "DEFAULT_MAX_PENDING", "DEFAULT_END_TIMEOUT"]

log = logging.getLogger("aiotimely.connectors.spark_reader")  # named as before the package

DEFAULT_MAX_PENDING = 100_000
"""Records the publisher holds for Spark before it stops taking input (see the module's docstring)."""
DEFAULT_END_TIMEOUT = 300.0
"""Seconds the publisher waits, once its input is done, for Spark to commit everything."""
CHUNK = 4096
"""Records per chunk: the unit the publisher keeps, sends in one frame, and splits among Spark's partitions."""


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
        self.columnar: bool | None = None
        """Whether the records are columnar batches (served as Arrow IPC), once the first batch came."""
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

    def add(self, time: Any, batch: Any) -> None:
        time = self._time(time, "the time")
        columnar = type(batch) is not list and hasattr(batch, "to_ipc")
        if self.columnar is None:
            self.columnar = columnar
        elif self.columnar != columnar:
            raise TypeError(f"{self.name}: a publisher serves records or columnar batches, not both: it got a "
                            f"{type(batch).__name__} after {'ArrowBatch' if self.columnar else 'list'} batches")
        chunks = self.times.get(time)
        if chunks is None:
            chunks = self.times[time] = []
        if columnar:
            chunks.extend(arrow_chunks(time, batch, ARROW_CHUNK))
        else:
            for i in range(0, len(batch), CHUNK):
                chunk = batch[i:i + CHUNK]
                chunks.append((len(chunk), pack(chunk)))
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
                 self.name, as_offset(self.complete, True), self.held)

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
            head = b"" if self.columnar else b"\x92" + pack(t)  # [time, records]: a 2-array, then the packed chunk
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
                f"{self.complete - 1} wait, and the final offset is {as_offset(self.complete, True)}. Is a Spark "
                f"query reading from {self.address} (with the same secret)? (end_timeout=None waits for ever)")


def _reply(link: Link, *message: Any) -> None:
    reply(link, *message, pack=pack)


class _Connection(WireConnection):
    """One reader's connection: requests and their replies; a read streams its chunks from a helper task."""

    def __init__(self, state: _Published, links: set[Link],
                 spawn: Callable[[Coroutine[Any, Any, Any], str], Any]) -> None:
        super().__init__(state.name, log)
        self.state = state
        self.links = links
        self.spawn = spawn

    def link_established(self, link: Link) -> None:
        self.links.add(link)

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        self.links.discard(link)

    def control(self, link: Link, message: tuple[Any, ...]) -> None:
        state = self.state
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
                channel = ARROW if state.columnar else ROWS
                self.spawn(self._send(link, payloads, channel), f"{state.name}: serving a read of [{start}, {end})")
            else:
                raise ValueError(f"unknown request {kind!r}")
        except _Refused as e:
            log.warning("%s: refused a reader's %r: %s", state.name, kind, e)
            _reply(link, "error", str(e))

    async def _send(self, link: Link, payloads: list[tuple[int, bytes]], channel: int) -> None:
        """The chunks, then ``end``; waits while the connection's write buffer is full (a slow reader)."""
        for _, payload in payloads:
            if link.congested():
                await asyncio.shield(link.writable)
            if link.closed.done():
                return
            link.send(encode_frame(Kind.DATA, payload, channel=channel))
        self.state.rows_served += sum(n for n, _ in payloads)
        self.state._update()
        _reply(link, "end", len(payloads))


def _announce(ready: asyncio.Future[str] | concurrent.futures.Future[str] | None, where: str) -> None:
    if ready is not None and not ready.done():
        ready.set_result(where)


def publish_to_spark(
    stream: Stream | ColumnarStream,
    address: str = "127.0.0.1:0",
    *,
    secret: str | bytes | None = None,
    ready: asyncio.Future[str] | concurrent.futures.Future[str] | None = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    end_timeout: float | None = DEFAULT_END_TIMEOUT,
    statistics: dict[str, Any] | None = None,
    name: str = "SparkPublisher",
    tls: TLSOption = None,
) -> Any:
    """Serve the records of ``stream`` to Spark, each time once it is complete (on worker 0, at ``address``).

    Spark reads them with the ``aiotimely`` data source (:func:`aiotimely.connectors.spark.datasource.register`,
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
    only TLS readers are served (``spark.datasource.register(spark, tls=...)``).

    A columnar stream (:class:`~aiotimely.columnar.ColumnarStream`) is served as Arrow: its batches are kept as
    Arrow IPC chunks and Spark's reader hands them to Spark as record batches (cast to the query's schema), with
    no step per row on either side; the stream returned is then columnar too.
    """
    columns: Any = _RECORDS
    records: Stream = stream  # type: ignore[assignment]
    if type(stream).__name__ == "ColumnarStream" and hasattr(stream, "schema"):
        columns, records = stream.schema, getattr(stream, "stream")  # noqa: B009 - any ColumnarStream
    stream = records
    refuse_recovery(records.scope, f"the Spark publisher {name!r}", "the records Spark has not committed are not in "
                    "the snapshots, so a resumed dataflow would not serve the times before its snapshot again")
    endpoint = Endpoint(address, secret, "the aiotimely Spark reader", tls)
    if max_pending < 1:
        raise ValueError(f"max_pending must be at least 1, not {max_pending}")
    worker = stream.scope.worker

    async def logic(input: InputPort, output: OperatorOutput, cap: Capability) -> None:
        if worker.index != 0:                       # every record is exchanged to worker 0
            cap.drop()
            async for _ in input.activations():
                for time, batch in input.drain():
                    _give(output.session(time), batch)
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
        server, state.address = await endpoint.listen(lambda: _Connection(state, links, spawn), name=name, log=log,
                                                      allowed=lambda dialer: dialer == 1)
        try:
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
                    _give(output.session(time), batch)
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

    result: Stream = records.unary_frontier(logic, exchange=_ToWorker0(), name=name)
    if columns is not _RECORDS:
        from ...columnar import ColumnarStream

        return ColumnarStream(result, columns)
    return result


_RECORDS = object()


class _ToWorker0:
    """The publisher's exchange: every record to worker 0; a columnar batch whole, in one call."""

    __slots__ = ()

    def routes(self, batch: Any, peers: int) -> list[int]:
        return [0] * len(batch)

    def __call__(self, record: Any) -> int:
        return 0


def _give(session: Any, batch: Any) -> None:
    """Pass a batch on: a list's records, or a columnar batch whole."""
    if type(batch) is list:
        session.give_many(batch)
    else:
        session.give_container(batch)
