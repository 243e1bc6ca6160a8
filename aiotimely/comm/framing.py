"""Frames: the units processes exchange. Sans-IO: bytes in, frames out, and back.

Every frame is a fixed 21-byte header and a payload::

    length   u32   bytes after this field (17 + payload)
    kind     u8    what the payload is (see :class:`Kind`)
    source   u32   sending worker (or ANY)
    target   u32   receiving worker (or ALL: every worker of the receiving process)
    dataflow u32   the dataflow index (data frames)
    channel  u32   the channel within the dataflow (data frames)

Frames carry whole batches, never single records.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

__all__ = ["Kind", "Frame", "FrameDecoder", "FrameError", "encode_frame", "ALL", "ANY", "MAX_FRAME", "HEADER"]

HEADER = struct.Struct(">IBIIII")
_AFTER_LENGTH = HEADER.size - 4
ALL = ANY = 0xFFFFFFFF
MAX_FRAME = 256 * 1024 * 1024
"""The largest frame accepted: a length beyond it means the stream is not ours (or is corrupt)."""


class Kind(IntEnum):
    HELLO = 1        # handshake: dialer introduces itself
    CHALLENGE = 2    # handshake: acceptor proves it knows the secret, challenges back
    AUTH = 3         # handshake: dialer proves it knows the secret
    WELCOME = 4      # handshake: accepted
    DATA = 5         # a batch of records: [time, records]
    PROGRESS = 6     # a progress batch
    EVENTS = 7       # captured stream events (capture / replay over TCP)
    BYE = 8          # this process completed its work
    ERROR = 9        # this process failed: payload is the message
    HEARTBEAT = 10   # this process is alive (sent every second, whatever else is sent)
    CREDIT = 11      # batches taken: (dataflow, channel, source, target, count) quintuples


class Frame(NamedTuple):
    kind: Kind
    source: int
    target: int
    dataflow: int
    channel: int
    payload: bytes


class FrameError(ValueError):
    """Bytes that are not a valid frame stream."""


_KINDS = {k.value: k for k in Kind}


def encode_frame(kind: Kind, payload: bytes = b"", *, source: int = ANY, target: int = ALL,
                 dataflow: int = 0, channel: int = 0) -> bytes:
    """One frame as bytes."""
    return HEADER.pack(_AFTER_LENGTH + len(payload), kind, source, target, dataflow, channel) + payload


class FrameDecoder:
    """Turns a byte stream into frames; keeps partial frames between calls.

    ``feed(data)`` adds bytes and returns every complete frame. A connection whose
    limit changes between frames (after its handshake) uses ``append`` and
    ``next_frame`` instead, so that each frame is checked against the limit in force
    when it is reached.
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._offset = 0
        self._max = max_frame

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes; return every frame now complete. Raises :class:`FrameError`."""
        self.append(data)
        frames = []
        while (frame := self.next_frame()) is not None:
            frames.append(frame)
        return frames

    def append(self, data: bytes) -> None:
        """Add received bytes."""
        buffer = self._buffer
        if self._offset > 65536 and self._offset * 2 > len(buffer):
            del buffer[:self._offset]
            self._offset = 0
        buffer += data

    def next_frame(self) -> Frame | None:
        """The next complete frame, or ``None`` until more bytes arrive. Raises :class:`FrameError`."""
        buffer, offset = self._buffer, self._offset
        if len(buffer) - offset < HEADER.size:
            return None
        length, kind, source, target, dataflow, channel = HEADER.unpack_from(buffer, offset)
        if length < _AFTER_LENGTH or length > self._max:
            raise FrameError(f"frame length {length} is outside {_AFTER_LENGTH}..{self._max}")
        if kind not in _KINDS:
            raise FrameError(f"unknown frame kind {kind}")
        end = offset + 4 + length
        if end > len(buffer):
            return None
        frame = Frame(_KINDS[kind], source, target, dataflow, channel, bytes(buffer[offset + HEADER.size:end]))
        if end == len(buffer):
            buffer.clear()
            self._offset = 0
        else:
            self._offset = end
        return frame

    def limit(self, max_frame: int) -> None:
        """Accept frames up to ``max_frame`` bytes from now on."""
        self._max = max_frame

    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer) - self._offset
