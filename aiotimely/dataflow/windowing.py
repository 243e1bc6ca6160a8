"""What a window operator computes: which windows a time falls in (:class:`Tumbling`, :class:`Sliding`,
:class:`Sessions`), and what it folds each window's records into (:class:`Aggregation`, made by :class:`Agg`).

Windows are half-open intervals ``[start, end)`` of event time, an ``int``. Aggregations take a window's
records a batch at a time (``add(acc, records)``), so the per-record work is a C loop (``len``, ``sum``,
``min``) wherever it can be; an accumulator is a plain value (saved in snapshots by pickle).
"""

from __future__ import annotations

import builtins
import copy
import functools
from typing import Any, Callable, Sequence

__all__ = ["WindowSpec", "Tumbling", "Sliding", "Sessions", "Aggregation", "Agg", "combine"]


def _positive(owner: str, name: str, value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive int (in units of event time), not {value!r}")
    return value


class WindowSpec:
    """Which windows an event time falls in; one of :class:`Tumbling`, :class:`Sliding`, :class:`Sessions`."""

    __slots__ = ()

    merging = False
    """Windows that grow and merge as records come (sessions), rather than fixed by the time alone."""


class Tumbling(WindowSpec):
    """Windows of ``size`` units side by side: ``[offset + k*size, offset + (k+1)*size)``."""

    __slots__ = ("size", "offset")

    def __init__(self, size: int, offset: int = 0) -> None:
        self.size = _positive("Tumbling", "size", size)
        if type(offset) is not int:
            raise ValueError(f"Tumbling: offset must be an int, not {offset!r}")
        self.offset = offset % size

    def starts(self, t: int) -> list[int]:
        """The starts of the windows holding ``t``."""
        return [t - (t - self.offset) % self.size]

    def __repr__(self) -> str:
        return f"Tumbling({self.size}, offset={self.offset})"


class Sliding(WindowSpec):
    """Windows of ``size`` units starting every ``step`` units (hopping): a time falls in ``ceil(size/step)``
    windows (or none, in the gaps, if ``step > size``)."""

    __slots__ = ("size", "step", "offset")

    def __init__(self, size: int, step: int, offset: int = 0) -> None:
        self.size = _positive("Sliding", "size", size)
        self.step = _positive("Sliding", "step", step)
        if type(offset) is not int:
            raise ValueError(f"Sliding: offset must be an int, not {offset!r}")
        self.offset = offset % step

    def starts(self, t: int) -> list[int]:
        """The starts of the windows holding ``t``, earliest first."""
        low = t - self.size + 1                       # the windows [s, s + size) holding t: t - size < s <= t
        return list(range(low + (self.offset - low) % self.step, t + 1, self.step))

    def __repr__(self) -> str:
        return f"Sliding({self.size}, {self.step}, offset={self.offset})"


class Sessions(WindowSpec):
    """Per key, runs of records at most ``gap - 1`` units apart: a record at ``t`` opens ``[t, t + gap)``, and
    windows that overlap merge (their accumulators merged with the aggregation's ``merge``)."""

    __slots__ = ("gap",)
    merging = True

    def __init__(self, gap: int) -> None:
        self.gap = _positive("Sessions", "gap", gap)

    def __repr__(self) -> str:
        return f"Sessions({self.gap})"


class Aggregation:
    """How a window's records fold into one value: ``init()`` a new accumulator, ``add(acc, records)`` the
    accumulator with a batch of records added (returned), ``merge(a, b)`` two accumulators as one (needed for
    :class:`Sessions`), ``result(acc)`` the value sent."""

    __slots__ = ("name", "init", "add", "merge", "result", "inline", "step", "portable", "given")

    def __init__(self, name: str, init: Callable[[], Any], add: Callable[[Any, list[Any]], Any],
                 merge: Callable[[Any, Any], Any] | None = None, result: Callable[[Any], Any] | None = None) -> None:
        self.name = name
        self.init = init
        self.add = add
        self.merge = merge
        self.result: Callable[[Any], Any] = result if result is not None else _identity
        self.inline: tuple[str, str, Callable[[Any], Any] | None] | None = None
        """For the built-in sums: ``add`` as an expression over ``acc`` and ``records``, and ``step`` over ``acc``
        and ``r`` (and ``of``, the function given), so that a tuple of them adds in one call."""
        self.step: Callable[[Any, Any], Any] | None = None
        """For the built-in sums: the accumulator with one record added (the window operator's fast path)."""
        self.portable = False
        """Its accumulators are made of the records and plain values (the built-ins but ``fold``), so they may
        cross processes wherever the records can: windows combine them before the exchange by default."""
        self.given: Any = None
        """What a built-in was given (``of``, or ``key`` for ``min``/``max``): a columnar window reads a column's
        name here."""

    def __repr__(self) -> str:
        return f"Aggregation({self.name})"


def _identity(acc: Any) -> Any:
    return acc


_EMPTY: tuple[()] = ()
"""The accumulator of min/max/reduce before their first record."""


def _best(pick: Callable[..., Any], key: Callable[[Any], Any] | None) -> Callable[[Any, list[Any]], Any]:
    if key is None:
        def add(acc: Any, records: list[Any]) -> Any:
            best = pick(records)
            return (pick(acc[0], best),) if acc else (best,)
    else:
        def add(acc: Any, records: list[Any]) -> Any:
            best = pick(records, key=key)
            return (pick(acc[0], best, key=key),) if acc else (best,)
    return add


def _merge_best(pick: Callable[..., Any], key: Callable[[Any], Any] | None) -> Callable[[Any, Any], Any]:
    def merge(a: Any, b: Any) -> Any:
        if not a:
            return b
        if not b:
            return a
        return (pick(a[0], b[0]),) if key is None else (pick(a[0], b[0], key=key),)
    return merge


def _only(acc: Any) -> Any:
    return acc[0] if acc else None


class Agg:
    """The built-in aggregations: ``Agg.count()``, ``Agg.sum(of)``, ``Agg.mean(of)``, ``Agg.min(key)``,
    ``Agg.max(key)``, ``Agg.collect(of)``, ``Agg.fold(init, fn, merge)``, ``Agg.reduce(fn)``. ``of`` picks
    the value of a record (default: the record); a tuple of aggregations gives a tuple of results."""

    @staticmethod
    def count() -> Aggregation:
        """How many records."""
        return _portable(_inline(Aggregation("count", int, lambda acc, records: acc + len(records), _add),
                                 "{acc} + len(records)", "{acc} + 1", None))

    @staticmethod
    def sum(of: Callable[[Any], Any] | None = None) -> Aggregation:
        """The sum of the records (of ``of(record)``)."""
        if of is None:
            return _portable(_inline(Aggregation("sum", int, lambda acc, records: acc + builtins.sum(records), _add),
                                     "{acc} + sum(records)", "{acc} + r", None))
        return _portable(_inline(Aggregation("sum", int, lambda acc, records: acc + builtins.sum(map(of, records)),
                                             _add), "{acc} + sum(map({of}, records))", "{acc} + {of}(r)", of), of)

    @staticmethod
    def mean(of: Callable[[Any], Any] | None = None) -> Aggregation:
        """The mean of the records (of ``of(record)``), a float."""
        def add(acc: Any, records: list[Any]) -> Any:
            total = builtins.sum(records) if of is None else builtins.sum(map(of, records))
            return (acc[0] + len(records), acc[1] + total)
        return _portable(Aggregation("mean", lambda: (0, 0), add, lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                     lambda acc: acc[1] / acc[0] if acc[0] else None), of)

    @staticmethod
    def min(key: Callable[[Any], Any] | None = None) -> Aggregation:
        """The least record (by ``key(record)``); of equal ones, the first applied."""
        return _portable(Aggregation("min", lambda: _EMPTY, _best(builtins.min, key), _merge_best(builtins.min, key),
                                     _only), key)

    @staticmethod
    def max(key: Callable[[Any], Any] | None = None) -> Aggregation:
        """The greatest record (by ``key(record)``); of equal ones, the first applied."""
        return _portable(Aggregation("max", lambda: _EMPTY, _best(builtins.max, key), _merge_best(builtins.max, key),
                                     _only), key)

    @staticmethod
    def collect(of: Callable[[Any], Any] | None = None) -> Aggregation:
        """The records (``of(record)``) as a list, in the order they were applied: by dataflow time, and within
        a time as they arrived (sort it if the order matters to you)."""
        def add(acc: list[Any], records: list[Any]) -> list[Any]:
            acc.extend(records if of is None else map(of, records))
            return acc
        return _portable(Aggregation("collect", list, add, lambda a, b: a + b), of)

    @staticmethod
    def fold(init: Any, fn: Callable[[Any, Any], Any], merge: Callable[[Any, Any], Any] | None = None) -> Aggregation:
        """``acc = fn(acc, record)`` from a copy of ``init``, record by record in the order applied; for
        :class:`Sessions` give ``merge(a, b)``, two accumulators as one."""
        return Aggregation("fold", lambda: copy.copy(init),
                           lambda acc, records: functools.reduce(fn, records, acc), merge)

    @staticmethod
    def reduce(fn: Callable[[Any, Any], Any]) -> Aggregation:
        """``fn(fn(r1, r2), r3)...`` over the records (``fn`` associative: it also merges sessions)."""
        def add(acc: Any, records: list[Any]) -> Any:
            return (functools.reduce(fn, records, acc[0]) if acc else functools.reduce(fn, records),)
        return _portable(Aggregation("reduce", lambda: _EMPTY, add,
                                     lambda a, b: (fn(a[0], b[0]),) if a and b else a or b, _only))


def _add(a: Any, b: Any) -> Any:
    return a + b


def _portable(agg: Aggregation, given: Any = None) -> Aggregation:
    agg.portable = True
    agg.given = given
    return agg


def _inline(agg: Aggregation, add: str, step: str, of: Callable[[Any], Any] | None) -> Aggregation:
    agg.inline = (add, step, of)
    agg.step = _compiled("step", "r", [(step, of)], single=True)
    return agg


def _compiled(name: str, argument: str, terms: list[tuple[str, Callable[[Any], Any] | None]],
              single: bool = False) -> Callable[[Any, Any], Any]:
    """``def name(acc, argument): return (term0, term1, ...)`` from our own templates over ``acc`` (the i-th
    accumulator as ``acc[i]``, or ``acc`` itself if ``single``) and ``of`` (the i-th function given)."""
    env: dict[str, Any] = {}
    parts = []
    for i, (template, of) in enumerate(terms):
        env[f"of_{i}"] = of
        parts.append(template.format(acc="acc" if single else f"acc[{i}]", of=f"of_{i}"))
    body = parts[0] if single else f"({', '.join(parts)},)"
    source = f"def {name}(acc, {argument}):\n    return {body}\n"
    exec(compile(source, f"<aiotimely aggregation {name}>", "exec"), env)  # noqa: S102 - our templates only
    fn: Callable[[Any, Any], Any] = env[name]
    return fn


def combine(aggregations: Aggregation | Sequence[Aggregation], owner: str) -> Aggregation:
    """One aggregation, or a tuple of them as one (its result the tuple of their results)."""
    if isinstance(aggregations, Aggregation):
        return aggregations
    parts: tuple[Aggregation, ...] = tuple(aggregations) if isinstance(aggregations, (tuple, list)) else ()
    if not parts or not all(isinstance(a, Aggregation) for a in parts):
        raise TypeError(f"{owner}: the aggregation must be an Aggregation (from at.Agg) or a tuple of them, "
                        f"not {aggregations!r}")
    inits = [a.init for a in parts]
    adds = [a.add for a in parts]
    results = [a.result for a in parts]
    merges = [a.merge for a in parts]

    def each(acc: tuple[Any, ...], records: list[Any]) -> tuple[Any, ...]:
        return tuple([f(x, records) for f, x in zip(adds, acc, strict=True)])

    inline = [a.inline for a in parts if a.inline is not None]
    add = _compiled("add", "records", [(t, of) for t, _, of in inline]) if len(inline) == len(parts) else each

    def merge(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple([m(x, y) for m, x, y in zip(merges, a, b, strict=True)])  # type: ignore[misc]

    if all(f is int for f in inits):
        zeros = (0,) * len(parts)                    # immutable: every window may start from the same one

        def init() -> tuple[Any, ...]:
            return zeros
    else:
        def init() -> tuple[Any, ...]:
            return tuple([f() for f in inits])

    def results_of(acc: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple([f(x) for f, x in zip(results, acc, strict=True)])

    combined = Aggregation("+".join(a.name for a in parts), init, add, merge if all(m is not None for m in merges)
                           else None, None if all(f is _identity for f in results) else results_of)
    if len(inline) == len(parts):
        combined.step = _compiled("step", "r", [(t, of) for _, t, of in inline])
    combined.portable = all(a.portable for a in parts)
    return combined
