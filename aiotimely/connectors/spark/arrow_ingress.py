"""aiotimely's side of ``format("aiotimely")`` writes: the :class:`ArrowIngress`, where Spark's commits enter.

Write tasks stage their partitions here (Arrow IPC over the wire of :mod:`.wire`),
each under its attempt's token; the driver's commit releases the one attempt per
partition that counts into the dataflow at time ``batchId`` and moves the time past
it; an abort, or the end of the stream, discards what is staged. The protocol, and
Spark's side of it, is :mod:`.datasource`'s.

How a committed micro-batch enters is a :class:`_Release`: as records at time ``batchId``
(:meth:`ArrowIngress.stream`), or as columnar batches (:meth:`ArrowIngress.columnar`) at
``batchId`` or, with an event-time column, at the watermark (the latest event time
committed minus the lateness, :class:`aiotimely.columnar.decode.Watermark`), which the
capability follows after each micro-batch.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ...comm.framing import Frame
from ...comm.link import Link
from ...comm.tls import TLSOption
from ...dataflow.input import source
from .datasource import BATCH, SCHEMA
from .wire import Endpoint, WireConnection, refuse_recovery, reply

if TYPE_CHECKING:
    from ...columnar import ColumnarStream
    from ...dataflow import Capability, OperatorOutput
    from ...scope import Scope
    from ...stream import Stream

__all__ = ["ArrowIngress", "RECORDS", "BATCH_ROWS"]

log = logging.getLogger("aiotimely.connectors.spark_datasource")  # named as before the package

RECORDS = ("tuples", "dicts", "arrow")
"""What a record is in the stream of an :class:`ArrowIngress`."""
YIELD_EVERY = 16384
"""Rows the ingress hands to the dataflow before it lets the worker run the rest of the dataflow."""
BATCH_ROWS = 100_000
"""About how many rows :meth:`ArrowIngress.columnar` gathers into one batch, from Spark's record batches of a
micro-batch (10,000 rows each by default)."""


def _pyarrow() -> Any:
    return importlib.import_module("pyarrow")


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
            reply(self.blocked.pop(0), "ok")

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
            reply(link, "ok", staged.rows)
        elif kind == "commit":
            self.commit(link, int(message[1]), message[2])
        elif kind == "abort":
            batch = int(message[1])
            dropped = self.staged.pop(batch, {})
            self.statistics["attempts_discarded"] += len(dropped)
            self.statistics["epochs_aborted"] += 1
            log.info("%s: Spark aborted batch %d; %d staged attempt(s) discarded", self.name, batch, len(dropped))
            reply(link, "ok")
        elif kind == "end":
            self.end()
            reply(link, "ok")
        else:
            raise ValueError(f"unknown message {kind!r}")

    def commit(self, link: Link, batch: int, parts: Any) -> None:
        if batch <= self.committed:
            self.statistics["replays_ignored"] += 1
            log.info("%s: batch %d is already committed (up to %d); the commit is ignored",
                     self.name, batch, self.committed)
            self.staged.pop(batch, None)
            reply(link, "ok", "replay")
            return
        staged = self.staged.get(batch, {})
        chosen: list[_Attempt] = []
        for partition, token, rows in parts:
            attempt = staged.get((int(partition), str(token)))
            if attempt is None or attempt.rows != rows:
                reply(link, "error", f"batch {batch} partition {partition}: the attempt committed "
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
            reply(link, "ok")
        else:
            self.blocked.append(link)
        self._wake()


class _Connection(WireConnection):
    """One connection from Spark: a write task's attempt, or the driver's commit or abort."""

    def __init__(self, ingress: _Ingress) -> None:
        super().__init__(ingress.name, log)
        self.ingress = ingress
        self.attempt: _Attempt | None = None

    def control(self, link: Link, message: tuple[Any, ...]) -> None:
        self.ingress.control(self, link, message)

    def data(self, link: Link, frame: Frame) -> None:
        """The staged attempt's Arrow data: its schema, then its record batches."""
        attempt = self.attempt
        if attempt is None:
            raise ValueError("Arrow data before stage")
        channel = frame.channel
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


