"""Spark Structured Streaming -> aiotimely, exactly once per row, with the Spark epoch as the timestamp.

On the aiotimely side, :func:`ingress` is a source listening on a TCP port (worker
0). On the Spark side, rows reach it from one of:

* :class:`AiotimelyForeachWriter` for ``writeStream.foreach(...)``: each task (an
  (epoch, partition) attempt) connects, sends its rows, and on ``close`` says
  whether it succeeded and waits for the ingress to acknowledge;
* :func:`foreach_batch_sink` for ``writeStream.foreachBatch(...)``: each micro-batch
  is sent from the driver as one attempt.

Both authenticate with the cluster's handshake (a shared secret: ``secret=`` or
``AIOTIMELY_SECRET``) over its framing. The ingress releases the rows of an
attempt into the dataflow only when the attempt closes without error, at time
``epoch``; a failed attempt is discarded, and a replay of an (epoch, partition)
that already completed is ignored — so each row enters exactly once, although
Spark delivers at least once. Time moves past epoch ``e`` once Spark reports batch
``e`` complete: :class:`EpochListener` (a ``StreamingQueryListener``) for
``foreach``, or the end of the ``foreachBatch`` call.

The Spark-side classes use blocking sockets (Spark calls them from its own
threads and processes) and need nothing but this module and msgpack.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import msgpack

from ..comm.framing import MAX_FRAME, Frame, FrameDecoder, Kind, encode_frame
from ..comm.handshake import Acceptor, Dialer, shared_secret
from ..comm.link import HANDSHAKE_MAX_FRAME, Link, LinkHandler, parse_address
from ..errors import ClusterError, RecoveryError
from .aiter import TimePolicy, from_aiter

if TYPE_CHECKING:
    from ..dataflow import Scope
    from ..stream import Stream

__all__ = ["ingress", "AiotimelyForeachWriter", "foreach_batch_sink", "EpochListener", "IngressClient",
           "local_session"]

log = logging.getLogger("aiotimely.connectors.spark")

ROWS_PER_FRAME = 1000


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "the Spark ingress")


def _secret_to_ship(secret: str | bytes | None) -> str | bytes | None:
    """The secret Spark's executors will use: ``secret``, or this process's ``AIOTIMELY_SECRET`` now,
    since the executors' environment may not have it."""
    return secret if secret is not None else os.environ.get("AIOTIMELY_SECRET")


# -- the Spark side: blocking clients ----------------------------------------------------------


class IngressClient:
    """A blocking connection to an :func:`ingress`: handshake, then messages (and acknowledgements)."""

    def __init__(self, address: str, secret: str | bytes | None = None, timeout: float = 30.0) -> None:
        host, port = parse_address(address)
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._decoder = FrameDecoder(HANDSHAKE_MAX_FRAME)
        dialer = Dialer(_secret(secret), 2, 1, expect=0)
        self._sock.sendall(dialer.start())
        while not dialer.done:
            reply = dialer.receive(self._next_frame())
            if reply:
                self._sock.sendall(reply)
        self._decoder.limit(MAX_FRAME)

    def _next_frame(self) -> Frame:
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            data = self._sock.recv(65536)
            if not data:
                raise ClusterError("the aiotimely ingress closed the connection")
            self._decoder.append(data)

    def send(self, *message: Any) -> None:
        self._sock.sendall(encode_frame(Kind.DATA, msgpack.packb(message, use_bin_type=True)))

    def request(self, *message: Any) -> Any:
        """Send and wait for the ingress's acknowledgement."""
        self.send(*message)
        return msgpack.unpackb(self._next_frame().payload, raw=False)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def _row_data(row: Any) -> Any:
    return row.asDict(recursive=True) if hasattr(row, "asDict") else row


