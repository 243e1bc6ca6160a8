"""Spark Structured Streaming -> aiotimely, exactly once per row, with the Spark epoch as the timestamp.

On the aiotimely side, :func:`ingress` is a source listening on a TCP port (worker
0). On the Spark side, rows reach it from one of:

* :class:`AiotimelyForeachWriter` for ``writeStream.foreach(...)``: each task (an
  (epoch, partition) attempt) connects, sends its rows, and on ``close`` says
  whether it succeeded and waits for the ingress to acknowledge;
* :func:`foreach_batch_sink` (a :class:`ForeachBatchSink`) for
  ``writeStream.foreachBatch(...)``: each micro-batch is sent from the driver as one
  attempt. Given to the ingress (``ingress(scope, sink=sink)``) in the driver's
  process, it learns the address and the secret from it; ``sink.close()`` (or leaving
  ``with sink:``) says the query stopped.

Both authenticate with the cluster's handshake (a shared secret: ``secret=`` or
``AIOTIMELY_SECRET``, or one the paired sink and ingress make up) over its framing.
The ingress releases the rows of an attempt into the dataflow only when the attempt
closes without error, at time ``epoch``; a failed attempt is discarded, and a replay
of an (epoch, partition) that already completed is ignored — so each row enters
exactly once, although Spark delivers at least once. Time moves past epoch ``e`` as
soon as Spark reports batch ``e`` complete, whether or not anything follows:
:class:`EpochListener` (a ``StreamingQueryListener``) for ``foreach``, or the end of
the ``foreachBatch`` call. The stream ends when the listener sees the query terminate
cleanly, or the ``foreachBatch`` sink is closed; a sink closed with an error fails
the dataflow.

Both work with Spark 3.5 and 4 (classic PySpark: ``foreachBatch`` runs its function
in the driver).

The Spark-side classes use blocking sockets (Spark calls them from its own
threads and processes) and need nothing but this module and msgpack.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import ssl
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

import msgpack

from ..comm.framing import MAX_FRAME, Frame, FrameDecoder, Kind, encode_frame
from ..comm.handshake import Acceptor, Dialer, shared_secret
from ..comm.link import HANDSHAKE_MAX_FRAME, Link, LinkHandler, parse_address
from ..comm.tls import TLSConfig, TLSOption, connect_blocking, resolve, serve
from ..errors import ClusterError, RecoveryError
from .aiter import TimePolicy, from_aiter

if TYPE_CHECKING:
    from ..dataflow import Scope
    from ..stream import Stream

__all__ = ["ingress", "AiotimelyForeachWriter", "foreach_batch_sink", "ForeachBatchSink", "EpochListener",
           "IngressClient", "local_session", "control_message", "spark_class"]

log = logging.getLogger("aiotimely.connectors.spark")

ROWS_PER_FRAME = 1000


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "the Spark ingress")


def _secret_to_ship(secret: str | bytes | None) -> str | bytes | None:
    """The secret Spark's executors will use: ``secret``, or this process's ``AIOTIMELY_SECRET`` now,
    since the executors' environment may not have it."""
    return secret if secret is not None else os.environ.get("AIOTIMELY_SECRET")


def _client_context(tls: TLSConfig | None) -> ssl.SSLContext | None:
    """The client context for the TLS configuration a Spark-side class shipped (``None``: plain TCP)."""
    return tls.client_context() if tls is not None else None


# -- the Spark side: blocking clients ----------------------------------------------------------


class IngressClient:
    """A blocking connection to an :func:`ingress`: handshake, then messages (and acknowledgements)."""

    def __init__(self, address: str, secret: str | bytes | None = None, timeout: float = 30.0,
                 tls: ssl.SSLContext | None = None) -> None:
        host, port = parse_address(address)
        self._sock = connect_blocking(host, port, timeout, tls)
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

    def __init__(self, address: str, secret: str | bytes | None = None, tls: TLSOption = None) -> None:
        self.address = address
        self.secret = _secret_to_ship(secret)
        self.tls = resolve(tls)  # this process's AIOTIMELY_TLS_* now, as the secret: shipped to the executors

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._client = IngressClient(self.address, self.secret, tls=_client_context(self.tls))
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


