"""TLS for every TCP connection aiotimely makes: the cluster, captured streams, the Spark ingress and publisher.

TLS encrypts what crosses the network and, with a CA, proves each side holds a
certificate that CA signed. The shared-secret handshake (:mod:`.handshake`) still
runs inside it and stays the membership check: TLS adds secrecy and integrity,
the secret says "this peer belongs to this computation".

A :class:`TLSConfig` names PEM files::

    TLSConfig(cert="node.pem", key="node.key", ca="ca.pem")

* ``cert``/``key``: this process's certificate chain and private key (``key`` may be
  omitted when the key is in the ``cert`` file). Anything that listens needs them;
  a client that only dials (a Spark task, an ``EventWriter``) may go without, unless
  the server asks for client certificates.
* ``ca``: the certificates to trust. Given, the peer's certificate must chain to it,
  on both sides: **mutual TLS** (a listener refuses a dialer without a certificate
  the CA signed). Not given, a dialer trusts the system's certificate authorities
  and a listener asks for no client certificate.
* ``check_hostname``: whether a dialer also requires the listener's certificate to
  name the host it dialed (a DNS name or an IP address in its subjectAltName). The
  default: off with a ``ca`` (a CA made for the cluster signs only its members, and
  the cluster's addresses are often IPs that change), on without one (the system's
  CAs sign certificates for anybody: only the name makes one the right one).

When no ``tls=`` is given, :meth:`TLSConfig.from_env` reads ``AIOTIMELY_TLS_CERT``,
``AIOTIMELY_TLS_KEY`` and ``AIOTIMELY_TLS_CA`` (file paths; ``aiotimely run
--tls-cert/--tls-key/--tls-ca`` set them) and ``AIOTIMELY_TLS_CHECK_HOSTNAME``
(``1``/``0``); ``tls=False`` turns TLS off whatever the environment says.

The asyncio side: :func:`serve` listens and :func:`dial` connects, each doing the
TLS handshake before the connection's protocol sees a byte,
so that a failure is caught here and named — the peer's address and what went
wrong ("a plaintext connection to a TLS listener", "certificate not trusted") —
rather than lost in asyncio's debug log. A listener logs the refusal and goes on
serving; a dialer raises :class:`TLSError`, which is not worth retrying.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Protocol, TypeVar, Union

from ..errors import ClusterError

__all__ = ["TLSConfig", "TLSError", "TLSOption", "TLSServer", "Listener", "resolve", "serve", "dial",
           "connect_blocking", "looks_like_tls", "TLS_TO_PLAINTEXT", "ENV_CERT", "ENV_KEY", "ENV_CA",
           "ENV_CHECK_HOSTNAME", "TLS_HANDSHAKE_TIMEOUT"]

ENV_CERT = "AIOTIMELY_TLS_CERT"
ENV_KEY = "AIOTIMELY_TLS_KEY"
ENV_CA = "AIOTIMELY_TLS_CA"
ENV_CHECK_HOSTNAME = "AIOTIMELY_TLS_CHECK_HOSTNAME"
TLS_HANDSHAKE_TIMEOUT = 10.0
"""Seconds a TLS handshake may take before the connection is dropped."""
TLS_TO_PLAINTEXT = ("a TLS connection to a plaintext listener: the peer uses TLS and this process does not "
                    "(give both the same --tls-* options / AIOTIMELY_TLS_* variables)")


class TLSError(ClusterError):
    """A TLS handshake failed, or TLS is misconfigured: says which peer, and why (retrying will not help)."""


@dataclass(frozen=True)
class TLSConfig:
    """PEM files for TLS: this process's ``cert`` and ``key``, the ``ca`` to trust (mutual TLS when given)."""

    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    check_hostname: bool | None = None

    def __post_init__(self) -> None:
        if self.cert is None and self.key is not None:
            raise TLSError(f"a TLS key ({self.key}) without a certificate: give cert= too ({ENV_CERT})")
        if self.cert is None and self.ca is None:
            raise TLSError(f"TLS needs a certificate (cert=, {ENV_CERT}) or a CA to trust (ca=, {ENV_CA})")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TLSConfig | None:
        """The configuration ``AIOTIMELY_TLS_*`` describe, or ``None`` when none is set (no TLS)."""
        env = os.environ if environ is None else environ
        cert, key, ca = (env.get(name) or None for name in (ENV_CERT, ENV_KEY, ENV_CA))
        check = env.get(ENV_CHECK_HOSTNAME, "").strip().lower()
        if cert is None and key is None and ca is None:
            return None
        if check not in ("", "0", "1", "true", "false", "yes", "no"):
            raise TLSError(f"{ENV_CHECK_HOSTNAME}={check!r}: expected 1 or 0")
        return cls(cert, key, ca, None if not check else check in ("1", "true", "yes"))

    @property
    def mutual(self) -> bool:
        """Whether both sides must present a certificate the CA signed."""
        return self.ca is not None

    @property
    def hostname_checked(self) -> bool:
        """Whether a dialer requires the listener's certificate to name the host it dialed."""
        return self.check_hostname if self.check_hostname is not None else self.ca is None

    def server_context(self) -> ssl.SSLContext:
        """The context a listener uses: presents ``cert``; with a ``ca``, requires a client certificate it signed."""
        if self.cert is None:
            raise TLSError(f"listening with TLS needs this process's certificate: cert= or {ENV_CERT}")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_chain(context)
        if self.ca is not None:
            self._load_ca(context)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context a dialer uses: trusts ``ca`` (else the system's CAs), presents ``cert`` if it has one."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca is not None:
            self._load_ca(context)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = self.hostname_checked
        context.verify_mode = ssl.CERT_REQUIRED
        if self.cert is not None:
            self._load_chain(context)
        return context

    def _load_chain(self, context: ssl.SSLContext) -> None:
        assert self.cert is not None
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as e:
            raise TLSError(f"cannot load the TLS certificate {self.cert}"
                           f"{f' and key {self.key}' if self.key else ''}: {e}") from None

    def _load_ca(self, context: ssl.SSLContext) -> None:
        try:
            context.load_verify_locations(cafile=self.ca)
        except (OSError, ssl.SSLError) as e:
            raise TLSError(f"cannot load the TLS CA certificates {self.ca}: {e}") from None


TLSOption = Union[TLSConfig, Literal[False], None]
"""What ``tls=`` accepts: a :class:`TLSConfig`, ``False`` (no TLS), or ``None`` (the environment decides)."""


def resolve(tls: TLSOption) -> TLSConfig | None:
    """``tls`` as given, ``None`` for ``False``, or :meth:`TLSConfig.from_env` for ``None``."""
    if tls is False:
        return None
    if tls is None:
        return TLSConfig.from_env()
    if not isinstance(tls, TLSConfig):
        raise TypeError(f"tls= takes a TLSConfig, False or None, not {type(tls).__name__}")
    return tls


def looks_like_tls(data: bytes) -> bool:
    """Whether ``data`` (the first bytes a peer sent) starts a TLS handshake record."""
    return len(data) >= 3 and data[0] == 0x16 and data[1] == 0x03 and data[2] <= 0x04


def _describe(error: BaseException, server_side: bool) -> str:
    """What a failed TLS handshake means, in words a user can act on."""
    reason = getattr(error, "reason", None) or ""
    text = str(error) or type(error).__name__
    if isinstance(error, ssl.SSLCertVerificationError):
        whose = "the peer's certificate" if server_side else "the listener's certificate"
        return (f"certificate not trusted: {whose} does not pass this process's checks "
                f"(its CA, expiry, or host name): {error.verify_message or text}")
    if server_side:
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE",
                      "PACKET_LENGTH_TOO_LONG", "UNSUPPORTED_PROTOCOL", "VERSION_TOO_LOW"):
            return f"a plaintext connection to a TLS listener: the peer does not use TLS ({text})"
        if reason in ("PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED"):
            return f"certificate not trusted: the peer has no certificate this process's CA signed ({text})"
    elif "ALERT" in reason and ("UNKNOWN_CA" in reason or "BAD_CERTIFICATE" in reason
                                or "CERTIFICATE_REQUIRED" in reason):
        return f"certificate not trusted: the peer does not trust this process's certificate ({text})"
    if isinstance(error, (TimeoutError, ConnectionAbortedError)):  # asyncio aborts a handshake past its time
        return f"the TLS handshake took too long ({text})"
    if isinstance(error, (ConnectionError, ssl.SSLEOFError, EOFError, ssl.SSLZeroReturnError)):
        if server_side:
            return f"the peer closed the connection during the TLS handshake ({text})"
        return ("the peer closed the connection during the TLS handshake: it is probably a plaintext listener "
                f"(started without TLS), or it does not trust this process's certificate ({text})")
    return f"the TLS handshake failed: {text}"


