"""Test sources: records sent in a chosen order, out of order and late, while the frontier moves on a schedule.

A :class:`Script` is a list of steps: ``(time, record)`` sends a record, and
:class:`Advance` moves the source's frontier (its capability) to a later time,
which completes every earlier time, possibly while records at later times were
sent already. :func:`script_source` plays a script into a dataflow, letting the
dataflow run after every step, so an operator sees exactly that interleaving of
records and frontiers; :func:`schedule` makes a script from ``(time, record)``
pairs (shuffled, and with the frontier moved as early as it can, if asked).

How a record is sent (``mode=``):

- ``"time"``: the record at its time (the dataflow time is the event time).
- ``"timed"``: a timed record ``(time, record)`` in a batch at the frontier (``session.give_at``), for
  operators that read by time with ``input.timed_order()`` and ``window(..., timed=True)``.
- ``"event"``: the pair ``(time, record)`` as a plain record at its time or, if the frontier has passed it, at the
  frontier: the record is *late* (its event time is behind its dataflow time), as ``window(..., time=...)`` and
  late-data logic must handle.

In the first two modes a record behind the frontier cannot be sent: the script is refused when the dataflow is
built, naming the step.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Literal, NamedTuple, Union

from ..dataflow import Capability, OperatorOutput, source
from ..progress import TimestampType
from ..progress.timestamp import less_equal
from .outputs import Outputs

if TYPE_CHECKING:
    from ..scope import Scope
    from ..stream import Stream

__all__ = ["Advance", "Step", "Script", "schedule", "script_source", "Mode"]

Mode = Literal["time", "timed", "event"]


class Advance(NamedTuple):
    """A step of a :class:`Script`: move the source's frontier to ``time`` (every earlier time is then complete)."""

    time: Any


Step = Union[tuple[Any, Any], Advance]
"""A step of a script: a ``(time, record)`` to send, or an :class:`Advance` of the frontier."""


@dataclass(frozen=True)
class Script:
    """Steps for :func:`script_source`, in the order it plays them: ``(time, record)`` pairs and :class:`Advance`\\ s.

    ``Script([(5, "a"), (3, "b"), Advance(4), (4, "c"), Advance(6), (2, "late")])`` sends ``a`` at 5 before ``b``
    at 3, completes time 3 (and everything below 4), and so on; the last record is behind the frontier: only
    ``mode="event"`` can send it (late, at time 6).
    """

    steps: tuple[Step, ...]

    def __init__(self, steps: Iterable[Step] = ()) -> None:
        checked = []
        for i, step in enumerate(steps):
            if not isinstance(step, Advance):
                if not isinstance(step, tuple) or len(step) != 2:
                    raise TypeError(f"step {i} of a Script is {step!r}: a step is a (time, record) pair or an "
                                    "Advance(time)")
                step = (step[0], step[1])
            checked.append(step)
        object.__setattr__(self, "steps", tuple(checked))

    def events(self) -> list[tuple[Any, Any]]:
        """The ``(time, record)`` pairs, in the order they are sent."""
        return [step for step in self.steps if not isinstance(step, Advance)]

    def by_time(self) -> Outputs:
        """The records by time, as a stream that passes them on unchanged (in ``mode="time"``) carries them."""
        by_time: dict[Any, list[Any]] = {}
        for time, record in self.events():
            by_time.setdefault(time, []).append(record)
        return Outputs(by_time)

    def late(self, ttype: TimestampType[Any, Any] | None = None) -> list[tuple[int, Any, Any, Any]]:
        """The records sent behind the frontier, as ``(step, time, record, frontier)``: in ``mode="event"``, the
        late ones, sent at ``frontier``; the other modes refuse a script that has any."""
        le = ttype.less_equal if ttype is not None else less_equal
        frontier = None
        late = []
        for i, step in enumerate(self.steps):
            if isinstance(step, Advance):
                frontier = step.time
            elif frontier is not None and not le(frontier, step[0]):
                late.append((i, step[0], step[1], frontier))
        return late

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return f"Script({list(self.steps)!r})"


