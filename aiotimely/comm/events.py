"""Captured streams over TCP: one computation captures, another replays, live.

The capturing side connects an :class:`EventWriter` and captures into it
(``stream.capture_into(writer)``); the replaying side accepts the connection with
:meth:`EventReader.accept`, which gives a live :class:`~aiotimely.dataflow.capture.Captured`
to ``aiotimely.replay``. Both authenticate with the shared secret (``secret=`` or
``AIOTIMELY_SECRET``), using the cluster's framing and handshake.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..dataflow.capture import Captured, Messages, Progress
from ..errors import ClusterError
from .cluster import HANDSHAKE_TIMEOUT, parse_address
from .codec import CodecError, RecordCodec
from .framing import Frame, FrameDecoder, FrameError, Kind, encode_frame
from .handshake import Acceptor, Dialer, HandshakeError, shared_secret

__all__ = ["EventWriter", "EventReader"]

log = logging.getLogger("aiotimely.events")


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "captured streams over TCP")


class _Link(asyncio.Protocol):
    """A connection that runs the handshake, then hands frames to ``on_frame``."""

    def __init__(self, shake: Dialer | Acceptor, on_frame=None, on_lost=None) -> None:
        self.shake = shake
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.decoder = FrameDecoder(4096)
        self.transport: asyncio.Transport | None = None
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if isinstance(self.shake, Dialer):
            transport.write(self.shake.start())  # type: ignore[attr-defined]
        asyncio.get_running_loop().call_later(HANDSHAKE_TIMEOUT, self._fail, "no handshake in time")

    def data_received(self, data: bytes) -> None:
        self.decoder.append(data)
        try:
            while (frame := self.decoder.next_frame()) is not None:
                if self.shake.done:
                    self.on_frame(frame)
                    continue
                reply = self.shake.receive(frame)
                if reply:
                    self.transport.write(reply)
                if self.shake.done:
                    self.decoder.limit(1 << 28)
                    if not self.ready.done():
                        self.ready.set_result(self)
        except (FrameError, HandshakeError, CodecError) as e:
            self._fail(str(e))

    def _fail(self, why: str) -> None:
        if self.shake.done:
            if self.ready.done() and self.on_lost and self.transport and not self.transport.is_closing():
                self.on_lost(ClusterError(f"bad event stream: {why}"))
        else:
            log.warning("event stream connection refused: %s", why)
            if not self.ready.done():
                self.ready.set_exception(ClusterError(why))
                self.ready.exception()
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            if isinstance(self.shake, Acceptor) and self.shake.peer is not None:
                log.warning("event stream connection refused: the writer left during the handshake "
                            "(it may not know the shared secret)")
            self.ready.set_exception(ClusterError("the connection closed during the handshake"))
            self.ready.exception()
        elif self.on_lost is not None:
            self.on_lost(None)


class EventWriter:
    """The sending end of a captured stream: ``stream.capture_into(writer)``."""

    def __init__(self, link: _Link, codec: RecordCodec) -> None:
        self._link = link
        self._codec = codec
        self._encode = None

    @classmethod
    async def connect(cls, address: str, *, secret: str | bytes | None = None, timeout: float = 30.0,
                      allow_pickle: bool = False) -> EventWriter:
        """Connect to an :meth:`EventReader.accept` at ``address`` (``host:port``), retrying while it starts."""
        key = _secret(secret)
        host, port = parse_address(address)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.02
        while True:
            try:
                _, link = await loop.create_connection(lambda: _Link(Dialer(key, 2, 1, expect=0)), host, port)
                await link.ready
                return cls(link, RecordCodec(allow_pickle=allow_pickle))
            except (OSError, ClusterError) as e:
                if loop.time() > deadline:
                    raise ClusterError(f"could not deliver a captured stream to {address}: {e}") from None
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.5)

    def attach(self, ttype: Any) -> None:
        self._encode = ttype.encode

    def push(self, event: Any) -> None:
        encode = self._encode or (lambda t: t)
        if type(event) is Messages:
            payload = self._codec.pack(("M", encode(event.time), event.records))
        else:
            payload = self._codec.pack(("P", [(encode(t), d) for t, d in event.changes]))
        self._link.transport.write(encode_frame(Kind.EVENTS, payload))

    def close(self) -> None:
        transport = self._link.transport
        if transport is not None and not transport.is_closing():
            transport.write(encode_frame(Kind.BYE))
            transport.close()


class EventReader:
    """The receiving end: accepts one captured stream and replays it as it arrives."""

    @staticmethod
    async def accept(address: str, *, secret: str | bytes | None = None,
                     allow_pickle: bool = False) -> Captured:
        """Listen on ``address``, accept one authenticated writer, and return its live events.

        Give the result (or several) to ``aiotimely.replay``. If the writer disconnects
        before its stream is complete, the replaying dataflow fails, saying so.
        """
        key = _secret(secret)
        host, port = parse_address(address)
        loop = asyncio.get_running_loop()
        codec = RecordCodec(allow_pickle=allow_pickle)
        captured = Captured(closed=False, encoded=True)
        accepted: asyncio.Future = loop.create_future()

        def on_frame(frame: Frame) -> None:
            if frame.kind is Kind.EVENTS:
                tag, *rest = codec.unpack(frame.payload)
                captured.push(Messages(rest[0], rest[1]) if tag == "M" else Progress([tuple(c) for c in rest[0]]))
            elif frame.kind is Kind.BYE:
                captured.close()

        def on_lost(error: Exception | None) -> None:
            if not captured.closed:
                captured.error = error or ClusterError(
                    f"the computation sending the captured stream to {address} disconnected before it was complete")
                captured.close()

        def protocol() -> _Link:
            link = _Link(Acceptor(key, 2, 0, allowed=lambda i: not accepted.done()), on_frame, on_lost)
            link.ready.add_done_callback(
                lambda f: accepted.done() or f.exception() is not None or accepted.set_result(None))
            return link

        server = await loop.create_server(protocol, host, port, reuse_address=True)
        try:
            await accepted
        finally:
            server.close()
        return captured
