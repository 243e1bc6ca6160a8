"""The TCP cluster: one connection between every two processes, on asyncio.

Each process listens on its address and dials every process with a lower index
(retrying while they start), so every pair shares exactly one connection. After
the handshake (:mod:`.handshake`), frames (:mod:`.framing`) flow both ways: record
batches for one worker, and progress batches for every worker of the receiving
process. One TCP connection per pair keeps each worker's progress batches in the
order they were sent, which progress tracking needs; data shares it.

Back-pressure: sends are buffered by the transport up to a high-water mark; past
it the fabric reports itself congested and the workers pause their rounds until
the peer has read. On the receiving side, reading pauses while a mailbox fed by
the network holds many unprocessed batches, or while an operator that awaits I/O
has a long queue of input — so the sender's buffer fills, and the sender waits.

A peer that closes its connection without saying goodbye, or reports a failure,
fails the whole computation with an error naming it. So does a peer that sends
nothing for ``peer_timeout`` seconds: every process sends a HEARTBEAT frame each
second, so silence means the peer is stopped, hung or cut off (a peer whose
event loop is blocked that long by one operator looks the same: keep blocking
work off the loop, or raise the timeout). Silence while this process itself was
blocked does not count. A connection
that fails the handshake is logged and closed; the cluster goes on.

With ``tls`` (:mod:`.tls`; by default from ``AIOTIMELY_TLS_*``) every connection is
TLS, the handshake inside it: a peer that fails TLS (plaintext, or a certificate not
trusted) is refused and logged like one that fails the handshake, while a dialer
whose TLS handshake fails ends the start with an error naming the peer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Callable

from ..errors import ClusterError
from .backpressure import BackPressure
from .codec import RecordCodec
from .fabric import Channel, ChannelCodec, Endpoint
from .framing import ALL, HEADER, MAX_FRAME, Frame, Kind, encode_frame
from .handshake import Acceptor, Dialer
from .link import Link, LinkHandler, connect, parse_address
from .local import LocalFabric, Mailbox
from .tls import Listener, TLSError, TLSOption, resolve, serve

__all__ = ["Cluster", "ClusterFabric", "parse_address"]

log = logging.getLogger("aiotimely.cluster")

MAX_PAYLOAD = MAX_FRAME - (HEADER.size - 4)
"""The most bytes one frame carries: bigger batches are split by their channel's codec."""
HEARTBEAT_FRAME = encode_frame(Kind.HEARTBEAT)
_COUNT_BITS = 32
_COUNT_MASK = (1 << _COUNT_BITS) - 1
"""A credit's count: frames in its low 32 bits, their bytes above them."""
ABORT_GRACE = 5.0
"""Seconds a failing process waits for its peers to read why before it closes its connections."""