class ForeachBatchSink:
    """``writeStream.foreachBatch(sink)``: each micro-batch to an :func:`ingress`, as one attempt at its batch id;
    the batch's epoch is complete when the call returns. ``close()``, or leaving ``with sink:``, says the query
    stopped: the ingress's stream ends, and the dataflow can complete.

    Without ``address``, give the sink to the ingress (``ingress(scope, sink=sink)``, in this process): a batch
    then waits (up to ``timeout`` seconds) for the ingress to listen, the two share ``secret`` (else
    ``AIOTIMELY_SECRET``, else one they make up), and ``close`` hands the end to the ingress directly, without
    blocking — so ``with sink:`` may be used on the ingress's own event loop. ``close(error)``, and leaving
    ``with sink:`` by an exception, fails the dataflow instead, naming ``error``: a query that stopped on an
    error did not deliver everything. To restart a failed query from its checkpoint, do it inside the block
    (the batches it replays that were already delivered are ignored). After ``close`` the sink refuses
    batches, and so does the ingress: a batch still being sent fails, rather than being lost.
    """

    def __init__(self, address: str | None = None, secret: str | bytes | None = None, *,
                 timeout: float = 30.0, tls: TLSOption = None) -> None:
        self.address = address
        self.secret = _secret_to_ship(secret)
        self.timeout = timeout
        self.tls = resolve(tls)  # a paired ingress's own, once paired
        self._secret_given = secret is not None
        self._paired = False
        self._ingress: tuple[asyncio.AbstractEventLoop, _Ingress] | None = None  # paired, once it listens
        self._listening = threading.Event()
        self._sending = threading.Lock()  # held while a batch is sent
        self._flags = threading.Lock()  # for the fields below and _ingress
        self._closed = False
        self._pending: tuple[Any, ...] | None = None  # the end, said before the paired ingress listened
        if address is not None:
            self._listening.set()

    def __getstate__(self) -> dict[str, Any]:  # Spark Connect pickles the function: without the thread primitives
        return {"address": self.address, "secret": self.secret, "timeout": self.timeout, "closed": self._closed,
                "tls": self.tls}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["address"], state["secret"], timeout=state["timeout"],  # type: ignore[misc]
                      tls=state.get("tls") or False)
        self._closed = state["closed"]

    def _pair(self, secret: str | bytes | None) -> str | bytes:
        """Called by :func:`ingress` when it is built with this sink: the secret the two use."""
        if self.address is not None and not self._paired:
            raise ValueError("this foreachBatch sink was given an address: give it to the ingress, not the sink "
                             "(the ingress tells the sink where it listens)")
        if secret is not None:
            if self._secret_given and secret != self.secret:
                raise ValueError("the ingress and its foreachBatch sink were given different secrets: give one")
            self.secret = secret
        elif self.secret is None:  # none given, none in the environment: one only these two know
            self.secret = secrets.token_urlsafe(24)
        self._paired = True
        return self.secret

    def _listen_at(self, address: str, loop: asyncio.AbstractEventLoop, state: _Ingress) -> None:
        """Called by the paired ingress, on its loop, once it listens."""
        with self._flags:
            self.address = address
            self._ingress = (loop, state)
            pending, self._pending = self._pending, None
        if pending is not None:
            state.finish(pending)
        self._listening.set()

    def _connect(self) -> IngressClient:
        if not self._listening.wait(self.timeout):
            raise ClusterError(
                f"this foreachBatch sink has had no ingress to send to for {self.timeout} s: give it an address, "
                "or give it to ingress(scope, sink=...) in this process and run that dataflow")
        assert self.address is not None
        return IngressClient(self.address, self.secret, self.timeout, tls=_client_context(self.tls))

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._sending:
            if self._closed:
                raise ClusterError(f"this foreachBatch sink is closed (the query stopped): batch {batch_id} "
                                   "has nowhere to go")
            client = self._connect()
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

    def close(self, error: BaseException | str | None = None) -> None:
        """The query stopped: the ingress's stream ends (``error`` None) or fails, naming ``error``. Called
        outside an event loop, it first waits for a batch being sent to finish; closing again does nothing."""
        message: tuple[Any, ...] = ("end",) if error is None else (
            "fail", error if isinstance(error, str) else f"{type(error).__name__}: {error}")
        try:
            asyncio.get_running_loop()
            on_a_loop = True
        except RuntimeError:
            on_a_loop = False
        if not on_a_loop:
            with self._sending:  # let a batch being sent finish first
                pass
        with self._flags:
            if self._closed:
                return
            self._closed = True
            ingress = self._ingress
            if ingress is None and self.address is None:
                self._pending = message  # the ingress it is given to hands it on when it listens
                return
        if ingress is not None:
            loop, state = ingress
            try:
                loop.call_soon_threadsafe(state.finish, message)
            except RuntimeError:  # its loop is closed: the dataflow is over
                log.info("the ingress's event loop is closed: its stream has already ended")
            return
        try:
            client = self._connect()
        except ConnectionRefusedError:
            log.info("the ingress at %s no longer listens: its stream has already ended", self.address)
            return
        try:
            client.request(*message)
        finally:
            client.close()

    def __enter__(self) -> ForeachBatchSink:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if error is None:
            self.close()
            return
        try:
            self.close(error)
        except (OSError, ClusterError) as e:  # the error leaving the block is the one to see
            log.warning("could not tell the ingress that the Spark query failed (%s): %s", error, e)


