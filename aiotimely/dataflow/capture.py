"""Capture a stream's history (records and frontier changes) and replay it into another dataflow.

A captured stream is a sequence of events: ``Messages(time, records)`` and
``Progress(changes)``, the changes of the stream's frontier starting from
``{minimum}``. Replaying the events of one or more captures reproduces the stream,
records and frontier both, in any dataflow — on another worker count, later, or
live, while the events still arrive over a network
(:class:`aiotimely.connectors.events.EventWriter` / ``EventReader``).

An event sink is anything with ``push(event)`` (and, optionally, ``close()``,
called once the captured stream is complete). An event source for ``replay`` is a
:class:`Captured`: its ``events`` list, ``closed`` once complete, and a listener
called when events arrive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Union

from ..progress import ChangeBatch, FrontierInterest
from .builder import OperatorBuilder
from .stream import S, StreamCore

if TYPE_CHECKING:
    from .scope import ScopeCore

__all__ = ["Progress", "Messages", "Event", "Captured", "capture", "capture_into", "replay"]


class Progress(NamedTuple):
    """A change of the captured stream's frontier: ``(time, ±1)`` pairs."""

    changes: list[tuple[Any, int]]


class Messages(NamedTuple):
    """Records the captured stream carried at ``time``."""

    time: Any
    records: list[Any]


Event = Union[Progress, Messages]


class Captured:
    """The events one worker captured from a stream (or received for replay), in order.

    ``encoded`` means the times are still in wire form (from another process); the
    replaying dataflow decodes them with its own timestamp type.
    """

    def __init__(self, events: Iterable[Event] = (), *, closed: bool = True, encoded: bool = False) -> None:
        self.events: list[Event] = list(events)
        self.closed = closed
        self.encoded = encoded
        self.error: BaseException | None = None
        self._listeners: list[Callable[[], None]] = []

    def push(self, event: Event) -> None:
        self.events.append(event)
        for listener in self._listeners:
            listener()

    def close(self) -> None:
        self.closed = True
        for listener in self._listeners:
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever an event arrives or the stream closes."""
        self._listeners.append(listener)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def extract(self) -> list[tuple[Any, list[Any]]]:
        """The records by time, times in order (records sorted where they can be)."""
        by_time: dict[Any, list[Any]] = {}
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
        return f"Captured({len(self.events)} events{'' if self.closed else ', open'})"


def capture(stream: StreamCore) -> Captured:
    captured = Captured(closed=False)
    capture_into(stream, captured)
    return captured


def capture_into(stream: StreamCore, sink: Any) -> None:
    """Push the stream's events to ``sink`` (``sink.push(event)``) as they happen; ``sink.close()`` at the end."""
    builder = OperatorBuilder(stream.scope, "Capture")
    inp = builder.new_input(stream, interest=FrontierInterest.ALWAYS)
    take_changes = inp.watch_frontier()  # replay starts from {minimum}
    push = sink.push if hasattr(sink, "push") else sink
    attach = getattr(sink, "attach", None)
    if attach is not None:
        attach(stream.scope.ttype)

    def run() -> None:
        for time, batch in inp.batches():
            push(Messages(time, batch))
        changes = take_changes()
        if changes:
            net = ChangeBatch(changes).drain()
            if net:
                push(Progress(net))
        if inp.is_complete() and hasattr(sink, "close"):
            sink.close()

    builder.build_function(run)


def _streams_of(events: Any) -> list[Captured]:
    if isinstance(events, Captured):
        return [events]
    events = list(events)
    if events and all(isinstance(e, (Captured, list, tuple)) and not isinstance(e, (Progress, Messages))
                      for e in events):
        return [e if isinstance(e, Captured) else Captured(e) for e in events]
    return [Captured(events)]


def replay(events: Any, scope: ScopeCore[S], *, shared: bool = True) -> S:
    """A stream replaying captured events: one capture, its event list, or a list of several.

    With ``shared`` (the default) every worker is given the same captures and
    worker ``i`` replays captures ``i, i + peers, ...``; otherwise the captures
    given are this worker's own. Captures still open (arriving over a network) are
    replayed as their events arrive.
    """
    streams = _streams_of(events)
    worker = scope.worker
    mine = streams[worker.index::worker.peers] if shared else streams
    builder = OperatorBuilder(scope, "Replay")
    out, result = builder.new_output()
    op = builder.op
    ttype = scope.ttype
    minimum = ttype.minimum
    positions = [0] * len(mine)
    started = [False]
    if any(not s.closed for s in mine):
        activator = op.activator()
        for s in mine:
            s.listen(activator.activate)

    def run() -> None:
        # The operator holds capabilities as the captured frontiers say: one count per capture at first.
        if not started[0]:
            started[0] = True
            if len(mine) != 1:
                op.adjust_held(0, minimum, len(mine) - 1)
        for i, stream in enumerate(mine):
            if stream.error is not None:
                raise stream.error
            events = stream.events
            decode = ttype.decode if stream.encoded else None
            while positions[i] < len(events):
                event = events[positions[i]]
                positions[i] += 1
                if isinstance(event, Progress):
                    for time, diff in event.changes:
                        op.adjust_held(0, decode(time) if decode else time, diff)
                else:
                    time = decode(event.time) if decode else event.time
                    out.push(time, list(event.records))

    builder.build_raw(run)
    return result  # type: ignore[no-any-return]
