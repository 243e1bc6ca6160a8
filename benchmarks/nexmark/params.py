"""The queries' window sizes (ms of event time), for tests and for the benchmark."""

from __future__ import annotations

from typing import NamedTuple


class Params(NamedTuple):
    """``size``: the tumbling windows of Q7 and Q8 and the sliding windows of Q4 and Q5; ``period``: how often a
    sliding window starts (Beam's ``windowSizeSec`` and ``windowPeriodSec``)."""

    size: int
    period: int


BEAM = Params(10_000, 5_000)
"""Beam's defaults (10 s windows, sliding every 5 s): the benchmark's."""
TESTS = Params(10_000, 2_000)
"""The tests': 10 s windows sliding every 2 s (each bid in 5 windows)."""


def sliding_starts(t: int, size: int, step: int) -> range:
    """The starts of the sliding windows ``[s, s + size)`` (``s`` a multiple of ``step``) that hold ``t``."""
    low = t - size + 1
    return range(low + (-low) % step, t + 1, step)
