"""Spark's side of the row ingress: the writers and the listener that send rows to :func:`.row_ingress.ingress`.

* :class:`AiotimelyForeachWriter` for ``writeStream.foreach(...)``: each task (an
  (epoch, partition) attempt) connects, sends its rows, and on ``close`` says
  whether it succeeded and waits for the ingress to acknowledge;
* :func:`foreach_batch_sink` (a :class:`ForeachBatchSink`) for
  ``writeStream.foreachBatch(...)``: each micro-batch is sent from the driver as one
  attempt. Given to the ingress (``ingress(scope, sink=sink)``) in the driver's
  process, it learns the address and the secret from it; ``sink.close()`` (or leaving
  ``with sink:``) says the query stopped;
* :class:`EpochListener` (a ``StreamingQueryListener``) tells the ingress, for
  ``foreach``, when Spark reports a batch complete, and when the query terminated.

They use blocking sockets (:class:`~.wire.WireClient`: Spark calls them from its own
threads and processes) and need nothing but msgpack; pyspark only for the listener's
base class, when it is installed.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ...comm.tls import TLSOption, resolve
from ...errors import ClusterError
from .wire import IngressClient, client_context, ship_secret

if TYPE_CHECKING:
    from .row_ingress import _Ingress

__all__ = ["AiotimelyForeachWriter", "ForeachBatchSink", "foreach_batch_sink", "EpochListener", "ROWS_PER_FRAME"]

log = logging.getLogger("aiotimely.connectors.spark")  # the row ingress's logger, named as before the package

ROWS_PER_FRAME = 1000
"""Rows a writer sends in one message."""


def _row_data(row: Any) -> Any:
    return row.asDict(recursive=True) if hasattr(row, "asDict") else row


class AiotimelyForeachWriter:
    """For ``writeStream.foreach(AiotimelyForeachWriter("127.0.0.1:PORT"))``: rows to a running ingress."""

    _client: IngressClient | None  # set by open, None again after close

    def __init__(self, address: str, secret: str | bytes | None = None, tls: TLSOption = None) -> None:
        self.address = address
        self.secret = ship_secret(secret)
        self.tls = resolve(tls)  # this process's AIOTIMELY_TLS_* now, as the secret: shipped to the executors

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._client = IngressClient(self.address, self.secret, tls=client_context(self.tls))
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
        self.secret = ship_secret(secret)
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
        return IngressClient(self.address, self.secret, self.timeout, tls=client_context(self.tls))

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._sending:
            if self._closed:
                raise ClusterError(f"this foreachBatch sink is closed (the query stopped): batch {batch_id} "
                                   "has nowhere to go")
            with self._connect() as client:
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
        with client:
            client.request(*message)

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
        self.secret = ship_secret(secret)
        self.end_on_termination = end_on_termination
        self.tls = resolve(tls)

    def _tell(self, *message: Any) -> None:
        with IngressClient(self.address, self.secret, tls=client_context(self.tls)) as client:
            client.request(*message)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self._tell("epoch", event.progress.batchId)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if self.end_on_termination and getattr(event, "exception", None) is None:
            self._tell("end")