def connect_blocking(host: str, port: int, timeout: float | None, context: ssl.SSLContext | None) -> socket.socket:
    """A blocking connection, for the clients Spark runs in its own threads and processes: TCP, then (with a
    ``context``) the TLS handshake. An ``OSError`` means nothing answers; a failed TLS handshake raises
    :class:`TLSError`, naming the peer and why."""
    sock = socket.create_connection((host, port), timeout=timeout)
    if context is None:
        return sock
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except (OSError, EOFError) as e:
        sock.close()
        raise TLSError(f"TLS with {host}:{port} failed: {_describe(e, server_side=False)}") from None


class _Ready(Protocol):
    ready: asyncio.Future[Any]


L = TypeVar("L", bound=_Ready)


class _Shim(asyncio.Protocol):
    """Between a TLS transport and the connection's protocol: keeps what arrives before the protocol is
    attached (the handshake's last step may carry data), then passes everything on, and notes a TLS error
    that ends the connection later (TLS 1.3 tells a client its certificate was refused after the handshake)."""

    def __init__(self) -> None:
        self.app: asyncio.Protocol | None = None
        self.pending: list[bytes] = []
        self.eof = False
        self.lost: tuple[Exception | None] | None = None
        self.error: Exception | None = None
        self.received = 0

    def attach(self, app: asyncio.Protocol, transport: asyncio.Transport) -> None:
        self.app = app
        app.connection_made(transport)
        pending, self.pending = self.pending, []
        for data in pending:
            app.data_received(data)
        if self.eof:
            app.eof_received()
        if self.lost is not None:
            app.connection_lost(self.lost[0])

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self.app is None:
            self.pending.append(data)
        else:
            self.app.data_received(data)

    def eof_received(self) -> bool | None:
        if self.app is None:
            self.eof = True
            return None
        return self.app.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ssl.SSLError):
            self.error = exc
        if self.app is None:
            self.lost = (exc,)
        else:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.app.resume_writing()


