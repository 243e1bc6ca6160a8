"""One authenticated TCP connection on asyncio: the handshake, then frames.

The cluster, captured streams (:mod:`.events`) and the Spark ingress all talk
through a :class:`Link`: it runs the handshake (:mod:`.handshake`) as the dialing
or the accepting side under a time limit, refuses (logs and closes) a connection
that sends garbage or fails to authenticate, then hands every frame to its
:class:`LinkHandler`. It also tracks whether the transport's write buffer is full.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Callable

from ..errors import ClusterError
from .framing import MAX_FRAME, Frame, FrameDecoder, FrameError
from .handshake import Acceptor, Dialer, HandshakeError
from .tls import TLS_TO_PLAINTEXT, TLSError, dial, looks_like_tls

__all__ = ["Link", "LinkHandler", "LinkStatistics", "connect", "parse_address", "HANDSHAKE_TIMEOUT",
           "HANDSHAKE_MAX_FRAME"]

HANDSHAKE_TIMEOUT = 5.0
HANDSHAKE_MAX_FRAME = 4096  # nobody unauthenticated gets to make us buffer more than this
HIGH_WATER = 4 * 1024 * 1024
LOW_WATER = 1024 * 1024


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(f"address {address!r} is not host:port")
    return host or "127.0.0.1", int(port)


@dataclass(frozen=True, slots=True)
class LinkStatistics:
    """The traffic of one connection: bytes and frames (one per :meth:`Link.send`), sent and received, to and from
    process ``peer`` (``None`` before the handshake said who it is)."""

    peer: int | None
    bytes_sent: int
    bytes_received: int
    frames_sent: int
    frames_received: int


class LinkHandler:
    """What a link's owner does with it; ``name`` and ``log`` say who refuses connections, and where."""

    name = "aiotimely"
    log = logging.getLogger("aiotimely")

    def link_established(self, link: Link) -> None:
        """The handshake succeeded."""

    def frame_received(self, link: Link, frame: Frame) -> None:
        """A frame after the handshake; call ``link.reject(why)`` if it makes no sense."""

    def link_broken(self, link: Link, why: str) -> None:
        """An established link sent something bad (it is closed next)."""
        link.log_refusal(why)

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        """An established link closed."""


