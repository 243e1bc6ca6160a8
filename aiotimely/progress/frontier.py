"""Frontiers: antichains of times, counted antichains, and compacting change batches.

* :class:`ChangeBatch` accumulates ``(item, diff)`` updates and hands them out
  compacted (equal items summed, zeros dropped).
* :class:`Antichain` keeps only the minimal elements of what is inserted: a
  frontier. Empty means "nothing more can arrive".
* :class:`MutableAntichain` keeps signed counts of times and reports the frontier
  of the times whose count is positive, and exactly how each batch of updates
  changed it. Counts may be transiently negative (a retraction that overtook its
  matching increment); such times are invisible until the increment arrives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Iterator, TypeVar

from .timestamp import less_equal as _generic_less_equal

if TYPE_CHECKING:
    from _typeshed import SupportsDunderLT

__all__ = ["Antichain", "MutableAntichain", "ChangeBatch"]

T = TypeVar("T")
K = TypeVar("K")
# Times of a MutableAntichain: ``<`` is a total order extending ``less_equal`` (see Timestamp).
TO = TypeVar("TO", bound="SupportsDunderLT[Any]")


def _any_less_equal(elements: list[T], le: Callable[[T, T], bool], time: T) -> bool:
    for e in elements:
        if le(e, time):
            return True
    return False


def _any_less_than(elements: list[T], le: Callable[[T, T], bool], time: T) -> bool:
    for e in elements:
        if e != time and le(e, time):
            return True
    return False


class ChangeBatch(Generic[K]):
    """A compacting multiset delta: ``update(item, diff)`` many times, ``drain()`` the net result.

    Memory is proportional to the distinct items with non-zero net change, however
    many updates arrive.
    """

    __slots__ = ("diffs",)

    def __init__(self, pairs: Iterable[tuple[K, int]] = ()) -> None:
        self.diffs: dict[K, int] = {}
        """The net change of each item with one (never a zero): read it freely (a hot path tests ``batch.diffs``
        for changes at the cost of a slot read); change it only through the methods."""
        if pairs:
            self.extend(pairs)

    def update(self, item: K, diff: int) -> None:
        """Add ``diff`` to the count of ``item``."""
        diffs = self.diffs
        total = diffs.get(item, 0) + diff
        if total:
            diffs[item] = total
        elif item in diffs:
            del diffs[item]

    def extend(self, pairs: Iterable[tuple[K, int]]) -> None:
        """Apply every ``(item, diff)`` pair."""
        diffs = self.diffs
        for item, diff in pairs:
            total = diffs.get(item, 0) + diff
            if total:
                diffs[item] = total
            elif item in diffs:
                del diffs[item]

    def drain(self) -> list[tuple[K, int]]:
        """Return the net ``(item, diff)`` pairs (no zero diffs) and empty the batch."""
        diffs = self.diffs
        if not diffs:
            return []
        self.diffs = {}
        return list(diffs.items())

    def take(self) -> dict[K, int]:
        """The net changes as a dict of their own, emptying the batch (a drain without making a list)."""
        diffs = self.diffs
        if diffs:
            self.diffs = {}
        return diffs

    def drain_into(self, other: ChangeBatch[K]) -> None:
        """Move every net change into ``other``."""
        if not other.diffs:
            other.diffs, self.diffs = self.diffs, other.diffs
        else:
            other.extend(self.diffs.items())
            self.diffs = {}

    def is_empty(self) -> bool:
        """True if every item's net change is zero."""
        return not self.diffs

    def __bool__(self) -> bool:
        return bool(self.diffs)

    def __len__(self) -> int:
        return len(self.diffs)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        """The net ``(item, diff)`` pairs, without draining."""
        return iter(list(self.diffs.items()))

    def get(self, item: K) -> int:
        """The net change of ``item`` so far."""
        return self.diffs.get(item, 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeBatch):
            return NotImplemented
        return self.diffs == other.diffs

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self.diffs.items())!r})"