class _Release:
    """How a committed micro-batch enters the dataflow, and where the time moves after it."""

    async def hand_in(self, output: OperatorOutput, cap: Capability, batch: int, attempts: list[_Attempt]) -> None:
        raise NotImplementedError


class _ByBatchId(_Release):
    """Rows as records (tuples, dicts or whole record batches) at time ``batchId``; then the time passes it."""

    def __init__(self, give: Callable[[OperatorOutput, Capability, Any], None]) -> None:
        self.give = give

    async def hand_in(self, output: OperatorOutput, cap: Capability, batch: int, attempts: list[_Attempt]) -> None:
        with cap.delayed(batch) as at_batch:
            given = 0
            for attempt in attempts:
                for record_batch in attempt.batches:
                    self.give(output, at_batch, record_batch)
                    given += record_batch.num_rows
                    if given >= YIELD_EVERY:
                        given = 0
                        await asyncio.sleep(0)  # let the dataflow take what was given
        cap.downgrade(batch + 1)


def _gathered(attempts: list[_Attempt], rows: int) -> Iterator[list[Any]]:
    """The record batches of a micro-batch's attempts, in runs of about ``rows`` rows (at least one batch each)."""
    run: list[Any] = []
    count = 0
    for attempt in attempts:
        for record_batch in attempt.batches:
            run.append(record_batch)
            count += record_batch.num_rows
            if count >= rows:
                yield run
                run, count = [], 0
    if run:
        yield run


class _Columns(_Release):
    """Record batches as :class:`~aiotimely.columnar.ArrowBatch` es (a run of them as one Polars frame of their
    chunks: no copy), checked against the declared schema (``None``: none declared)."""

    def __init__(self, rows: int, schema: Any) -> None:
        self.rows = rows
        self.schema = schema
        self._checked: Any = None   # the last Arrow schema found to match (Spark sends one per query)

    def batch(self, run: list[Any]) -> Any:
        from ...columnar import ArrowBatch

        arrow_schema = run[0].schema
        if len(run) == 1:
            made = ArrowBatch(run[0])
        else:
            import polars as pl

            frame = pl.from_arrow(_pyarrow().Table.from_batches(run), rechunk=False)
            assert isinstance(frame, pl.DataFrame)
            made = ArrowBatch(frame)
        if self.schema is not None and arrow_schema is not self._checked:
            if made.schema != self.schema:
                raise TypeError(f"Spark sent columns {dict(made.schema)}, not the declared {dict(self.schema)}")
            self._checked = arrow_schema
        return made

    async def give(self, output: OperatorOutput, at: Capability, attempts: list[_Attempt]) -> None:
        session = output.session(at)
        for run in _gathered(attempts, self.rows):
            session.give_container(self.batch(run))
            await asyncio.sleep(0)  # let the dataflow take what was given


class _ColumnsByBatchId(_Columns):
    """Columnar batches at time ``batchId``; then the time passes it."""

    async def hand_in(self, output: OperatorOutput, cap: Capability, batch: int, attempts: list[_Attempt]) -> None:
        with cap.delayed(batch) as at_batch:
            await self.give(output, at_batch, attempts)
        cap.downgrade(batch + 1)


class _AtWatermark(_Columns):
    """Columnar batches at the watermark of event-time column ``watermark.column``; after each micro-batch the
    time moves to the new watermark."""

    def __init__(self, watermark: Any, rows: int, schema: Any) -> None:
        super().__init__(rows, schema)
        self.watermark = watermark
        self._checked_time: Any = None

    async def hand_in(self, output: OperatorOutput, cap: Capability, batch: int, attempts: list[_Attempt]) -> None:
        from ...columnar.decode import column_max

        watermark = self.watermark
        record_batches = [b for a in attempts for b in a.batches]
        if record_batches and record_batches[0].schema is not self._checked_time:
            arrow_schema = record_batches[0].schema
            types = [(f.name, f.type) for f in arrow_schema]
            column = watermark.column
            integer = column in arrow_schema.names and _pyarrow().types.is_integer(arrow_schema.field(column).type)
            watermark.check(types, integer)
            self._checked_time = arrow_schema
        if cap.time < watermark.current:
            cap.downgrade(watermark.current)
        await self.give(output, cap, attempts)
        latest = column_max(record_batches, watermark.column) if record_batches else None
        now = watermark.saw(latest)
        if now > cap.time:
            cap.downgrade(now)