class AiotimelyForeachWriter:
    """For ``writeStream.foreach(AiotimelyForeachWriter("127.0.0.1:PORT"))``: rows to a running ingress."""

    _client: IngressClient | None  # set by open, None again after close

    def __init__(self, address: str, secret: str | bytes | None = None) -> None:
        self.address = address
        self.secret = _secret_to_ship(secret)

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._client = IngressClient(self.address, self.secret)
        self._client.send("open", epoch_id, partition_id)
        self._rows: list[Any] = []
        return True

    def process(self, row: Any) -> None:
        self._rows.append(_row_data(row))
        if len(self._rows) >= ROWS_PER_FRAME:
            self._client.send("rows", self._rows)  # type: ignore[union-attr]  # Spark calls it between open and close
            self._rows = []

    def close(self, error: BaseException | None) -> None:
        client = getattr(self, "_client", None)
        if client is None:
            return
        try:
            if error is None and self._rows:
                client.send("rows", self._rows)
            client.request("close", error is None, "" if error is None else repr(error))
        finally:
            client.close()
            self._client = None


def foreach_batch_sink(address: str, secret: str | bytes | None = None) -> Callable[[Any, int], None]:
    """For ``writeStream.foreachBatch(foreach_batch_sink("127.0.0.1:PORT"))``: each micro-batch, then its end."""
    key = _secret_to_ship(secret)

    def send_batch(batch_df: Any, batch_id: int) -> None:
        client = IngressClient(address, key)
        try:
            client.send("open", batch_id, 0)
            rows: list[Any] = []
            for row in batch_df.toLocalIterator():
                rows.append(_row_data(row))
                if len(rows) >= ROWS_PER_FRAME:
                    client.send("rows", rows)
                    rows = []
            if rows:
                client.send("rows", rows)
            client.request("close", True, "")
            client.request("epoch", batch_id)
        finally:
            client.close()

    return send_batch


def _listener_base() -> type:
    try:
        from pyspark.sql.streaming.listener import StreamingQueryListener
    except ImportError:
        return object
    return StreamingQueryListener


class EpochListener(_listener_base()):  # type: ignore[misc]
    """``spark.streams.addListener(EpochListener("127.0.0.1:PORT"))``: tells the ingress when batches complete,
    and (``end_on_termination``) that the stream ended when a query terminates without error — a query that
    failed may be restarted from its checkpoint, and the ingress waits for it."""

    def __init__(self, address: str, secret: str | bytes | None = None, *, end_on_termination: bool = True) -> None:
        self.address = address
        self.secret = _secret_to_ship(secret)
        self.end_on_termination = end_on_termination

    def _tell(self, *message: Any) -> None:
        client = IngressClient(self.address, self.secret)
        try:
            client.request(*message)
        finally:
            client.close()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self._tell("epoch", event.progress.batchId)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if self.end_on_termination and getattr(event, "exception", None) is None:
            self._tell("end")


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


# -- the aiotimely side: the ingress -----------------------------------------------------------


class _Attempt:
    __slots__ = ("epoch", "partition", "rows")

    def __init__(self, epoch: int, partition: int) -> None:
        self.epoch, self.partition = epoch, partition
        self.rows: list[Any] = []


class _Ingress:
    """The ingress's state: open attempts, completed (epoch, partition) pairs, the epoch released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.completed: set[tuple[int, int]] = set()
        self.done_epoch = -1
        self.replays_ignored = 0
        self.attempts_discarded = 0

    def handle(self, attempt: _Attempt | None, message: tuple[Any, ...]) -> tuple[_Attempt | None, Any]:
        """Apply one message of a connection; returns the connection's attempt and the reply (or None)."""
        kind = message[0]
        if kind == "open":
            return _Attempt(int(message[1]), int(message[2])), None
        if kind == "rows":
            if attempt is None:
                raise ValueError("rows before open")
            attempt.rows.extend(message[1])
            return attempt, None
        if kind == "close":
            if attempt is None:
                raise ValueError("close before open")
            ok, why = bool(message[1]), message[2]
            key = (attempt.epoch, attempt.partition)
            if not ok:
                self.attempts_discarded += 1
                log.info("%s: attempt of epoch %d partition %d failed (%s); its rows are discarded",
                         self.name, attempt.epoch, attempt.partition, why)
            elif key in self.completed or attempt.epoch <= self.done_epoch:
                self.replays_ignored += 1
                log.info("%s: epoch %d partition %d already delivered; the replay is ignored", self.name, *key)
            else:
                self.completed.add(key)
                self.queue.put_nowait(("rows", attempt.epoch, attempt.rows))
            return None, ["ok"]
        if kind == "epoch":
            epoch = int(message[1])
            if epoch > self.done_epoch:
                self.done_epoch = epoch
                self.queue.put_nowait(("epoch", epoch))
            return attempt, ["ok"]
        if kind == "end":
            self.queue.put_nowait(("end",))
            return attempt, ["ok"]
        raise ValueError(f"unknown message {kind!r}")