async def dial(factory: Callable[[], L], host: str, port: int, context: ssl.SSLContext) -> L:
    """Connect to ``host:port``, do the TLS handshake, then hand the connection to ``factory()``'s protocol
    and wait for it to be ``ready``. An ``OSError`` means nothing listens (worth retrying); a :class:`TLSError`
    means something listens and the TLS handshake failed, saying why."""
    loop = asyncio.get_running_loop()
    shim = _Shim()
    transport, _ = await loop.create_connection(lambda: shim, host, port)
    where = f"{host}:{port}"
    try:
        tls = await loop.start_tls(transport, shim, context, server_hostname=host,
                                   ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
    except (TimeoutError, ConnectionAbortedError) as e:  # a listener too busy to answer: worth another try
        transport.abort()
        raise ClusterError(f"TLS with {where}: no answer to the TLS handshake within {TLS_HANDSHAKE_TIMEOUT:g} s "
                           f"({e})") from None
    except (OSError, EOFError) as e:
        transport.abort()
        raise TLSError(f"TLS with {where} failed: {_describe(e, server_side=False)}") from None
    if tls is None:
        raise TLSError(f"TLS with {where} failed: the connection closed during the TLS handshake")
    app = factory()
    shim.attach(app, tls)  # type: ignore[arg-type]
    try:
        await app.ready
    except ClusterError as e:
        if shim.error is not None:
            raise TLSError(f"TLS with {where} failed: {_describe(shim.error, server_side=False)}") from None
        if shim.received == 0:  # TLS 1.3: a listener refuses a client's certificate after the client's handshake
            raise TLSError(f"the listener at {where} closed the connection right after the TLS handshake, before "
                           "answering: most likely it does not trust this process's certificate, or does not "
                           "expect this process (its log says which)") from None
        raise e from None
    return app


class Listener(Protocol):
    """What :func:`serve` returns: an ``asyncio.Server``, or a :class:`TLSServer`."""

    @property
    def sockets(self) -> tuple[Any, ...]: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class TLSServer:
    """A TLS listener. It accepts connections itself and completes each one's TLS handshake
    (``loop.connect_accepted_socket``) before the protocol sees it, so that a failed handshake is caught and
    logged naming the peer — asyncio's own TLS server drops it silently. Like an ``asyncio.Server``, it has
    ``sockets``, ``close()`` and ``wait_closed()``; connections already made stay open when it closes."""

    def __init__(self, sockets: list[socket.socket], factory: Callable[[], asyncio.Protocol],
                 context: ssl.SSLContext, name: str, log: logging.Logger) -> None:
        self._sockets = tuple(sockets)
        self.factory, self.context, self.name, self.log = factory, context, name, log
        self._closed = False
        self._handshakes: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        self._accepting = [loop.create_task(self._accept(sock)) for sock in sockets]

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return () if self._closed else self._sockets

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as e:  # out of file descriptors, say: wait, and go on serving
                if self._closed:
                    return
                self.log.warning("%s: accepting a connection on %s failed: %s", self.name, sock.getsockname(), e)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._handshake(conn, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, address: Any) -> None:
        where = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self.factory, conn, ssl=self.context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as e:
            conn.close()
            self.log.warning("%s refused a connection from %s: %s", self.name, where, _describe(e, server_side=True))

    def close(self) -> None:
        """Stop listening (and drop the connections still in their TLS handshake)."""
        if self._closed:
            return
        self._closed = True
        for task in (*self._accepting, *self._handshakes):
            task.cancel()
        for sock in self._sockets:
            sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._accepting, return_exceptions=True)


async def _bind(host: str, port: int, backlog: int = 100) -> list[socket.socket]:
    """Listening sockets on every address ``host`` resolves to (as ``loop.create_server`` makes them)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                raise OSError(e.errno, f"error while attempting to bind on address {address!r}: "
                                       f"{(e.strerror or str(e)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def serve(factory: Callable[[], asyncio.Protocol], host: str, port: int, context: ssl.SSLContext | None,
                *, name: str, log: logging.Logger, **kwargs: Any) -> Listener:
    """Listen on ``host:port``: with a ``context``, every connection does the TLS handshake first (a failure is
    logged as ``name`` refusing the peer's address, and the listener goes on); without, plain TCP
    (``loop.create_server``, given ``kwargs``)."""
    if context is None:
        return await asyncio.get_running_loop().create_server(factory, host, port, **kwargs)
    return TLSServer(await _bind(host, port), factory, context, name, log)
