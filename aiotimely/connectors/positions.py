"""Where a source is, snapshot by snapshot: what a resumed run of a recoverable dataflow reads from.

A source reads one or more *parts* (Kafka partitions, an async iterator). For each
part, a snapshot at time ``t`` keeps its position (the offset, or the number of
records read), the state of its time policy, and the records it sent at times
``t`` or later before reaching that position (event time runs ahead of the
frontier): a resumed run reads on from the position and sends those again.
Positions are kept by part, so they follow their parts to other workers.
"""

from __future__ import annotations

import pickle
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..dataflow import OperatorOutput
    from .aiter import TimePolicy

__all__ = ["SourcePart", "SourcePositions"]


class SourcePart:
    """One part a source reads: its position, its low time (nothing earlier comes from it any more), and,
    when snapshots are on, what each snapshot needs of it."""

    __slots__ = ("number", "policy", "low", "position", "recent", "cuts")

    def __init__(self, number: int, policy: TimePolicy | None) -> None:
        self.number = number
        self.policy = policy
        self.low = 0
        self.position = 0
        self.recent: list[tuple[int, Any]] = []
        """Records sent at times not below ``low``: a snapshot cut there must send them again."""
        self.cuts: deque[tuple[int, int, tuple[Any, ...]]] = deque()
        """``(first id, last id, state)``: the part's state for those snapshots."""

    def state(self, overhang: list[tuple[int, Any]] | None = None) -> tuple[Any, ...]:
        policy = self.policy
        return (self.position, None if policy is None else policy.snapshot(),
                self.recent if overhang is None else overhang)

    def restore(self, state: tuple[Any, ...] | None, start: int, every: int) -> list[tuple[int, Any]]:
        """Take up the state of the snapshot resumed from (at time ``start``; ``None``: the part is new);
        returns the records to send again (sent before the position, at times from the snapshot's on)."""
        position, policy_state, overhang = state if state is not None else (0, None, [])
        self.position = position
        if self.policy is not None:
            self.policy.resume(policy_state, start)
            self.low = max(self.policy.current(), start)
        else:
            self.low = start
        again = [(t, r) for t, r in overhang if t >= start]
        self.recent = [(t, r) for t, r in again if t >= self.low]
        first, last = start // every + 1, self.low // every
        if state is not None and last >= first:  # ahead of the snapshot: this state stands for the ones between
            self.cuts.append((first, last, (position, policy_state, again)))
        return again

    def sent(self, time: int, records: list[Any]) -> None:
        """Records sent at ``time`` (remembered while a snapshot before ``time`` may still be cut)."""
        self.recent.extend((time, r) for r in records)

    def moved(self, low: int, every: int | None) -> None:
        """After a batch: no record before ``low`` will come from this part any more."""
        if every is not None:
            first, last = self.low // every + 1, low // every
            if last >= first:
                self.cuts.append((first, last, self.state([(t, r) for t, r in self.recent if t >= first * every])))
        if low > self.low:
            self.low = low
            self.recent = [(t, r) for t, r in self.recent if t >= low]

    def at(self, snapshot: int) -> tuple[Any, ...] | None:
        """The state for ``snapshot`` (dropping what only older snapshots needed)."""
        cuts = self.cuts
        while cuts and cuts[0][1] < snapshot:
            cuts.popleft()
        if cuts and cuts[0][0] <= snapshot:
            return cuts[0][2]
        return None


class SourcePositions:
    """A source's share in snapshots: its parts' states, reported for every snapshot the source's time
    passes (the source reports them itself: it may send ahead of its capability)."""

    def __init__(self, output: OperatorOutput, parts: list[SourcePart]) -> None:
        op = output._port.op
        self.snapshotter = op.scope.dataflow.snapshotter
        self.restored: dict[int, tuple[Any, ...]] = output.keyed_state("positions", dict)
        self.participant = op.recovery.participant
        if self.participant is not None:
            self.participant.manual = True
        self.parts = parts
        self.every = self.snapshotter.every if self.snapshotter is not None else None
        self.committed = self.snapshotter.start if self.snapshotter is not None else 0

    def resume(self, part: SourcePart, start: int) -> list[tuple[int, Any]]:
        """Set ``part`` up to resume (from its state in the snapshot, if it has one); the records to send again."""
        if self.every is None:
            if part.policy is not None:
                part.policy.resume(None, start)
            part.low = start
            return []
        return part.restore(self.restored.get(part.number), start, self.every)

    def report(self, low: int) -> None:
        """The source's time moved to ``low``: every part has a state for the snapshots up to it."""
        participant, every = self.participant, self.every
        if participant is None or every is None:
            return
        last = low // every
        while participant.through < last:
            first = participant.through + 1
            states = {p.number: p.at(first) for p in self.parts}
            hi = min([last] + [next(c[1] for c in p.cuts if c[0] <= first) for p in self.parts])
            participant.report(first, hi, _pieces(states))

    def finish(self) -> None:
        """The source is done: its parts' states stand for every later snapshot."""
        if self.participant is not None and not self.participant.finished:
            states = {p.number: p.state() for p in self.parts}
            self.participant.report(self.participant.through + 1, None, _pieces(states))

    def complete(self) -> dict[int, int]:
        """Per part, its position in the latest snapshot complete everywhere (if newly complete)."""
        snapshotter = self.snapshotter
        if snapshotter is None or snapshotter.complete <= self.committed:
            return {}
        self.committed = snapshotter.complete
        positions = {}
        for p in self.parts:
            state = p.at(self.committed)
            if state is not None:
                positions[p.number] = state[0]
        return positions


def _pieces(states: dict[int, Any]) -> bytes:
    return pickle.dumps({"positions": (True, states)}, protocol=pickle.HIGHEST_PROTOCOL)
