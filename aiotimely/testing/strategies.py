"""Hypothesis strategies for timely's data: times, antichains, frontier updates, and scripted event streams.

Needs ``hypothesis`` (``pip install hypothesis``; the rest of :mod:`aiotimely.testing`
does not). Times are small by default, so that generated examples collide, compare
and stay readable when hypothesis shrinks them.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import strategies as st

from ..progress import Antichain, Product
from .sources import Advance, Script, Step

__all__ = ["int_times", "products", "times", "antichains", "updates", "event_streams"]

T = TypeVar("T")


def int_times(max_value: int = 6) -> st.SearchStrategy[int]:
    """Int times, ``0..max_value``."""
    return st.integers(0, max_value)


def products(depth: int = 1, max_value: int = 6) -> st.SearchStrategy[Product]:
    """Product times of ``depth`` nested scopes: ``Product(outer, inner)`` for a loop in the root scope
    (``depth=1``), ``Product(Product(outer, inner), innermost)`` for a loop in a loop (``depth=2``), ...; every
    coordinate in ``0..max_value``."""
    if depth < 1:
        raise ValueError(f"products(depth={depth}): a Product time has at least one nested scope (depth >= 1)")
    coordinate = st.integers(0, max_value)
    outer: st.SearchStrategy[Any] = coordinate
    for _ in range(depth):
        outer = st.builds(Product, outer, coordinate)
    return outer


def times(depth: int = 0, max_value: int = 6) -> st.SearchStrategy[Any]:
    """Times of a scope nested ``depth`` loops deep: ints (``depth=0``) or :func:`products`."""
    return int_times(max_value) if depth == 0 else products(depth, max_value)


def antichains(elements: st.SearchStrategy[T] | None = None, max_size: int = 6) -> st.SearchStrategy[Antichain[T]]:
    """Antichains of times drawn from ``elements`` (Product times by default, which give antichains of several
    incomparable elements): the minimal elements of a list of up to ``max_size`` times, so possibly empty."""
    drawn: st.SearchStrategy[Any] = elements if elements is not None else products()
    return st.lists(drawn, max_size=max_size).map(Antichain)


def updates(elements: st.SearchStrategy[T] | None = None, max_diff: int = 2,
            max_size: int | None = 6) -> st.SearchStrategy[list[tuple[T, int]]]:
    """A batch of ``(time, diff)`` updates, as a :class:`~aiotimely.MutableAntichain` or a
    :class:`~aiotimely.ChangeBatch` takes them: diffs in ``-max_diff..max_diff`` (zero included), times from
    ``elements`` (Product times by default); ``max_size=None`` for batches of any length."""
    drawn: st.SearchStrategy[Any] = elements if elements is not None else products()
    return st.lists(st.tuples(drawn, st.integers(-max_diff, max_diff)), max_size=max_size)


@st.composite
def event_streams(draw: st.DrawFn, records: st.SearchStrategy[Any] | None = None, *, max_time: int = 10,
                  min_size: int = 0, max_size: int = 20, late: bool = False) -> Script:
    """A :class:`~aiotimely.testing.Script` of ``(time, record)`` events (int times ``0..max_time``, records from
    ``records``, ints by default) in a random order, its frontier advanced at random points.

    Without ``late``, the frontier never passes an event still to come (every mode of
    :func:`~aiotimely.testing.script_source` can play it); with ``late=True`` it may move anywhere up to
    ``max_time + 1``, leaving later events behind it: late events, for ``mode="event"``."""
    events = draw(st.lists(st.tuples(st.integers(0, max_time), records if records is not None else st.integers()),
                           min_size=min_size, max_size=max_size))
    steps: list[Step] = []
    frontier = 0
    for i, event in enumerate(events):
        highest = max_time + 1 if late else min(t for t, _ in events[i:])
        if highest > frontier and draw(st.booleans()):
            frontier = draw(st.integers(frontier + 1, highest))
            steps.append(Advance(frontier))
        steps.append(event)
    if frontier <= max_time and draw(st.booleans()):
        steps.append(Advance(max_time + 1))
    return Script(steps)