def schedule(events: Iterable[tuple[Any, Any]], *, shuffle: int | random.Random | None = None,
             advance: Literal["eager", "end"] = "eager") -> Script:
    """A :class:`Script` sending ``events`` (``(time, record)`` pairs, int times): in the given order, or
    shuffled (``shuffle``: a seed or a ``random.Random``, for a reproducible order). ``advance="eager"`` moves
    the frontier after each record to the earliest time still to be sent, so times complete while later
    records are still to come; ``"end"`` keeps every time open until the source closes."""
    pairs = [(t, r) for t, r in events]
    if shuffle is not None:
        rng = shuffle if isinstance(shuffle, random.Random) else random.Random(shuffle)
        rng.shuffle(pairs)
    if advance not in ("eager", "end"):
        raise ValueError(f"advance must be 'eager' or 'end', not {advance!r}")
    steps: list[Step] = []
    frontier = 0
    for i, pair in enumerate(pairs):
        steps.append(pair)
        rest = [t for t, _ in pairs[i + 1:]]
        if advance == "eager" and rest and min(rest) > frontier:
            frontier = min(rest)
            steps.append(Advance(frontier))
    return Script(steps)


def script_source(scope: Scope[Stream[Any]], script: Script | Iterable[Step], *, mode: Mode = "time",
                  split: bool = True, name: str = "Script") -> Stream[Any]:
    """A source playing ``script`` (see the module's introduction for ``mode``), then closing.

    With ``split`` (the default) worker ``i`` of ``n`` sends the records at positions ``i, i + n, ...`` of the
    script, and every worker follows all its :class:`Advance` steps, so records start on every worker; without,
    worker 0 sends them all. After each step the source yields, and the dataflow runs before the next.
    """
    if not isinstance(script, Script):
        script = Script(script)
    if mode not in ("time", "timed", "event"):
        raise ValueError(f"script_source {name!r}: mode must be 'time', 'timed' or 'event', not {mode!r}")
    ttype = scope.ttype
    _check(script, ttype, mode, name)
    worker = scope.worker
    index, peers = worker.index, worker.peers
    steps = script.steps
    le = ttype.less_equal

    async def play(output: OperatorOutput, cap: Capability) -> None:
        position = 0
        for step in steps:
            if isinstance(step, Advance):
                if step.time != cap.time:
                    cap.downgrade(step.time)
            else:
                mine = (position % peers == index) if split else index == 0
                position += 1
                if not mine:
                    continue
                time, record = step
                if mode == "timed":
                    output.session(cap).give_at(time, record)
                else:
                    at = time if le(cap.time, time) else cap.time
                    with cap.delayed(at) as later:
                        output.session(later).give((time, record) if mode == "event" else record)
            await asyncio.sleep(0)  # the dataflow runs before the next step
        cap.drop()

    return source(scope, name, play)


def _check(script: Script, ttype: TimestampType[Any, Any], mode: Mode, name: str) -> None:
    """Refuse, before anything runs, a script that moves its frontier backwards or (but in ``"event"`` mode)
    sends a record behind it, naming the step."""
    frontier, moved_at = ttype.minimum, None
    for i, step in enumerate(script.steps):
        time = step.time if isinstance(step, Advance) else step[0]
        try:
            ttype.check_time(time)
        except (TypeError, ValueError) as e:
            raise type(e)(f"script_source {name!r}, step {i} ({step!r}): {e}") from None
        if isinstance(step, Advance):
            if not ttype.less_equal(frontier, time):
                raise ValueError(f"script_source {name!r}, step {i}: cannot advance the frontier to {time!r}: it "
                                 f"is at {frontier!r} already (since step {moved_at})")
            frontier, moved_at = time, i
        elif mode != "event" and not ttype.less_equal(frontier, time):
            raise ValueError(f"script_source {name!r}, step {i}: cannot send {step[1]!r} at time {time!r}: the "
                             f"frontier was advanced to {frontier!r} at step {moved_at} (send it before, or use "
                             "mode='event' to send it late)")
