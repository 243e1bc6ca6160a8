"""Which worker a record goes to: a stable hash of its key, the same in every process.

Python's ``hash`` of ``str`` and ``bytes`` is salted per process, so it cannot route
records between processes. ``int`` keys route as ``key % peers``; ``str`` and
``bytes`` by CRC-32; tuples by combining their parts; ``None``, ``bool`` and
``float`` by their (unsalted) built-in hash. A subclass of ``str``, ``bytes`` or
``tuple`` (an ``enum.StrEnum`` member, a ``NamedTuple``) routes as the plain value
it equals. Other types use their ``__hash__``, which must then be the same in every
process.
"""

from __future__ import annotations

from typing import Any
from zlib import crc32

__all__ = ["route", "stable_hash"]


def stable_hash(key: Any) -> int:
    """A non-negative hash of ``key`` that does not depend on the process."""
    kind = type(key)
    if kind is int:
        number: int = key
        return number if number >= 0 else -number
    if kind is str:
        return crc32(key.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return crc32(key)
    if kind is tuple:
        h = 0x345678
        for part in key:
            h = (h * 1000003) ^ stable_hash(part)
            h &= 0xFFFFFFFFFFFF
        return h
    # A subclass routes as the plain value it equals (its own __hash__ may be salted, or differ in each process).
    if isinstance(key, str):
        return stable_hash(str.__str__(key))
    if isinstance(key, bytes):
        return crc32(key)
    if isinstance(key, tuple):
        return stable_hash(tuple(key))
    return hash(key) & 0x7FFFFFFFFFFFFFFF


def route(key: Any, peers: int) -> int:
    """The worker index in ``range(peers)`` that records with ``key`` go to."""
    if type(key) is int and key >= 0:
        return key % peers
    return stable_hash(key) % peers