class ArrowIngress:
    """The aiotimely end of ``format("aiotimely")``: a source listening at ``address`` (on worker 0).

    ``records`` is ``"tuples"``, ``"dicts"`` or ``"arrow"`` (whole record batches). With
    ``tls`` (a :class:`~aiotimely.comm.tls.TLSConfig`; default ``AIOTIMELY_TLS_*``;
    ``False``: none) it accepts only TLS connections (:func:`.datasource.register` ships the
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
        self._endpoint = Endpoint(address, secret, "the aiotimely Spark data source", tls)
        self.tls = self._endpoint.tls
        """The TLS configuration, or ``None`` for plain TCP."""
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
        records = self.records

        def hand_in(output: OperatorOutput, at_batch: Capability, record_batch: Any) -> None:
            output.session(at_batch).give_many(_records(record_batch, records))

        return self._source(scope, _ByBatchId(hand_in))

    def columnar(self, scope: Scope[Stream], *, time: str | None = None, lateness: int = 0, schema: Any = None,
                 rows: int = BATCH_ROWS) -> ColumnarStream:
        """What Spark commits as a columnar stream (:class:`~aiotimely.columnar.ColumnarStream`): Spark's Arrow
        record batches go on as :class:`~aiotimely.columnar.ArrowBatch` es, with no step per row (those of a
        micro-batch gathered into batches of about ``rows`` rows, without copying); worker 0 listens.

        Without ``time``, each micro-batch at time ``batchId``, as :meth:`stream`. With ``time="ts"`` (an integer
        column: event time), as Spark's ``withWatermark("ts", lateness)``: each micro-batch goes at the current
        *watermark*, and once it is in, the watermark moves to the latest ``ts`` committed so far minus
        ``lateness`` (never back; it starts at 0). So a ``window(..., time="ts")`` downstream closes a window as
        soon as the watermark passes its end -- while Spark goes on sending -- and a row whose window ended at or
        before the watermark is late there (its ``late=`` policy). ``schema``: the columns Spark sends (a mapping
        of names to Polars types, or a pyarrow schema), so that operators check their expressions as the
        dataflow is built; each micro-batch is checked against it.
        """
        from ...columnar import ColumnarStream, as_schema
        from ...columnar.decode import Watermark

        if type(rows) is not int or rows < 1:
            raise ValueError(f"{self.name}: rows must be a positive int, not {rows!r}")
        columns = None if schema is None else as_schema(schema)
        if time is not None:
            watermark = Watermark(time, lateness)
            if columns is not None:
                watermark.check(list(columns.items()), columns[time].is_integer() if time in columns else False)
            release: _Release = _AtWatermark(watermark, rows, columns)
        else:
            if lateness:
                raise ValueError(f"{self.name}: lateness is for event time: give time=\"ts\" too")
            release = _ColumnsByBatchId(rows, columns)
        return ColumnarStream(self._source(scope, release), columns)

    def _source(self, scope: Scope[Stream], release: _Release) -> Stream:
        worker = scope.worker
        if worker.index in self._workers:
            raise RuntimeError(f"{self.name}: an ArrowIngress feeds one stream (on each worker); make one per "
                               "dataflow")
        refuse_recovery(scope, f"the Spark ingress {self.name!r}", "Spark counts an epoch delivered once its commit "
                        "is acknowledged, before a snapshot keeps its rows, so a crash would lose them")
        self._workers.add(worker.index)
        state = self._state

        async def logic(output: OperatorOutput, cap: Capability) -> None:
            if worker.index != 0:
                cap.drop()
                return
            loop = asyncio.get_running_loop()
            self._loop = loop
            server, self.address = await self._endpoint.listen(lambda: _Connection(state), name=self.name, log=log)
            try:
                self._listening.set()
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(self.address)
                if self._close_requested:
                    state.end()
                while (item := await state.next_release()) is not None:
                    batch, attempts = item
                    await release.hand_in(output, cap, batch, attempts)
                    state.handed_in()
            finally:
                server.close()
                state.end()
                for link in state.blocked:
                    reply(link, "error", "the ingress stopped")
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
