"""What the sources that read on by themselves (:func:`~aiotimely.connectors.aiter.from_aiter`,
:func:`~aiotimely.connectors.kafka.source`) share: the clock they pace themselves by, and the sending again of
what a snapshot kept.

Their pacing reads "now" through a :class:`~aiotimely.worker.clock.Clock`: :data:`CLOCK`, taken when a source
(or a time policy) is made. It is :data:`~aiotimely.worker.clock.MONOTONIC` — intervals, timeouts and periods
are durations, which the wall clock's steps (NTP, a changed time zone) must not stretch or shrink — and a test sets a
:class:`~aiotimely.worker.clock.ManualClock` there (``monkeypatch.setattr(sources, "CLOCK", clock)``) to drive
them by hand instead of sleeping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..worker.clock import MONOTONIC, Clock

if TYPE_CHECKING:
    from ..dataflow import Capability, OperatorOutput

__all__ = ["CLOCK", "send_again"]


CLOCK: Clock = MONOTONIC
"""The clock a source or time policy made now reads (a test sets a ``ManualClock`` here)."""


def send_again(output: OperatorOutput, cap: Capability, again: list[tuple[int, Any]],
               columns: Callable[[list[Any]], Any] | None = None) -> None:
    """Send the records a snapshot kept (``(time, record)``: sent before the position it resumes from, at times
    from the snapshot's on), earliest time first, each at its time; a columnar source's as one batch per time,
    made by ``columns`` (what it read is decoded again)."""
    if columns is None:
        for t, record in sorted(again, key=_time_of):
            with cap.delayed(t) as at_t:
                output.session(at_t).give(record)
        return
    by_time: dict[int, list[Any]] = {}
    for t, record in again:
        by_time.setdefault(t, []).append(record)
    for t in sorted(by_time):
        with cap.delayed(t) as at_t:
            output.session(at_t).give_container(columns(by_time[t]))


def _time_of(timed: tuple[int, Any]) -> int:
    return timed[0]
