"""The wire every Spark connector speaks, written once: blocking clients on Spark's side, listeners on ours.

Spark calls our classes from its own threads and processes (executors, the driver's
listener bus), so its side is a blocking socket: :class:`WireClient` dials, does the
cluster's shared-secret handshake (:mod:`aiotimely.comm.handshake`) over its framing
(:mod:`aiotimely.comm.framing`), then exchanges msgpack messages, each an array whose
first element names it, in DATA frames on channel :data:`CONTROL`. Our side is a
listener on the worker's event loop: an :class:`Endpoint` (address, secret and TLS,
checked when the dataflow is built) serves links whose :class:`WireConnection`
decodes the messages and refuses a malformed one with the layer's error. What the
messages mean is each connector's own: the row ingress (``foreach``), the Arrow
ingress (``format("aiotimely")`` writes) and the publisher (``format("aiotimely")``
reads).
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Self

import msgpack

from ...comm.framing import MAX_FRAME, Frame, FrameDecoder, Kind, encode_frame
from ...comm.handshake import Acceptor, Dialer, HandshakeError, shared_secret
from ...comm.link import HANDSHAKE_MAX_FRAME, Link, LinkHandler, parse_address
from ...comm.tls import Listener, TLSConfig, TLSError, TLSOption, connect_blocking, resolve, serve
from ...errors import ClusterError, RecoveryError

if TYPE_CHECKING:
    from ...scope import Scope

__all__ = ["CONTROL", "WireClient", "IngressClient", "WireConnection", "Endpoint", "control_message", "reply",
           "ship_secret", "client_context", "tls_refusal", "refuse_recovery"]

CONTROL = 0
"""The frame ``channel`` of messages; a connector may carry other payloads on other channels."""


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False)


def ship_secret(secret: str | bytes | None) -> str | bytes | None:
    """The secret Spark's executors will use: ``secret``, or this process's ``AIOTIMELY_SECRET`` now,
    since the executors' environment may not have it."""
    return secret if secret is not None else os.environ.get("AIOTIMELY_SECRET")


def client_context(tls: TLSConfig | None) -> ssl.SSLContext | None:
    """The client context for the TLS configuration a Spark-side class shipped (``None``: plain TCP)."""
    return tls.client_context() if tls is not None else None


def tls_refusal(peer: str, me: str, error: BaseException) -> TLSError:
    """What a TLS client says when ``peer`` closed the connection during the handshake: most likely it does
    not trust ``me``'s certificate (the peer's log says which)."""
    return TLSError(f"{peer} closed the connection during the handshake, over TLS: most likely it does not trust "
                    f"{me}'s certificate (its log says which): {error}")


# -- Spark's side: a blocking client ---------------------------------------------------------------