class Cluster(LinkHandler):
    """This process's place in a computation of ``processes`` processes with ``workers`` workers each."""

    log = log

    def __init__(
        self,
        addresses: list[str],
        index: int,
        workers: int,
        secret: bytes,
        *,
        allow_pickle: bool = False,
        connect_timeout: float = 30.0,
        peer_timeout: float = 10.0,
        tls: TLSOption = None,
    ) -> None:
        self.addresses = [parse_address(a) for a in addresses]
        self.processes = len(addresses)
        if not 0 <= index < self.processes:
            raise ClusterError(f"process index {index} is not in 0..{self.processes - 1}")
        if not secret:
            raise ClusterError("a cluster needs a shared secret: pass secret=... or set AIOTIMELY_SECRET")
        self.index = index
        self.name = f"aiotimely process {index}"
        self.workers = workers
        self.secret = secret
        self.connect_timeout = connect_timeout
        self.peer_timeout = peer_timeout
        self._beat = min(1.0, peer_timeout / 4)
        self._ticker: asyncio.TimerHandle | None = None
        self._last_tick = 0.0
        self.codec = RecordCodec(allow_pickle=allow_pickle)
        self.fabric = ClusterFabric(self)
        self.connections: dict[int, Link] = {}
        self._on_failure: Callable[[BaseException], None] | None = None
        self.error: BaseException | None = None
        self._all_connected: asyncio.Future[None] | None = None
        self._server: Listener | None = None
        self._byes: set[int] = set()
        self._bye_waiter: asyncio.Future[None] | None = None
        self._closing = False
        self._silent: set[int] = set()
        self.tls = resolve(tls)
        """The TLS configuration, or ``None`` for plain TCP."""
        self._tls_server = self.tls.server_context() if self.tls is not None else None
        self._tls_client = self.tls.client_context() if self.tls is not None else None

    def process_of(self, worker: int) -> int:
        return worker // self.workers

    @property
    def on_failure(self) -> Callable[[BaseException], None] | None:
        """Called with the first failure (a peer's, or a lost link); at once if one already happened."""
        return self._on_failure

    @on_failure.setter
    def on_failure(self, callback: Callable[[BaseException], None] | None) -> None:
        self._on_failure = callback
        if callback is not None and self.error is not None:
            callback(self.error)

    # -- starting ---------------------------------------------------------------

    async def start(self) -> None:
        """Listen, dial the processes before this one, and wait until every peer is connected."""
        loop = asyncio.get_running_loop()
        host, port = self.addresses[self.index]
        try:
            self._server = await serve(
                lambda: Link(Acceptor(self.secret, self.processes, self.index, self._may_dial_in), self),
                host, port, self._tls_server, name=self.name, log=log, reuse_address=True)
        except OSError as e:
            raise ClusterError(f"process {self.index} cannot listen on {host}:{port}: {e}") from None
        all_connected = self._all_connected = loop.create_future()
        if self.processes == 1:
            all_connected.set_result(None)
        async with asyncio.TaskGroup() as dialing:
            dials = [dialing.create_task(self._dial(peer)) for peer in range(self.index)]
            try:
                await asyncio.wait([all_connected], timeout=self.connect_timeout)
            finally:
                for dial in dials:
                    dial.cancel()
        if all_connected.done():
            all_connected.result()  # a peer that failed (or left) while we were connecting
            if self.error is not None:
                raise self.error
            self._last_tick = loop.time()
            self._ticker = loop.call_later(self._beat, self._tick)
        else:
            missing = sorted(set(range(self.processes)) - set(self.connections) - {self.index})
            where = ", ".join(f"{p} at {self.addresses[p][0]}:{self.addresses[p][1]}" for p in missing)
            raise ClusterError(f"process {self.index} could not reach process(es) {where} "
                               f"within {self.connect_timeout:g} s")

    async def _dial(self, peer: int) -> None:
        try:
            await connect(lambda: Link(Dialer(self.secret, self.processes, self.index, peer), self),
                          self.addresses[peer], log=log, tls=self._tls_client)
        except TLSError as e:
            host, port = self.addresses[peer]
            self._fail(TLSError(f"process {self.index} cannot connect to process {peer} at {host}:{port}: {e}"))

    def _may_dial_in(self, peer: int) -> bool:
        return peer > self.index and peer not in self.connections and not self._closing

    def link_established(self, conn: Link) -> None:
        self.connections[conn.process] = conn
        host, port = self.addresses[conn.process]
        log.info("process %d connected to process %d (%s:%d)", self.index, conn.process, host, port)
        waiter = self._all_connected
        if len(self.connections) == self.processes - 1 and waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- liveness ---------------------------------------------------------------

    def _tick(self) -> None:
        """Every beat: tell every peer we are alive, and fail on a peer silent for ``peer_timeout``."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        blocked = now - self._last_tick > 2 * self._beat + 0.5  # this loop was busy: we heard nothing either
        self._last_tick = now
        for peer, conn in list(self.connections.items()):
            conn.send(HEARTBEAT_FRAME)
            if blocked:
                conn.last_heard = now
            elif now - conn.last_heard > self.peer_timeout:
                self._silent.add(peer)  # nobody to wait for when we close
                host, port = self.addresses[peer]
                self._fail(ClusterError(
                    f"process {peer} ({host}:{port}) has sent nothing for {self.peer_timeout:g} s: it is stopped, "
                    "hung or cut off (AIOTIMELY_PEER_TIMEOUT or execute(peer_timeout=...) sets how long to wait)"))
        if not self._closing and self.error is None:
            self._ticker = loop.call_later(self._beat, self._tick)

    # -- frames in --------------------------------------------------------------

    def frame_received(self, conn: Link, frame: Frame) -> None:
        kind = frame.kind
        if self._closing:
            return  # this process is ending: read what peers still send, so closing does not reset them
        try:
            if kind is Kind.DATA or kind is Kind.PROGRESS:
                self.fabric.deliver(conn, frame)
            elif kind is Kind.BYE:
                self._byes.add(conn.process)
                self._check_byes()
            elif kind is Kind.CREDIT:
                self.fabric.credit(frame.payload)
            elif kind is Kind.HEARTBEAT:
                pass  # its arrival is what counts (Link.last_heard)
            elif kind is Kind.ERROR:
                message = frame.payload.decode("utf-8", "replace")
                self._fail(ClusterError(f"process {conn.process} failed: {message}"))
            else:
                raise ClusterError(f"unexpected {kind.name} frame")
        except Exception as e:  # whatever a frame does to us, it is the peer's fault: refuse it, named
            conn.reject(f"a bad {kind.name} frame ({type(e).__name__}: {e})")

    def link_broken(self, conn: Link, why: str) -> None:
        self._fail(ClusterError(f"process {conn.process} sent {why}"))

    def link_lost(self, conn: Link, exc: Exception | None) -> None:
        if self.connections.get(conn.process) is conn:
            del self.connections[conn.process]
        host, port = self.addresses[conn.process]
        if conn.process in self._byes or self._closing:
            log.info("process %d: the connection to process %d (%s:%d) closed (%d bytes sent, %d received)",
                     self.index, conn.process, host, port, conn.bytes_sent, conn.bytes_received)
            return
        log.warning("process %d lost its connection to process %d (%s:%d)%s", self.index, conn.process, host, port,
                    f": {exc}" if exc else "")
        reason = f": {exc}" if exc else ""
        self._fail(ClusterError(f"process {conn.process} ({host}:{port}) closed its connection before finishing"
                                f"{reason}; it probably died"))

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
            if self._on_failure is not None:
                self._on_failure(error)
            waiter = self._all_connected
            if waiter is not None and not waiter.done():
                waiter.set_exception(error)
        if self._bye_waiter is not None and not self._bye_waiter.done():
            self._bye_waiter.set_exception(error)

    # -- frames out -------------------------------------------------------------

    def send(self, process: int, data: bytes) -> None:
        conn = self.connections.get(process)
        if conn is None:
            # (a peer that said goodbye needs nothing more: it finished, or has its final snapshots; it may have
            # closed its connection while this process's workers still run)
            if self.error is None and not self._closing and process not in self._byes:
                self._fail(ClusterError(f"process {process} is not connected"))
            return
        conn.send(data)

    # -- ending ----------------------------------------------------------------

    async def finish(self) -> None:
        """This process is done: say goodbye, wait for every peer's goodbye, and close."""
        try:
            await self.say_goodbye()
        finally:
            await self.close()

    async def say_goodbye(self) -> None:
        """Say goodbye to every peer and wait for each one's, the links still open: what is sent meanwhile is
        delivered both ways (a suspended computation's processes run on until every one of them has its
        final snapshots)."""
        if self._bye_waiter is None:
            for conn in list(self.connections.values()):
                conn.send(encode_frame(Kind.BYE))
            self._bye_waiter = asyncio.get_running_loop().create_future()
            self._check_byes()
        if self.error is not None:
            raise self.error
        await asyncio.shield(self._bye_waiter)

    def _check_byes(self) -> None:
        waiter = self._bye_waiter
        if waiter is not None and not waiter.done() and len(self._byes) >= self.processes - 1:
            waiter.set_result(None)

    async def abort(self, error: BaseException, grace: float = ABORT_GRACE) -> None:
        """This process failed: tell every peer why, after everything already sent, and wait (up to
        ``grace`` seconds) until they have read it and closed, reading what they send meanwhile: closing
        with unread data would reset the connection, and a peer could lose the message."""
        message = str(error).encode("utf-8", "replace")[:65536]
        self._closing = True
        links = [conn for peer, conn in self.connections.items() if peer not in self._silent]
        for conn in links:
            conn.send(encode_frame(Kind.ERROR, message))
            conn.finish_sending()
        waiting = [conn.closed for conn in links if not conn.closed.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=grace)

    async def close(self) -> None:
        self._closing = True
        if self._ticker is not None:
            self._ticker.cancel()
        links = list(self.connections.values())
        for conn in links:
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        await asyncio.sleep(0)