class _IngressConnection(LinkHandler):
    """One connection from a Spark task: its messages, and the attempt it is in the middle of."""

    log = log

    def __init__(self, ingress: _Ingress) -> None:
        self.ingress = ingress
        self.name = ingress.name
        self.attempt: _Attempt | None = None

    def frame_received(self, link: Link, frame: Frame) -> None:
        try:
            if frame.kind is not Kind.DATA:
                raise ValueError(f"unexpected {frame.kind.name} frame")
            try:
                message = msgpack.unpackb(frame.payload, raw=False, use_list=False)
            except Exception as e:
                raise ValueError(f"malformed message: {e}") from None
            if not isinstance(message, tuple) or not message:
                raise ValueError("malformed message")
            self.attempt, reply = self.ingress.handle(self.attempt, message)
        except (ValueError, TypeError, IndexError) as e:
            link.reject(str(e))
            return
        if reply is not None:
            link.send(encode_frame(Kind.DATA, msgpack.packb(reply)))

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        if self.attempt is not None:
            self.ingress.attempts_discarded += 1
            log.info("%s: a connection closed in the middle of epoch %d partition %d; its rows are discarded",
                     self.ingress.name, self.attempt.epoch, self.attempt.partition)


class _EpochPolicy(TimePolicy):
    """Rows at their epoch; time moves past an epoch when Spark reports it complete."""

    def __init__(self) -> None:
        self.low = 0

    def times(self, records: list[Any]) -> list[tuple[int, list[Any]]]:
        groups: dict[int, list[Any]] = {}
        for epoch, row in records:
            groups.setdefault(epoch, []).append(row)
        return sorted(groups.items())

    def current(self) -> int:
        return self.low


def ingress(
    scope: Scope[Stream],
    address: str = "127.0.0.1:0",
    *,
    secret: str | bytes | None = None,
    ready: asyncio.Future[str] | None = None,
    statistics: dict[str, Any] | None = None,
    name: str = "SparkIngress",
) -> Stream:
    """A stream of the rows Spark sends (as dicts), at their epoch; on worker 0.

    ``ready`` (a future) is given the ``host:port`` actually listened on once the
    server listens (pass port 0 for a free one). The stream ends when Spark says
    the query terminated (:class:`EpochListener`) or an ``end`` message arrives;
    ``statistics`` (a dict) then receives the replays ignored and attempts discarded.
    """
    if scope.dataflow.snapshotter is not None:
        raise RecoveryError(
            f"the Spark ingress {name!r} cannot be in a recoverable dataflow yet: Spark counts an epoch delivered "
            "once its rows reach aiotimely, before a snapshot keeps them, so a crash would lose them; build this "
            "dataflow without recovery")
    key = _secret(secret)
    host, port = parse_address(address)
    state = _Ingress(name)
    policy = _EpochPolicy()

    async def rows() -> AsyncIterator[tuple[int, Any]]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: Link(Acceptor(key, 2, 0, allowed=lambda i: True), _IngressConnection(state)), host, port)
        try:
            listening = server.sockets[0].getsockname()
            if ready is not None and not ready.done():
                ready.set_result(f"{listening[0]}:{listening[1]}")
            while True:
                item = await state.queue.get()
                if item[0] == "rows":
                    for row in item[2]:
                        yield (item[1], row)
                elif item[0] == "epoch":
                    # moves on when the source next waits: every row of the epoch came before this
                    policy.low = max(policy.low, item[1] + 1)
                else:
                    return
        finally:
            server.close()
            if statistics is not None:
                statistics.update(replays_ignored=state.replays_ignored, attempts_discarded=state.attempts_discarded,
                                  epochs_delivered=len({e for e, _ in state.completed}))

    return from_aiter(scope, rows(), time=policy, name=name)
