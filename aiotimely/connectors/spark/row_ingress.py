"""aiotimely's side of the row ingress: Spark's rows, exactly once, with the Spark epoch as the timestamp.

:func:`ingress` is a source listening on a TCP port (worker 0); the writers of
:mod:`.foreach` send it rows. It releases the rows of an attempt (an (epoch,
partition) task, or a ``foreachBatch`` micro-batch) into the dataflow only when the
attempt closes without error, at time ``epoch``; a failed attempt is discarded, and a
replay of an (epoch, partition) that already completed is ignored — so each row
enters exactly once, although Spark delivers at least once. Time moves past epoch
``e`` as soon as Spark reports batch ``e`` complete, whether or not anything follows.
The stream ends when the listener sees the query terminate cleanly, or the
``foreachBatch`` sink is closed; a sink closed with an error fails the dataflow.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator

from ...comm.link import Link
from ...comm.tls import TLSOption
from ...errors import ClusterError
from ..aiter import TimePolicy, from_aiter
from .wire import Endpoint, WireConnection, refuse_recovery, reply

if TYPE_CHECKING:
    from ...scope import Scope
    from ...stream import Stream
    from .foreach import ForeachBatchSink

__all__ = ["ingress"]

log = logging.getLogger("aiotimely.connectors.spark")  # named as before the package


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


class _IngressConnection(WireConnection):
    """One connection from a Spark task: its messages, and the attempt it is in the middle of."""

    def __init__(self, ingress: _Ingress) -> None:
        super().__init__(ingress.name, log)
        self.ingress = ingress
        self.attempt: _Attempt | None = None

    def control(self, link: Link, message: tuple[Any, ...]) -> None:
        self.attempt, answer = self.ingress.handle(self.attempt, message)
        if answer is not None:
            reply(link, *answer)

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
    refuse_recovery(scope, f"the Spark ingress {name!r}", "Spark counts an epoch delivered once its rows reach "
                    "aiotimely, before a snapshot keeps them, so a crash would lose them")
    endpoint = Endpoint(address, sink._pair(secret) if sink is not None else secret, "the Spark ingress", tls)
    if sink is not None:
        sink.tls = endpoint.tls
    state = _Ingress(name)
    policy = _EpochPolicy()

    async def rows() -> AsyncIterator[tuple[int, Any]]:
        loop = asyncio.get_running_loop()
        server, where = await endpoint.listen(lambda: _IngressConnection(state), name=name, log=log)
        try:
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

    stream: Stream = from_aiter(scope, rows(), time=policy, name=name)
    return stream