class _RemoteMailbox:
    """A worker's mailbox in another process: pushing encodes the item and sends it there as a frame.

    Each frame sent spends a credit and its payload's length in byte credit; the receiving process returns both
    as its consumer takes the batches. Out of either, the endpoint is full: producers wait until credit comes
    back. (What a batch weighs in the receiving mailbox is counted there, from the codec's
    :meth:`~.fabric.ChannelCodec.weight`; the bytes counted here are the frames', which both ends see alike.)
    """

    __slots__ = ("_cluster", "_codec", "_channel", "_target", "_source", "_process", "credits", "credit_bytes",
                 "_waiters")

    def __init__(self, cluster: Cluster, codec: ChannelCodec, channel: Channel, target: int, source: int,
                 credits: int, credit_bytes: int) -> None:
        self._cluster = cluster
        self._codec = codec
        self._channel = channel
        self._target = target
        self._source = source
        self._process = cluster.process_of(target)
        self.credits = credits
        self.credit_bytes = credit_bytes
        self._waiters: set[Callable[[], None]] = set()

    def push(self, item: Any, nbytes: int = 0) -> None:
        cluster, (dataflow, channel) = self._cluster, self._channel
        for payload in self._codec.encode(item, MAX_PAYLOAD):
            self.credits -= 1
            self.credit_bytes -= len(payload)
            cluster.send(self._process, encode_frame(Kind.DATA, payload, source=self._source, target=self._target,
                                                     dataflow=dataflow, channel=channel))

    def full(self) -> bool:
        return self.credits <= 0 or self.credit_bytes <= 0

    def wait(self, wake: Callable[[], None]) -> None:
        self._waiters.add(wake)

    def grant(self, credits: int, credit_bytes: int) -> None:
        """The receiver took ``credits`` frames of ``credit_bytes`` bytes: as many may be sent again; wake the
        producers waiting."""
        self.credits += credits
        self.credit_bytes += credit_bytes
        if self._waiters and self.credits > 0 and self.credit_bytes > 0:
            waiters, self._waiters = self._waiters, set()
            for wake in waiters:
                wake()


