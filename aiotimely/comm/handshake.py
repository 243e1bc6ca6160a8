"""The handshake between two processes: versions, cluster size, indices, and a shared secret.

Sans-IO and mutual: each side proves it knows the secret without sending it
(HMAC-SHA256 over both sides' random nonces and the identities claimed)::

    dialer   -> HELLO      {version, processes, index, nonce_d}
    acceptor -> CHALLENGE  {version, processes, index, nonce_a, mac_a = HMAC(secret, "A" nonce_d nonce_a ids)}
    dialer   -> AUTH       {mac_d = HMAC(secret, "D" nonce_a nonce_d ids)}
    acceptor -> WELCOME

Anything unexpected raises :class:`HandshakeError`, saying what; the transport
closes the connection and logs it.
"""

from __future__ import annotations

import hmac
import os
import struct
from hashlib import sha256
from typing import Any, Callable

import msgpack

from .framing import Frame, Kind, encode_frame

__all__ = ["PROTOCOL_VERSION", "HandshakeError", "Dialer", "Acceptor", "shared_secret"]

PROTOCOL_VERSION = 2
_IDS = struct.Struct(">III")


class HandshakeError(ValueError):
    """The other side is not a member of this cluster (or not speaking our protocol)."""


def shared_secret(secret: str | bytes | None, what: str) -> bytes:
    """``secret``, else ``AIOTIMELY_SECRET``, as bytes; a clear error naming ``what`` needs it if neither is set."""
    key = secret if secret is not None else os.environ.get("AIOTIMELY_SECRET", "")
    key = key.encode() if isinstance(key, str) else key
    if not key:
        from ..errors import ClusterError

        raise ClusterError(f"{what} needs a shared secret: pass secret=... or set AIOTIMELY_SECRET")
    return key


def _mac(secret: bytes, role: bytes, first: bytes, second: bytes, dialer: int, acceptor: int, n: int) -> bytes:
    return hmac.new(secret, role + first + second + _IDS.pack(dialer, acceptor, n), sha256).digest()


def _fields(frame: Frame, kind: Kind, keys: tuple[str, ...]) -> dict[str, Any]:
    if frame.kind != kind:
        raise HandshakeError(f"expected {kind.name}, got a {frame.kind.name} frame")
    try:
        fields = msgpack.unpackb(frame.payload, raw=False)
    except Exception:
        raise HandshakeError(f"malformed {kind.name} payload") from None
    if not isinstance(fields, dict) or any(k not in fields for k in keys):
        raise HandshakeError(f"{kind.name} lacks fields {keys}")
    return fields


def _check_peer(fields: dict[str, Any], processes: int) -> None:
    if fields["version"] != PROTOCOL_VERSION:
        raise HandshakeError(f"protocol version {fields['version']!r}, this process speaks {PROTOCOL_VERSION}")
    if fields["processes"] != processes:
        raise HandshakeError(f"it believes the cluster has {fields['processes']!r} processes, this one {processes}")


class Dialer:
    """The connecting side, process ``index`` of ``processes``."""

    def __init__(self, secret: bytes, processes: int, index: int, expect: int) -> None:
        self.secret, self.processes, self.index, self.expect = secret, processes, index, expect
        self._nonce = os.urandom(16)
        self.done = False

    def start(self) -> bytes:
        return encode_frame(Kind.HELLO, msgpack.packb({
            "version": PROTOCOL_VERSION, "processes": self.processes, "index": self.index, "nonce": self._nonce,
        }))

    def receive(self, frame: Frame) -> bytes | None:
        """Handle the acceptor's frame; return what to send back (or ``None`` when done)."""
        if not hasattr(self, "_nonce_a"):
            fields = _fields(frame, Kind.CHALLENGE, ("version", "processes", "index", "nonce", "mac"))
            _check_peer(fields, self.processes)
            if fields["index"] != self.expect:
                raise HandshakeError(f"connected to process {fields['index']!r}, expected process {self.expect}")
            nonce_a = fields["nonce"]
            if not isinstance(nonce_a, bytes) or len(nonce_a) != 16:
                raise HandshakeError("bad nonce")
            want = _mac(self.secret, b"A", self._nonce, nonce_a, self.index, self.expect, self.processes)
            if not hmac.compare_digest(want, fields["mac"] if isinstance(fields["mac"], bytes) else b""):
                raise HandshakeError(f"process {self.expect} does not know the shared secret")
            self._nonce_a = nonce_a
            mac_d = _mac(self.secret, b"D", nonce_a, self._nonce, self.index, self.expect, self.processes)
            return encode_frame(Kind.AUTH, msgpack.packb({"mac": mac_d}))
        _fields(frame, Kind.WELCOME, ())
        self.done = True
        return None


class Acceptor:
    """The accepting side, process ``index``; ``allowed(i)`` says whether dialer ``i`` may join now."""

    def __init__(self, secret: bytes, processes: int, index: int, allowed: Callable[[int], bool]) -> None:
        self.secret, self.processes, self.index, self.allowed = secret, processes, index, allowed
        self._nonce = os.urandom(16)
        self.peer: int | None = None
        self.done = False

    def receive(self, frame: Frame) -> bytes:
        """Handle the dialer's frame; return what to send back."""
        if self.peer is None:
            fields = _fields(frame, Kind.HELLO, ("version", "processes", "index", "nonce"))
            _check_peer(fields, self.processes)
            peer = fields["index"]
            if type(peer) is not int or not 0 <= peer < self.processes or peer == self.index or not self.allowed(peer):
                raise HandshakeError(f"process index {peer!r} is not expected to connect here")
            nonce_d = fields["nonce"]
            if not isinstance(nonce_d, bytes) or len(nonce_d) != 16:
                raise HandshakeError("bad nonce")
            self.peer, self._nonce_d = peer, nonce_d
            mac_a = _mac(self.secret, b"A", nonce_d, self._nonce, peer, self.index, self.processes)
            return encode_frame(Kind.CHALLENGE, msgpack.packb({
                "version": PROTOCOL_VERSION, "processes": self.processes, "index": self.index,
                "nonce": self._nonce, "mac": mac_a,
            }))
        fields = _fields(frame, Kind.AUTH, ("mac",))
        want = _mac(self.secret, b"D", self._nonce, self._nonce_d, self.peer, self.index, self.processes)
        if not hmac.compare_digest(want, fields["mac"] if isinstance(fields["mac"], bytes) else b""):
            raise HandshakeError(f"process {self.peer} does not know the shared secret")
        self.done = True
        return encode_frame(Kind.WELCOME, msgpack.packb({}))
