"""Captured streams over TCP: one computation captures, another replays, live.

The capturing side connects an :class:`EventWriter` and captures into it
(``stream.capture_into(writer)``); the replaying side accepts the connection with
:meth:`EventReader.accept`, which gives a live :class:`~aiotimely.dataflow.capture.Captured`
to ``aiotimely.replay``. Both authenticate with the shared secret (``secret=`` or
``AIOTIMELY_SECRET``), using the cluster's framing and handshake; with ``tls=`` (a
:class:`~aiotimely.comm.tls.TLSConfig`, by default from ``AIOTIMELY_TLS_*``) the stream
is encrypted, and a peer that does not speak TLS (or is not trusted) is refused, named.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from ..comm.codec import CodecError, RecordCodec
from ..comm.framing import Frame, Kind, encode_frame
from ..comm.handshake import Acceptor, Dialer, shared_secret
from ..comm.link import Link, LinkHandler, connect, parse_address
from ..comm.tls import TLSError, TLSOption, resolve, serve
from ..dataflow.capture import Captured, Messages, Progress
from ..errors import ClusterError

__all__ = ["EventWriter", "EventReader"]

log = logging.getLogger("aiotimely.events")


def _secret(secret: str | bytes | None) -> bytes:
    return shared_secret(secret, "captured streams over TCP")


class _Events(LinkHandler):
    """Either end of a captured stream over TCP; the reading end turns frames into events."""

    name = "aiotimely event stream"
    log = log

    def __init__(self, codec: RecordCodec, captured: Captured | None = None, address: str = "") -> None:
        self.codec = codec
        self.captured = captured
        self.address = address

    def frame_received(self, link: Link, frame: Frame) -> None:
        captured = self.captured
        if captured is None:
            return
        try:
            if frame.kind is Kind.EVENTS:
                tag, *rest = self.codec.unpack(frame.payload)
                captured.push(Messages(rest[0], rest[1]) if tag == "M" else Progress([tuple(c) for c in rest[0]]))
            elif frame.kind is Kind.BYE:
                captured.close()
        except (CodecError, ValueError, TypeError, IndexError) as e:
            link.reject(f"a bad {frame.kind.name} frame ({e})")

    def link_broken(self, link: Link, why: str) -> None:
        self._end(ClusterError(f"bad event stream: {why}"))

    def link_lost(self, link: Link, exc: Exception | None) -> None:
        self._end(ClusterError(f"the computation sending the captured stream to {self.address} disconnected "
                               "before it was complete"))

    def _end(self, error: ClusterError) -> None:
        captured = self.captured
        if captured is not None and not captured.closed:
            captured.error = error
            captured.close()


class EventWriter:
    """The sending end of a captured stream: ``stream.capture_into(writer)``."""

    def __init__(self, link: Link, codec: RecordCodec) -> None:
        self._link = link
        self._codec = codec
        self._encode: Callable[[Any], Any] | None = None

    @classmethod
    async def connect(cls, address: str, *, secret: str | bytes | None = None, timeout: float = 30.0,
                      allow_pickle: bool = False, tls: TLSOption = None) -> EventWriter:
        """Connect to an :meth:`EventReader.accept` at ``address`` (``host:port``), retrying while it starts;
        over TLS with ``tls`` (default: ``AIOTIMELY_TLS_*``; ``False``: never)."""
        key = _secret(secret)
        config = resolve(tls)
        context = config.client_context() if config is not None else None
        codec = RecordCodec(allow_pickle=allow_pickle)
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            link = await connect(lambda: Link(Dialer(key, 2, 1, expect=0), _Events(codec)), parse_address(address),
                                 deadline=deadline, tls=context)
        except (OSError, ClusterError) as e:
            error = TLSError if isinstance(e, TLSError) else ClusterError
            raise error(f"could not deliver a captured stream to {address}: {e}") from None
        return cls(link, codec)

    def attach(self, ttype: Any) -> None:
        self._encode = ttype.encode

    def push(self, event: Any) -> None:
        encode: Callable[[Any], Any] = self._encode or (lambda t: t)
        if type(event) is Messages:
            payload = self._codec.pack(("M", encode(event.time), event.records))
        else:
            payload = self._codec.pack(("P", [(encode(t), d) for t, d in event.changes]))
        self._link.send(encode_frame(Kind.EVENTS, payload))

    def close(self) -> None:
        transport = self._link.transport
        if transport is not None and not transport.is_closing():
            transport.write(encode_frame(Kind.BYE))
            transport.close()


class EventReader:
    """The receiving end: accepts one captured stream and replays it as it arrives."""

    @staticmethod
    async def accept(address: str, *, secret: str | bytes | None = None,
                     allow_pickle: bool = False, tls: TLSOption = None) -> Captured:
        """Listen on ``address``, accept one authenticated writer, and return its live events.

        Give the result (or several) to ``aiotimely.replay``. If the writer disconnects
        before its stream is complete, the replaying dataflow fails, saying so. With ``tls``
        (default: ``AIOTIMELY_TLS_*``; ``False``: never) only a TLS writer is accepted.
        """
        key = _secret(secret)
        config = resolve(tls)
        context = config.server_context() if config is not None else None
        host, port = parse_address(address)
        loop = asyncio.get_running_loop()
        captured = Captured(closed=False, encoded=True)
        events = _Events(RecordCodec(allow_pickle=allow_pickle), captured, address)
        accepted: asyncio.Future[None] = loop.create_future()

        def ready(f: asyncio.Future[Any]) -> None:
            if not accepted.done() and f.exception() is None:
                accepted.set_result(None)

        def protocol() -> Link:
            link = Link(Acceptor(key, 2, 0, allowed=lambda i: not accepted.done()), events)
            link.ready.add_done_callback(ready)
            return link

        server = await serve(protocol, host, port, context, name=_Events.name, log=log, reuse_address=True)
        try:
            await accepted
        finally:
            server.close()
        return captured