class _CountedMailbox(Mailbox):
    """A mailbox of this process that other processes also feed: it numbers what is pushed and remembers
    which items came from which remote worker, and their frames' bytes, so that credit goes back to each sender
    as the consumer takes its items (it has taken ``pushed - len(queue)`` items, oldest first)."""

    __slots__ = ("pushed", "remote")

    def __init__(self, high: int | None, high_bytes: int | None) -> None:
        super().__init__(high, high_bytes)
        self.pushed = 0
        self.remote: deque[tuple[int, int, int]] = deque()
        """(number, sending worker, frame bytes) of the remote items not yet credited."""

    def push(self, item: Any, nbytes: int = 0) -> None:
        self.pushed += 1
        super().push(item, nbytes)

    def push_from(self, sender: int, item: Any, nbytes: int = 0, frame_bytes: int = 0) -> None:
        self.remote.append((self.pushed, sender, frame_bytes))
        self.push(item, nbytes)


class ClusterFabric(LocalFabric):
    """Mailboxes for this process's workers, and senders for the other processes' workers.

    Channels are ``(dataflow, channel)`` pairs of ints, as frames carry them.

    Once every worker of this process is done with a dataflow, its channels' codecs and senders go with its
    mailboxes, and frames that still arrive for it are dropped (counted in :attr:`late`): another process may
    send a progress batch after this one's workers saw the dataflow complete (one that changes nothing they
    need), or credit for batches this process sent. Nothing else can arrive for a complete dataflow: a batch of
    records in flight keeps it incomplete on the worker it goes to until that worker has taken it.
    """

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster.processes * cluster.workers, codec=cluster.codec, workers=cluster.workers)
        self.cluster = cluster
        self.first = cluster.index * cluster.workers
        self.local = range(self.first, self.first + cluster.workers)
        self.pressure = BackPressure(lambda: cluster.connections.values(), failed=lambda: cluster.error is not None,
                                     after_round=self._return_credit)
        self._codecs: dict[Channel, ChannelCodec] = {}
        self._waiting: dict[Channel, list[tuple[Link, Frame]]] = {}
        self._remote: dict[tuple[Channel, int, int], _RemoteMailbox] = {}
        self._owing: dict[tuple[Channel, int], _CountedMailbox] = {}
        self._codecs_of: dict[int, list[Channel]] = {}
        self._remote_of: dict[int, list[tuple[Channel, int, int]]] = {}
        self.late = 0
        """Frames dropped because they arrived for a dataflow this process was done with."""

    def _new_mailbox(self) -> Mailbox:
        return _CountedMailbox(self.pressure.mailbox_high, self.pressure.mailbox_high_bytes)

    def register(self, channel: Channel, codec: ChannelCodec) -> None:
        if channel not in self._codecs:
            self._codecs_of.setdefault(channel[0], []).append(channel)
        self._codecs[channel] = codec
        for conn, frame in self._waiting.pop(channel, ()):
            try:
                self._deliver(conn, frame, codec)
            except Exception as e:  # the peer's fault: refuse it, named
                conn.reject(f"a bad {frame.kind.name} frame ({type(e).__name__}: {e})")

    def _codec(self, channel: Channel) -> ChannelCodec:
        codec = self._codecs.get(channel)
        if codec is None:
            raise ClusterError(f"channel {channel} was used before it was registered")
        return codec

    def mailboxes(self, channel: Channel, source: int = 0xFFFFFFFF) -> list[Endpoint]:
        codec = self._codec(channel)
        return [self.mailbox(channel, w) if w in self.local else self._remote_box(channel, codec, w, source)
                for w in range(self.peers)]

    def _remote_box(self, channel: Channel, codec: ChannelCodec, target: int, source: int) -> _RemoteMailbox:
        key = (channel, target, source)
        box = self._remote.get(key)
        if box is None:
            box = self._remote[key] = _RemoteMailbox(self.cluster, codec, channel, target, source,
                                                     self.pressure.window, self.pressure.window_bytes)
            self._remote_of.setdefault(channel[0], []).append(key)
        return box

    def broadcast(self, channel: Channel, item: Any, skip: int | None = None) -> None:
        for w in self.local:
            if w != skip:
                self.mailbox(channel, w).push(item)
        cluster = self.cluster
        if cluster.processes > 1:
            dataflow, number = channel
            for payload in self._codec(channel).encode(item, MAX_PAYLOAD):
                frame = encode_frame(Kind.PROGRESS, payload, source=0xFFFFFFFF if skip is None else skip,
                                     target=ALL, dataflow=dataflow, channel=number)
                for process in range(cluster.processes):
                    if process != cluster.index:
                        cluster.send(process, frame)

    def deliver(self, conn: Link, frame: Frame) -> None:
        """A DATA or PROGRESS frame from a peer: decode it into the right mailbox(es)."""
        channel = (frame.dataflow, frame.channel)
        codec = self._codecs.get(channel)
        if codec is None:
            if self.released(frame.dataflow):  # late: this process is done with that dataflow
                self.late += 1
                return
            self._waiting.setdefault(channel, []).append((conn, frame))  # not built here yet
            return
        self._deliver(conn, frame, codec)

    def _deliver(self, conn: Link, frame: Frame, codec: ChannelCodec) -> None:
        channel = (frame.dataflow, frame.channel)
        item = codec.decode(frame.payload)
        if frame.kind is Kind.PROGRESS:
            for w in self.local:
                self.mailbox(channel, w).push(item)
            return
        target = frame.target
        if target not in self.local:
            raise ClusterError(f"a data frame for worker {target}, which is not in this process")
        if self.cluster.process_of(frame.source) != conn.process:
            raise ClusterError(f"a data frame from worker {frame.source}, which is not in process {conn.process}")
        box = self.mailbox(channel, target)
        assert isinstance(box, _CountedMailbox)
        box.push_from(frame.source, item, codec.weight(item), len(frame.payload))
        self._owing[(channel, target)] = box

    # -- credit -----------------------------------------------------------------

    def _return_credit(self) -> None:
        """After a round: give each sender back the credit for what our consumers took of its batches."""
        if not self._owing:
            return
        grants: dict[int, list[int]] = {}
        settled = []
        for (channel, target), box in self._owing.items():
            remote = box.remote
            taken = box.pushed - len(box.queue)
            per_sender: dict[int, list[int]] = {}
            while remote and remote[0][0] < taken:
                _, sender, size = remote.popleft()
                counts = per_sender.get(sender)
                if counts is None:
                    per_sender[sender] = [1, size]
                else:
                    counts[0] += 1
                    counts[1] += size
            for sender, (n, size) in per_sender.items():
                grants.setdefault(self.cluster.process_of(sender), []).extend(
                    (*channel, sender, target, n | size << _COUNT_BITS))
            if not remote:
                settled.append((channel, target))
        for key in settled:
            del self._owing[key]
        codec = self.cluster.codec
        for process, flat in grants.items():
            self.cluster.send(process, encode_frame(Kind.CREDIT, codec.pack(flat)))

    def credit(self, payload: bytes) -> None:
        """A CREDIT frame: frames we sent were taken. Each is a ``(dataflow, channel, source, target, count)``
        quintuple whose count holds the frames taken in its low 32 bits and their bytes above them."""
        flat = self.cluster.codec.unpack(payload)
        if type(flat) is not tuple or len(flat) % 5:
            raise ClusterError("a credit frame must hold (dataflow, channel, source, target, count) quintuples")
        for i in range(0, len(flat), 5):
            dataflow, number, source, target, n = flat[i:i + 5]
            box = self._remote.get(((dataflow, number), target, source))
            if box is None or type(n) is not int or n & _COUNT_MASK <= 0 or n < 0:
                if box is None and type(dataflow) is int and self.released(dataflow):
                    self.late += 1  # for batches taken after this process was done with their dataflow
                    continue
                raise ClusterError(f"credit for a channel this process never sent on: {flat[i:i + 5]!r}")
            box.grant(n & _COUNT_MASK, n >> _COUNT_BITS)

    # -- dataflows --------------------------------------------------------------

    def _release(self, dataflow: int) -> None:
        """Forget ``dataflow``'s mailboxes, codecs and senders, and what waited for it to be built."""
        super()._release(dataflow)
        codecs = self._codecs
        for channel in self._codecs_of.pop(dataflow, ()):
            codecs.pop(channel, None)
        if self._waiting:  # (frames for a channel this process never built: none, in a dataflow built alike)
            for channel in [c for c in self._waiting if c[0] == dataflow]:
                del self._waiting[channel]
        remote = self._remote
        for key in self._remote_of.pop(dataflow, ()):
            remote.pop(key, None)
