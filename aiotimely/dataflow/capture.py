"""Capture a stream's history (records and frontier changes) and replay it into another dataflow.

A captured stream is a list of events: ``Messages(time, records)`` and
``Progress(changes)``, the changes of the stream's frontier starting from
``{minimum}``. Replaying the events of one or more captures reproduces the stream,
records and frontier both, in any dataflow — on another worker count, later, or
after the events crossed a network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Union

from ..progress import ChangeBatch, FrontierInterest
from .operator import OperatorRuntime
from .operators.common import output_stream

if TYPE_CHECKING:
    from .scope import Scope
    from .stream import Stream

__all__ = ["Progress", "Messages", "Event", "Captured", "capture", "replay"]


class Progress(NamedTuple):
    """A change of the captured stream's frontier: ``(time, ±1)`` pairs."""

    changes: list[tuple[Any, int]]


class Messages(NamedTuple):
    """Records the captured stream carried at ``time``."""

    time: Any
    records: list


Event = Union[Progress, Messages]


class Captured:
    """The events one worker captured from a stream."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self.events: list[Event] = list(events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def extract(self) -> list[tuple[Any, list]]:
        """The records by time, times in order (records sorted where they can be)."""
        by_time: dict[Any, list] = {}
        for event in self.events:
            if type(event) is Messages:
                by_time.setdefault(event.time, []).extend(event.records)
        result = []
        for time in sorted(by_time):
            records = by_time[time]
            try:
                records = sorted(records)
            except TypeError:
                pass
            result.append((time, records))
        return result

    def __repr__(self) -> str:
        return f"Captured({len(self.events)} events)"


def capture(stream: Stream) -> Captured:
    captured = Captured()
    op = OperatorRuntime(stream.scope, "Capture", 1, 0, interest=FrontierInterest.ALWAYS)
    op.connect(0, stream)
    op.frontier_changes = [[]]
    queue = op.mailboxes[0].queue
    consumed = op.progress.shared.consumeds[0]
    events = captured.events
    first = [True]
    minimum = op.ttype.minimum

    def run() -> None:
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            events.append(Messages(time, batch))
        changes = op.frontier_changes[0]
        if first[0]:
            first[0] = False
            changes.append((minimum, -1))  # replay starts from {minimum}
        if changes:
            op.frontier_changes[0] = []
            net = ChangeBatch(changes).drain()
            if net:
                events.append(Progress(net))

    op.run_function(run)
    return captured


def _streams_of(events: Any) -> list[list[Event]]:
    if isinstance(events, Captured):
        return [events.events]
    events = list(events)
    if events and all(isinstance(e, (Captured, list, tuple)) and not isinstance(e, (Progress, Messages))
                      for e in events):
        return [list(e) for e in events]
    return [events]


def replay(events: Any, scope: Scope) -> Stream:
    """A stream replaying captured events: one capture, its event list, or a list of several.

    With several workers, worker ``i`` replays the captures ``i, i + peers, ...``.
    """
    streams = _streams_of(events)
    worker = scope.worker
    mine = streams[worker.index::worker.peers]
    op = OperatorRuntime(scope, "Replay", 0, 1)   # holds this worker's initial capability at the minimum
    out = op.outputs[0]
    minimum = op.ttype.minimum
    started = [False]

    def run() -> None:
        if started[0]:
            return
        started[0] = True
        if len(mine) != 1:
            op._capability_changed(0, minimum, len(mine) - 1)
        for stream_events in mine:
            for event in stream_events:
                if type(event) is Progress:
                    for time, diff in event.changes:
                        op._capability_changed(0, time, diff)
                else:
                    out.push(event.time, list(event.records))

    op.run_function(run, keep_capabilities=True)
    return output_stream(op)