class Link(asyncio.Protocol):
    """A connection that authenticates with ``shake``, then hands frames to ``handler``."""

    def __init__(self, shake: Dialer | Acceptor, handler: LinkHandler) -> None:
        self.shake = shake
        self.handler = handler
        self.decoder = FrameDecoder(HANDSHAKE_MAX_FRAME)
        self.transport: asyncio.Transport | None = None
        self.established = False
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        """Done when the handshake succeeded; failed with a :class:`ClusterError` if it did not."""
        self.writable = loop.create_future()
        self.writable.set_result(None)
        self.closed: asyncio.Future[None] = loop.create_future()
        """Done when the connection has closed."""
        self.last_heard = loop.time()
        """When bytes last arrived from the peer (loop time)."""
        self._timer: asyncio.TimerHandle | None = None
        self.bytes_sent = self.bytes_received = self.frames_sent = self.frames_received = 0
        """Traffic on this connection, handshake included (see :meth:`statistics`)."""

    def statistics(self) -> LinkStatistics:
        """The bytes and frames this connection has sent and received so far, with the peer's process index."""
        return LinkStatistics(self.peer, self.bytes_sent, self.bytes_received, self.frames_sent,
                              self.frames_received)

    @property
    def peer(self) -> int | None:
        """The peer's process index: the one dialed, or the one that said hello."""
        return self.shake.expect if isinstance(self.shake, Dialer) else self.shake.peer

    @property
    def process(self) -> int:
        """The peer's process index, once the handshake told it."""
        peer = self.peer
        if peer is None:
            raise ClusterError("this connection has not said which process it is yet")
        return peer

    # -- asyncio callbacks --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)  # type: ignore[attr-defined]
        self._timer = asyncio.get_running_loop().call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)
        if isinstance(self.shake, Dialer):
            hello = self.shake.start()
            self.bytes_sent += len(hello)
            self.frames_sent += 1
            transport.write(hello)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.last_heard = asyncio.get_running_loop().time()
        self.bytes_received += len(data)
        decoder = self.decoder
        decoder.append(data)
        received = self.handler.frame_received
        transport = self.transport
        assert transport is not None
        while not transport.is_closing():
            try:
                frame = decoder.next_frame()
            except FrameError as e:
                self.reject(TLS_TO_PLAINTEXT if not self.established and looks_like_tls(data)
                            else f"malformed frames: {e}")
                return
            if frame is None:
                return
            self.frames_received += 1
            if self.established:
                received(self, frame)
            else:
                self._handshake(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
        if not self.ready.done():
            if isinstance(self.shake, Acceptor) and self.shake.peer is not None:
                self.log_refusal("it left during the handshake (it may not know the shared secret)")
            self._fail_ready(ClusterError(f"the connection to process {self.peer} closed during the handshake"))
        if not self.writable.done():
            self.writable.set_result(None)
        if self.established:
            self.handler.link_lost(self, exc)

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if not self.writable.done():
            self.writable.set_result(None)

    # -- handshake --------------------------------------------------------------

    def _handshake(self, frame: Frame) -> None:
        shake = self.shake
        try:
            reply = shake.receive(frame)
        except HandshakeError as e:
            self.reject(f"handshake failed: {e}")
            return
        if reply:
            self.send(reply)
        if shake.done:
            self.established = True
            self.decoder.limit(MAX_FRAME)
            if self._timer is not None:
                self._timer.cancel()
            self.handler.link_established(self)
            if not self.ready.done():
                self.ready.set_result(self)

    def _handshake_timeout(self) -> None:
        if not self.established:
            self.reject(f"no handshake within {HANDSHAKE_TIMEOUT:g} s")

    def _fail_ready(self, error: ClusterError) -> None:
        if not self.ready.done():
            self.ready.set_exception(error)
            self.ready.exception()  # looked at: no "never retrieved" warning

    # -- refusing and sending ------------------------------------------------------------

    def reject(self, why: str) -> None:
        """Close the connection because of ``why``: before the handshake it is refused (logged);
        after it, the handler hears of it."""
        if self.established:
            self.handler.link_broken(self, why)
        else:
            self.log_refusal(why)
            self._fail_ready(ClusterError(why))
        if self.transport is not None:
            self.transport.abort()

    def log_refusal(self, why: str) -> None:
        handler = self.handler
        where = self.transport.get_extra_info("peername") if self.transport else None
        if isinstance(self.shake, Dialer):
            handler.log.warning("%s: connecting to process %d at %s failed: %s", handler.name, self.peer, where, why)
        else:
            handler.log.warning("%s refused a connection from %s: %s", handler.name, where, why)

    def send(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self.bytes_sent += len(data)
            self.frames_sent += 1
            transport.write(data)

    def congested(self) -> bool:
        """True while the write buffer is over its high-water mark."""
        return not self.writable.done()

    def finish_sending(self) -> None:
        """Send nothing more: the peer reads what was sent, then the end of the stream (we still read)."""
        transport = self.transport
        if transport is not None and not transport.is_closing() and transport.can_write_eof():
            transport.write_eof()



async def connect(factory: Callable[[], Link], address: tuple[str, int], *, deadline: float | None = None,
                  log: logging.Logger | None = None, tls: ssl.SSLContext | None = None) -> Link:
    """Dial ``address`` and wait for the handshake, retrying with backoff while the peer is not up yet
    (it may still be starting); past ``deadline`` (loop time) the last error is raised. With ``tls`` (a client
    context, :mod:`.tls`) the connection is TLS; a failed TLS handshake raises :class:`.tls.TLSError` at once."""
    loop = asyncio.get_running_loop()
    host, port = address
    delay = 0.02
    while True:
        try:
            if tls is not None:
                return await dial(factory, host, port, tls)
            _, link = await loop.create_connection(factory, host, port)
            await link.ready
            return link
        except TLSError:
            raise  # something listens, and TLS with it failed: trying again would fail again
        except (OSError, ClusterError) as e:
            if deadline is not None and loop.time() > deadline:
                raise
            if log is not None:
                log.debug("connecting to %s:%d: %s; retrying", host, port, e)
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.5)
