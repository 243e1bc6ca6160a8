"""What a stream carried, by time: the result of a test run, merged over every worker and process.

A dataflow's output has no order within a time (workers interleave, exchanges
reorder), so :class:`Outputs` keeps, for each time, the records sorted, and
compares with a plain ``{time: [records]}`` dict as a multiset per time. It also
keeps the stream's final frontier (empty once the stream is complete) and what
each worker saw, and explains a mismatch time by time (:meth:`Outputs.explain`,
which the pytest plugin shows when an ``assert outputs == expected`` fails).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping

from ..dataflow.capture import Event, Messages, Progress
from ..progress import Antichain, MutableAntichain

__all__ = ["Outputs", "sort_records"]

SHOWN = 20
"""How many times :meth:`Outputs.explain` details before it summarises the rest."""


def sort_records(records: Iterable[Any]) -> list[Any]:
    """The records sorted: by value where they compare, else by type name and ``repr`` (records of mixed types)."""
    records = list(records)
    try:
        return sorted(records)
    except TypeError:
        return sorted(records, key=lambda r: (type(r).__name__, repr(r)))


def _sorted_times(times: Iterable[Any]) -> list[Any]:
    return sort_records(times)  # ``<`` on times is a total order that extends theirs (Product: lexicographic)


class Outputs(Mapping[Any, list[Any]]):
    """The records a stream carried, by time (``outputs[t]``: the sorted records at ``t``), and its final frontier.

    ``outputs == {0: ["a", "b"], 3: ["c"]}`` compares the records of each time as a multiset (the order within a
    time means nothing in a dataflow); ``frontier`` is the stream's frontier when the run ended (an empty
    :class:`~aiotimely.Antichain` once the stream is complete); ``workers`` maps each worker index to the
    :class:`Outputs` that worker alone saw.
    """

    def __init__(self, by_time: Mapping[Any, Iterable[Any]], frontier: Antichain[Any] | None = None,
                 workers: Mapping[int, Outputs] | None = None) -> None:
        self._by_time = {t: sort_records(by_time[t]) for t in _sorted_times(by_time) if by_time[t]}
        self.frontier: Antichain[Any] = frontier if frontier is not None else Antichain()
        self.workers: dict[int, Outputs] = dict(sorted((workers or {}).items()))

    @classmethod
    def from_events(cls, per_worker: Mapping[int, Iterable[Event]], minimum: Any = 0) -> Outputs:
        """Merge the captured events of each worker (``stream.capture()``): records by time, and the frontier
        of all of them together (each worker's capture starts at ``{minimum}``)."""
        frontier: MutableAntichain[Any] = MutableAntichain([(minimum, len(per_worker))])
        workers = {}
        merged: dict[Any, list[Any]] = {}
        for index, events in per_worker.items():
            mine: dict[Any, list[Any]] = {}
            own: MutableAntichain[Any] = MutableAntichain([(minimum, 1)])
            for event in events:
                if isinstance(event, Messages):
                    mine.setdefault(event.time, []).extend(event.records)
                    merged.setdefault(event.time, []).extend(event.records)
                elif isinstance(event, Progress):
                    own.update_iter(event.changes)
                    frontier.update_iter(event.changes)
            workers[index] = cls(mine, own.frontier)
        return cls(merged, frontier.frontier, workers)

    # -- a read-only mapping ----------------------------------------------------------------

    def __getitem__(self, time: Any) -> list[Any]:
        return self._by_time[time]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._by_time)

    def __len__(self) -> int:
        return len(self._by_time)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._by_time == _normalise(other)

    __hash__ = None  # type: ignore[assignment]  # compared by value, like a dict

    # -- views ------------------------------------------------------------------------------

    def records(self) -> list[Any]:
        """Every record, whatever its time, sorted."""
        return sort_records(r for records in self._by_time.values() for r in records)

    def pairs(self) -> list[tuple[Any, Any]]:
        """Every ``(time, record)``, by time, then record."""
        return [(t, r) for t, records in self._by_time.items() for r in records]

    def counts(self) -> dict[Any, int]:
        """The number of records at each time."""
        return {t: len(records) for t, records in self._by_time.items()}

    def complete(self) -> bool:
        """True if the stream was complete when the run ended (its frontier is empty)."""
        return not self.frontier

    # -- showing ----------------------------------------------------------------------------

    def format(self, indent: str = "  ") -> str:
        """One line per time, ``time: [records]``, then the frontier: for reading in a failed test's output."""
        lines = [f"{indent}{t!r}: {records!r}" for t, records in self._by_time.items()] or [f"{indent}(no records)"]
        lines.append(f"{indent}frontier: {_frontier(self.frontier)}")
        return "\n".join(lines)

    def explain(self, expected: Mapping[Any, Iterable[Any]]) -> list[str]:
        """Why these outputs differ from ``expected`` (``{time: records}``), time by time: the records missing
        and those not expected at each time that differs, then every output by time. Empty if they are equal."""
        want = _normalise(expected)
        if self._by_time == want:
            return []
        differing = [t for t in _sorted_times(set(self._by_time) | set(want))
                     if self._by_time.get(t, []) != want.get(t, [])]
        more = f" (and {len(differing) - SHOWN} more)" if len(differing) > SHOWN else ""
        lines = [f"outputs differ at {len(differing)} time{'s' if len(differing) != 1 else ''}{more}:"]
        for t in differing[:SHOWN]:
            got, exp = self._by_time.get(t, []), want.get(t, [])
            missing, extra = _minus(exp, got), _minus(got, exp)
            lines.append(f"  time {t!r}:")
            lines.append(f"    got:      {got!r}" if got else "    got:      (nothing)")
            lines.append(f"    expected: {exp!r}" if exp else "    expected: (nothing)")
            if missing and got:
                lines.append(f"    missing:  {missing!r}")
            if extra and exp:
                lines.append(f"    extra:    {extra!r}")
        lines.append("all outputs, by time:")
        lines.extend(self.format("  ").splitlines())
        return lines

    def __repr__(self) -> str:
        body = ", ".join(f"{t!r}: {records!r}" for t, records in self._by_time.items())
        frontier = "" if not self.frontier else f", frontier={_frontier(self.frontier)}"
        return f"Outputs({{{body}}}{frontier})"


def _normalise(expected: Mapping[Any, Iterable[Any]]) -> dict[Any, list[Any]]:
    if isinstance(expected, Outputs):
        return dict(expected._by_time)
    return {t: sort_records(expected[t]) for t in _sorted_times(expected) if expected[t]}


def _minus(a: list[Any], b: list[Any]) -> list[Any]:
    """The records of ``a`` not in ``b``, counting repeats."""
    rest = list(b)
    out = []
    for record in a:
        try:
            rest.remove(record)
        except ValueError:
            out.append(record)
    return out


def _frontier(frontier: Antichain[Any]) -> str:
    return f"{sort_records(frontier)!r}" + ("" if frontier else " (complete)")