class WireClient:
    """A blocking connection to one of our listeners: handshake, then messages (and acknowledgements); closed
    by :meth:`close`, or on leaving ``with client:``.

    Subclasses say who needs the secret (:attr:`_needs_secret`, for the error when none
    is set), how they reach the listener (:meth:`_dial`), what a failed handshake means
    (:meth:`_refused`), how they read (:meth:`_receive`), what a lost connection raises
    (:meth:`_lost`) and how their messages are packed (:meth:`_pack`, :meth:`_unpack`).
    """

    _needs_secret = "the Spark ingress"

    def __init__(self, address: str, secret: str | bytes | None = None, timeout: float = 30.0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.address = address
        host, port = parse_address(address)
        self._sock = self._dial(host, port, timeout, tls)
        self._decoder = FrameDecoder(HANDSHAKE_MAX_FRAME)
        try:
            dialer = Dialer(shared_secret(secret, self._needs_secret), 2, 1, expect=0)
            self._sock.sendall(dialer.start())
            while not dialer.done:
                answer = dialer.receive(self._next_frame())
                if answer:
                    self._sock.sendall(answer)
        except (HandshakeError, ClusterError, OSError) as e:
            self.close()
            refused = self._refused(e, tls is not None)
            if refused is None:
                raise
            raise refused from None
        self._decoder.limit(MAX_FRAME)

    def _dial(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None) -> socket.socket:
        return connect_blocking(host, port, timeout, tls)

    def _refused(self, error: BaseException, over_tls: bool) -> Exception | None:
        """The error to raise for a failed handshake (``None``: ``error`` itself)."""
        return None

    def _receive(self) -> bytes:
        return self._sock.recv(65536)

    def _lost(self, what: str) -> ClusterError:
        return ClusterError(f"the aiotimely ingress {what}")

    _pack = staticmethod(_pack)
    _unpack = staticmethod(_unpack)

    def _next_frame(self) -> Frame:
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            data = self._receive()
            if not data:
                raise self._lost("closed the connection")
            self._decoder.append(data)

    def send(self, *message: Any) -> None:
        self._sock.sendall(encode_frame(Kind.DATA, self._pack(message), channel=CONTROL))

    def request(self, *message: Any) -> Any:
        """Send and wait for the listener's acknowledgement."""
        self.send(*message)
        return self._unpack(self._next_frame().payload)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


IngressClient = WireClient
"""The name :mod:`aiotimely.connectors.spark` has always offered for a client of its row ingress."""


# -- our side: listeners -----------------------------------------------------------------------------


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


def reply(link: Link, *message: Any, pack: Callable[[Any], bytes] = _pack) -> None:
    """Answer a client's message (an array, first what it is: ``"ok"``, ``"error"``, ...)."""
    link.send(encode_frame(Kind.DATA, pack(list(message)), channel=CONTROL))


class WireConnection(LinkHandler):
    """One authenticated connection from Spark to a listener of ours: its messages go to :meth:`control`,
    other frames to :meth:`data`; anything they cannot make sense of (``ValueError``, ``TypeError``,
    ``IndexError``) refuses the connection, logged as ``name``'s refusal in ``log``."""

    def __init__(self, name: str, log: logging.Logger) -> None:
        self.name = name
        self.log = log

    def frame_received(self, link: Link, frame: Frame) -> None:
        try:
            if frame.kind is not Kind.DATA:
                raise ValueError(f"unexpected {frame.kind.name} frame")
            if frame.channel == CONTROL:
                self.control(link, control_message(frame))
            else:
                self.data(link, frame)
        except (ValueError, TypeError, IndexError) as e:
            link.reject(str(e))

    def control(self, link: Link, message: tuple[Any, ...]) -> None:
        """A message; answer with :func:`reply`, or raise ``ValueError`` to refuse the connection."""
        raise NotImplementedError

    def data(self, link: Link, frame: Frame) -> None:
        """A DATA frame on a channel other than :data:`CONTROL`."""
        raise ValueError(f"unknown channel {frame.channel}")


class Endpoint:
    """Where a listener of ours listens and whom it lets in, checked when the dataflow is built: the
    ``host:port`` (port 0: a free one), the shared secret (``secret``, else ``AIOTIMELY_SECRET``; an error
    naming ``what`` if neither is set) and TLS (``tls``; default ``AIOTIMELY_TLS_*``; ``False``: none)."""

    def __init__(self, address: str, secret: str | bytes | None, what: str, tls: TLSOption) -> None:
        self.key = shared_secret(secret, what)
        self.tls = resolve(tls)
        """The TLS configuration, or ``None`` for plain TCP."""
        self.context = self.tls.server_context() if self.tls is not None else None
        self.host, self.port = parse_address(address)

    async def listen(self, connection: Callable[[], LinkHandler], *, name: str, log: logging.Logger,
                     allowed: Callable[[int], bool] = lambda dialer: True) -> tuple[Listener, str]:
        """Listen (on the running loop) for clients, each handled by a new ``connection()``; the server, and
        the ``host:port`` it listens on. ``allowed(i)`` says whether a client dialing as process ``i`` may."""
        server = await serve(lambda: Link(Acceptor(self.key, 2, 0, allowed=allowed), connection()),
                             self.host, self.port, self.context, name=name, log=log)
        listening = server.sockets[0].getsockname()
        return server, f"{listening[0]}:{listening[1]}"


def refuse_recovery(scope: Scope[Any], what: str, why: str) -> None:
    """Refuse to build ``what`` into a recoverable dataflow (``scope``'s), saying ``why`` it cannot be one."""
    if scope.dataflow.snapshotter is not None:
        raise RecoveryError(f"{what} cannot be in a recoverable dataflow yet: {why}; build this dataflow "
                            "without recovery")
