"""A capability pool: one capability per pending time, held while something waits for that time.

Operators that send at times of their own choosing (a window's end, a join's expiry, a delayed record's new
time) need a capability at each such time while results for it are pending, and none after: holding one longer
holds the frontier back; holding one per waiting thing costs a progress update each. The pool keeps exactly one
per time, counted by what waits for it (:meth:`CapabilityPool.hold`, :meth:`CapabilityPool.release`), or
given up once the input frontier has passed its time (:meth:`CapabilityPool.take_passed`).
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Iterator, TypeVar

from ..capability import Capability, CapabilityRef

__all__ = ["CapabilityPool"]

T = TypeVar("T")


class CapabilityPool(Generic[T]):
    """Capabilities by pending time, each with the number of things that wait for it.

    ``retime=False`` keeps each new capability at the time of the one it is made from, rather than at the
    pending time that names it: for times that are not dataflow times (a wall-clock deadline), whose results
    go at whatever dataflow time the operator has reached (see :meth:`downgrade_to`)."""

    __slots__ = ("_held", "_retime")

    def __init__(self, *, retime: bool = True) -> None:
        self._held: dict[T, list[Any]] = {}        # pending time -> [capability, how many wait for it]
        self._retime = retime

    def hold(self, time: T, cap: Capability | CapabilityRef) -> None:
        """One more thing waits for ``time``: the first makes the pool's capability for it from ``cap`` (a
        capability, or the time of a batch just received)."""
        entry = self._held.get(time)
        if entry is None:
            self._held[time] = [cap.delayed(time if self._retime else cap.time), 1]
        else:
            entry[1] += 1

    def release(self, time: T, count: int = 1) -> None:
        """``count`` fewer things wait for ``time``: when none does any more, its capability is dropped."""
        entry = self._held[time]
        left = entry[1] - count
        if left > 0:
            entry[1] = left
            return
        if left < 0:
            raise ValueError(f"cannot release {time!r} {count} times: {entry[1]} wait for it")
        del self._held[time]
        entry[0].drop()

    def capability(self, time: T) -> Capability:
        """The capability held for ``time`` (to send with, while it is held)."""
        cap: Capability = self._held[time][0]
        return cap

    def capabilities(self, times: list[T]) -> list[Capability]:
        """The capabilities held for ``times`` (one call for many)."""
        held = self._held
        return [held[t][0] for t in times]

    def release_all(self, counts: dict[T, int]) -> None:
        """:meth:`release` each time ``counts[time]`` times (one call for many)."""
        held = self._held
        for time, count in counts.items():
            entry = held[time]
            left = entry[1] - count
            if left > 0:
                entry[1] = left
            elif left == 0:
                del held[time]
                entry[0].drop()
            else:
                self.release(time, count)        # (refused, saying why)

    def take_passed(self, still_open: Callable[[T], bool]) -> list[tuple[T, Capability]]:
        """Remove the times for which ``still_open(time)`` is false (``input.less_equal``: the frontier has passed
        them), earliest first, with their capabilities: the caller sends with each, then drops it."""
        passed = sorted(t for t in self._held if not still_open(t))   # type: ignore[type-var]
        return [(t, self._held.pop(t)[0]) for t in passed]

    def release_passed(self, still_open: Callable[[T], bool]) -> list[T]:
        """Drop the capabilities of the times the frontier has passed (see :meth:`take_passed`); their times."""
        taken = self.take_passed(still_open)
        for _, cap in taken:
            cap.drop()
        return [t for t, _ in taken]

    def downgrade_to(self, time: Any) -> None:
        """Move every capability held at an earlier (int) dataflow time than ``time`` to ``time``: results still
        pending then go no earlier than the frontier has reached."""
        for entry in self._held.values():
            cap = entry[0]
            if cap.time < time:
                cap.downgrade(time)

    def times(self) -> Iterator[T]:
        """The pending times, in the order they were first held."""
        return iter(list(self._held))

    def waiting(self, time: T) -> int:
        """How many things wait for ``time`` (0 if none)."""
        entry = self._held.get(time)
        return 0 if entry is None else int(entry[1])

    def __contains__(self, time: object) -> bool:
        return time in self._held

    def __len__(self) -> int:
        return len(self._held)

    def __bool__(self) -> bool:
        return bool(self._held)

    def __repr__(self) -> str:
        return f"CapabilityPool({ {t: e[1] for t, e in self._held.items()}!r})"