def foreach_batch_sink(address: str | None = None, secret: str | bytes | None = None, *,
                       timeout: float = 30.0) -> ForeachBatchSink:
    """For ``writeStream.foreachBatch(foreach_batch_sink(...))``: a :class:`ForeachBatchSink` sending to the
    ingress at ``address``, or (no address) to the ingress it is given to: ``ingress(scope, sink=sink)``."""
    return ForeachBatchSink(address, secret, timeout=timeout)


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

    def __init__(self, address: str, secret: str | bytes | None = None, *, end_on_termination: bool = True,
                 tls: TLSOption = None) -> None:
        self.address = address
        self.secret = _secret_to_ship(secret)
        self.end_on_termination = end_on_termination
        self.tls = resolve(tls)

    def _tell(self, *message: Any) -> None:
        client = IngressClient(self.address, self.secret, tls=_client_context(self.tls))
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
        self.ended = False

    def finish(self, message: tuple[Any, ...]) -> None:
        """The query stopped: ``("end",)``, or ``("fail", why)``; what comes after is refused."""
        if not self.ended:
            self.ended = True
            self.queue.put_nowait(message)

    def handle(self, attempt: _Attempt | None, message: tuple[Any, ...]) -> tuple[_Attempt | None, Any]:
        """Apply one message of a connection; returns the connection's attempt and the reply (or None)."""
        kind = message[0]
        if self.ended:
            raise ValueError(f"{kind!r} after the stream ended (the query was said to have stopped)")
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
            self.finish(("end",))
            return attempt, ["ok"]
        if kind == "fail":
            self.finish(("fail", str(message[1])))
            return attempt, ["ok"]
        raise ValueError(f"unknown message {kind!r}")


def control_message(frame: Frame) -> tuple[Any, ...]:
    """The message a peer's DATA frame carries: a non-empty msgpack array (``ValueError`` if it is not one)."""
    if frame.kind is not Kind.DATA:
        raise ValueError(f"unexpected {frame.kind.name} frame")
    try:
        message = msgpack.unpackb(frame.payload, raw=False, use_list=False)
    except Exception as e:
        raise ValueError(f"malformed message: {e}") from None
    if not isinstance(message, tuple) or not message:
        raise ValueError("malformed message")
    return message


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


class _IngressConnection(LinkHandler):
    """One connection from a Spark task: its messages, and the attempt it is in the middle of."""

    log = log

    def __init__(self, ingress: _Ingress) -> None:
        self.ingress = ingress
        self.name = ingress.name
        self.attempt: _Attempt | None = None

    def frame_received(self, link: Link, frame: Frame) -> None:
        try:
            self.attempt, reply = self.ingress.handle(self.attempt, control_message(frame))
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
    sink: ForeachBatchSink | None = None,
    name: str = "SparkIngress",
    tls: TLSOption = None,
) -> Stream:
    """A stream of the rows Spark sends (as dicts), at their epoch; on worker 0.

    ``ready`` (a future) is given the ``host:port`` actually listened on once the
    server listens (pass port 0 for a free one); so is ``sink``, a
    :func:`foreach_batch_sink` made without an address in this process, which then
    shares this ingress's secret (or gives it its own, or they make one up). Time
    passes epoch ``e`` as soon as Spark reports batch ``e`` complete. The stream ends
    when Spark says the query terminated (:class:`EpochListener`), the sink is closed,
    or an ``end`` message arrives; ``statistics`` (a dict) then receives the replays
    ignored and attempts discarded. A sink closed with an error fails the dataflow.
    With ``tls`` (a :class:`~aiotimely.comm.tls.TLSConfig`; default ``AIOTIMELY_TLS_*``;
    ``False``: none) only TLS clients are accepted; a paired ``sink`` uses the same.
    """
    if scope.dataflow.snapshotter is not None:
        raise RecoveryError(
            f"the Spark ingress {name!r} cannot be in a recoverable dataflow yet: Spark counts an epoch delivered "
            "once its rows reach aiotimely, before a snapshot keeps them, so a crash would lose them; build this "
            "dataflow without recovery")
    key = _secret(sink._pair(secret) if sink is not None else secret)
    config = resolve(tls)
    context = config.server_context() if config is not None else None
    if sink is not None:
        sink.tls = config
    host, port = parse_address(address)
    state = _Ingress(name)
    policy = _EpochPolicy()

    async def rows() -> AsyncIterator[tuple[int, Any]]:
        loop = asyncio.get_running_loop()
        server = await serve(
            lambda: Link(Acceptor(key, 2, 0, allowed=lambda i: True), _IngressConnection(state)), host, port,
            context, name=name, log=log)
        try:
            listening = server.sockets[0].getsockname()
            where = f"{listening[0]}:{listening[1]}"
            if ready is not None and not ready.done():
                ready.set_result(where)
            if sink is not None:
                sink._listen_at(where, loop, state)
            while True:
                item = await state.queue.get()
                if item[0] == "rows":
                    for row in item[2]:
                        yield (item[1], row)
                elif item[0] == "epoch":
                    # every row of the epoch came before this; from_aiter moves the frontier as this
                    # iterator waits again, with or without a record after it
                    policy.low = max(policy.low, item[1] + 1)
                elif item[0] == "fail":
                    raise ClusterError(f"{name}: the Spark query failed: {item[1]}")
                else:
                    return
        finally:
            server.close()
            if statistics is not None:
                statistics.update(replays_ignored=state.replays_ignored, attempts_discarded=state.attempts_discarded,
                                  epochs_delivered=len({e for e, _ in state.completed}))

    return from_aiter(scope, rows(), time=policy, name=name)