class Antichain(Generic[T]):
    """A set of mutually incomparable times: the minimal elements of everything inserted.

    As a frontier it says which times may still appear: ``t`` may appear iff some
    element is ``<=`` t (:meth:`less_equal`). The empty antichain is the complete
    frontier (nothing more will appear), and is falsy.
    """

    __slots__ = ("_elements", "_le")

    def __init__(
        self,
        elements: Iterable[T] = (),
        *,
        less_equal: Callable[[T, T], bool] | None = None,
    ) -> None:
        self._le = less_equal or _generic_less_equal
        self._elements: list[T] = []
        for element in elements:
            self.insert(element)

    @classmethod
    def _from_minimal(cls, elements: list[T], less_equal: Callable[[T, T], bool]) -> Antichain[T]:
        chain = cls.__new__(cls)
        chain._le = less_equal
        chain._elements = list(elements)
        return chain

    def insert(self, element: T) -> bool:
        """Add ``element`` unless some element is ``<=`` it; drop the elements it is ``<=``.

        Returns whether it was added.
        """
        le = self._le
        elements = self._elements
        for e in elements:
            if le(e, element):
                return False
        self._elements = [e for e in elements if not le(element, e)]
        self._elements.append(element)
        return True

    def less_equal(self, time: T) -> bool:
        """True if some element is ``<=`` time: ``time`` is not yet complete."""
        return _any_less_equal(self._elements, self._le, time)

    def less_than(self, time: T) -> bool:
        """True if some element is strictly ``<`` time."""
        return _any_less_than(self._elements, self._le, time)

    def dominates(self, other: Iterable[T]) -> bool:
        """True if every element of ``other`` is ``>=`` some element of this antichain."""
        return all(self.less_equal(t) for t in other)

    @property
    def elements(self) -> tuple[T, ...]:
        return tuple(self._elements)

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._elements))

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __contains__(self, time: object) -> bool:
        return time in self._elements

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Antichain):
            return len(self._elements) == len(other._elements) and all(
                e in other._elements for e in self._elements
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        elements: list[Any] = self._elements  # summaries need not support ``<``
        try:
            shown = sorted(elements)
        except TypeError:
            shown = elements
        return f"Antichain({shown!r})"


class MutableAntichain(Generic[TO]):
    """Signed counts of times, and the frontier of the times whose count is positive.

    :meth:`update_iter` applies a batch of ``(time, diff)`` updates and returns the
    exact changes to the frontier as ``(time, +1 | -1)`` pairs. A frontier is
    recomputed only when an update could change it (a time at or below the frontier
    gains, or a frontier element loses); updates strictly above the frontier are a
    dictionary write.
    """

    __slots__ = ("_counts", "_frontier", "_le", "_total")

    def __init__(
        self,
        updates: Iterable[tuple[TO, int]] = (),
        *,
        less_equal: Callable[[TO, TO], bool] | None = None,
        totally_ordered: bool = False,
    ) -> None:
        self._counts: dict[TO, int] = {}
        self._frontier: list[TO] = []
        self._le = less_equal or _generic_less_equal
        self._total = totally_ordered
        if updates:
            self.update_iter(updates)

    @property
    def frontier(self) -> Antichain[TO]:
        """The minimal times with positive count."""
        return Antichain._from_minimal(self._frontier, self._le)

    def update_iter(self, updates: Iterable[tuple[TO, int]]) -> list[tuple[TO, int]]:
        """Apply ``(time, diff)`` updates; return the frontier's changes as ``(time, ±1)`` pairs."""
        counts = self._counts
        if self._total:
            return self._update_iter_total(updates)
        rebuild = False
        for time, diff in updates:
            if not diff:
                continue
            if not rebuild:
                rebuild = self._may_change(time, diff)
            total = counts.get(time, 0) + diff
            if total:
                counts[time] = total
            else:
                del counts[time]
        return self._rebuild() if rebuild else []

    def update(self, time: TO, diff: int) -> list[tuple[TO, int]]:
        """Apply one update; return the frontier's changes."""
        if not diff:
            return []
        counts = self._counts
        total = counts.get(time, 0) + diff
        if self._total:
            # The frontier is at most one time, the least with a positive count.
            if total:
                counts[time] = total
            else:
                del counts[time]
            frontier = self._frontier
            if not frontier:
                if total > 0:
                    self._frontier = [time]
                    return [(time, 1)]
                return []
            least = frontier[0]
            if least < time:
                return []
            if time == least:
                if total > 0:
                    return []
                if not counts:
                    self._frontier = []
                    return [(least, -1)]
                return self._rebuild()
            if total > 0:
                self._frontier = [time]
                return [(least, -1), (time, 1)]
            return []
        rebuild = self._may_change(time, diff)
        if total:
            counts[time] = total
        else:
            del counts[time]
        return self._rebuild() if rebuild else []

    def _update_iter_total(self, updates: Iterable[tuple[TO, int]]) -> list[tuple[TO, int]]:
        old = self._frontier
        if not self.update_total((t, d) for t, d in updates if d) or old == self._frontier:
            return []
        return [(t, -1) for t in old] + [(t, 1) for t in self._frontier]

    def update_total(self, updates: Iterable[tuple[TO, int]], rebuild: bool = False) -> bool:
        """For totally ordered times: apply ``(time, diff)`` updates (no zero diffs); True if the frontier (its
        least time with a positive count) may have moved. Cheaper than :meth:`update_iter` where the changes are not
        needed: the least time is recomputed only if an update reached it."""
        counts = self._counts
        frontier = self._frontier
        least = frontier[0] if frontier else None
        for time, diff in updates:
            total = counts.get(time, 0) + diff
            if total:
                counts[time] = total
            else:
                del counts[time]
            if least is None or not least < time:
                rebuild = True
        if rebuild:  # (``rebuild=True``: whatever the updates)
            least = None
            for t, c in counts.items():
                if c > 0 and (least is None or t < least):
                    least = t
            self._frontier = [] if least is None else [least]
        return rebuild

    def _may_change(self, time: TO, diff: int) -> bool:
        # A positive count implies a frontier element <= it, so:
        #  - some element strictly below `time`: `time` is not minimal either way;
        #  - an element equal to `time`: only a decrease can remove it;
        #  - no element <= `time`: its count is <= 0, only an increase can matter.
        le = self._le
        reached = False
        for f in self._frontier:
            if le(f, time):
                if f != time:
                    return False
                reached = True
        return diff < 0 if reached else diff > 0

    def _rebuild(self) -> list[tuple[TO, int]]:
        old = self._frontier
        if self._total:
            self.update_total((), rebuild=True)
            new = self._frontier
        else:
            positive = [t for t, c in self._counts.items() if c > 0]
            if len(positive) <= 1:
                new = positive
            else:
                le = self._le
                new = []
                # In a linear extension, no later time can be <= an earlier one, so a
                # time kept here is never evicted by a later one.
                for t in sorted(positive):
                    for f in new:
                        if le(f, t):
                            break
                    else:
                        new.append(t)
        self._frontier = new
        if old == new:
            return []
        changes = [(t, -1) for t in old if t not in new]
        changes.extend((t, 1) for t in new if t not in old)
        return changes

    def less_equal(self, time: TO) -> bool:
        """True if some frontier element is ``<=`` time."""
        return _any_less_equal(self._frontier, self._le, time)

    def less_than(self, time: TO) -> bool:
        """True if some frontier element is strictly ``<`` time."""
        return _any_less_than(self._frontier, self._le, time)

    def count_for(self, time: TO) -> int:
        """The accumulated count of ``time`` (possibly negative)."""
        return self._counts.get(time, 0)

    def is_empty(self) -> bool:
        """True if no time has positive count."""
        return not self._frontier

    def updates(self) -> list[tuple[TO, int]]:
        """Every time with a non-zero count, and its count."""
        return list(self._counts.items())

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self.frontier!r}, counts={self._counts!r})"
