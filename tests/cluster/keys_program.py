"""Build functions for tests/cluster/test_keys_across_processes.py: keys whose own hash is salted per process."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

import aiotimely as at


class Color(enum.Enum):
    RED = (1, "r")
    GREEN = (2, "g")


def key_of(record: tuple[str, Any]) -> Any:
    """Records are plain tuples (they cross processes as they are); their keys are dates, datetimes in two
    timezones (equal instants), enum members and frozensets of strings."""
    kind, value = record
    if kind == "day":
        return dt.date.fromordinal(value)
    if kind == "at":
        zone = dt.timezone(dt.timedelta(hours=value % 5)) if value % 2 else dt.timezone.utc
        return dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc).astimezone(zone)   # one instant in 3 zones
    if kind == "color":
        return Color[value]
    return frozenset(value)


RECORDS = ([("day", 738_000 + d) for d in range(6)] + [("at", n) for n in range(4)]
           + [("color", "RED"), ("color", "GREEN"), ("set", "ab"), ("set", "ba"), ("set", "xyz")])


def counts(worker: at.Worker) -> None:
    """Every worker sends 10 of each record; each key's count is printed by the one worker that owns it."""
    worker.dataflow(lambda s: at.to_stream(RECORDS * 10, s)
                    .window(at.Tumbling(10), at.Agg.count(), key=key_of, time=lambda r: 5)
                    .inspect(lambda r: print(f"count {sorted(r[0]) if isinstance(r[0], frozenset) else r[0]!r} "
                                             f"{r[2]} on {worker.index}", flush=True)))


class Opaque:
    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def opaque(worker: at.Worker) -> None:
    """Keys of a class whose hash is salted: refused by an exchange between processes."""
    worker.dataflow(lambda s: at.to_stream(["a", "b"], s).exchange(Opaque).probe())
