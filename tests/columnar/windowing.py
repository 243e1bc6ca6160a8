"""What the columnar window tests share: rows ``(k, ts, x)`` at dataflow times from worker 0, the record path's
window on the same rows, and a plain-Python model of windows over event time with lateness."""

from __future__ import annotations

from typing import Any

import polars as pl

import aiotimely as at

EVENTS = {"k": pl.Int64, "ts": pl.Int64, "x": pl.Int64}
"""Rows ``(k, ts, x)``: a key, an event time, a number."""


def events(scope: at.Scope, timed: list[tuple[int, list[tuple[int, int, int]]]]) -> Any:
    """Worker 0 introduces each ``(time, rows)`` as one frame at that time (times not decreasing)."""
    mine = [(t, rows) for t, rows in timed if rows] if scope.worker.index == 0 else []
    frames = [pl.DataFrame(rows, schema=EVENTS, orient="row") for _, rows in mine]
    return at.from_arrow(scope, frames, times=[t for t, _ in mine], schema=EVENTS)


def record_window(records: at.Stream, spec: Any, lateness: int, *, keyed: bool = True,
                  dataflow_time: bool = False) -> tuple[at.Stream, at.Stream]:
    """The record path's window over ``(k, ts, x)`` records: count, sum and max of x, as columnar result rows
    ``(k, start, end, count, x_sum, x_max)`` (without a key: no ``k``), and the late records; event time ``ts``,
    or the dataflow time."""
    results, late = records.window(spec, (at.Agg.count(), at.Agg.sum(lambda r: r[2]), at.Agg.max(lambda r: r[2])),
                                   key=(lambda r: r[0]) if keyed else None,
                                   time=None if dataflow_time else (lambda r: r[1]),
                                   lateness=lateness, late="stream")
    if keyed:
        return results.map(lambda w: (w[0], *w[1], w[2][0], w[2][1], w[2][2][2])), late
    return results.map(lambda w: (*w[0], w[1][0], w[1][1], w[1][2][2])), late


def starts_of(spec: Any, t: int) -> list[int]:
    """The starts of the fixed windows holding ``t`` (the record path's own rule)."""
    return list(spec.starts(t))


def model(timed: list[tuple[int, list[tuple[int, int, int]]]], spec: Any, lateness: int,
          keyed: bool = True) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """Fixed windows by hand: ``(results by output time, late rows by dataflow time)``. A row at ``d`` is late if
    one of its windows ends at or before ``d - lateness``; it counts in the others; a window's result goes at
    ``end + lateness`` as ``(k, start, end, count, sum, max)``."""
    windows: dict[tuple[int, int], list[int]] = {}
    late: dict[int, list[Any]] = {}
    for d, rows in timed:
        horizon = d - lateness
        for k, ts, x in rows:
            starts = starts_of(spec, ts)
            if any(s + spec.size <= horizon for s in starts):
                late.setdefault(d, []).append((k, ts, x))
            for s in starts:
                if s + spec.size > horizon:
                    windows.setdefault((k if keyed else 0, s), []).append(x)
    results: dict[int, list[Any]] = {}
    for (k, s), xs in windows.items():
        row = (s, s + spec.size, len(xs), sum(xs), max(xs))
        results.setdefault(s + spec.size + lateness, []).append((k, *row) if keyed else row)
    return {t: sorted(rs) for t, rs in results.items()}, {t: sorted(rs) for t, rs in late.items()}


def sessions_model(timed: list[tuple[int, list[tuple[int, int, int]]]], gap: int,
                   lateness: int) -> tuple[dict[int, list[Any]], dict[int, list[Any]]]:
    """Sessions by hand, time by time as the record path applies them: a row whose own ``[t, t + gap)`` ends at or
    before ``d - lateness`` is late; the others merge, per key, with every session still open at ``d`` (ending
    after ``d - lateness``) that they overlap, transitively."""
    sessions: dict[int, list[list[Any]]] = {}         # key -> [start, end, xs]
    late: dict[int, list[Any]] = {}
    for d, rows in sorted(timed, key=lambda item: item[0]):
        horizon = d - lateness
        for k, ts, x in rows:
            if ts + gap <= horizon:
                late.setdefault(d, []).append((k, ts, x))
                continue
            sessions.setdefault(k, []).append([ts, ts + gap, [x], True])
        for k, spans in sessions.items():
            sessions[k] = _merged(spans, horizon)
    results: dict[int, list[Any]] = {}
    for k, spans in sessions.items():
        for s, e, xs, _ in spans:
            results.setdefault(e + lateness, []).append((k, s, e, len(xs), sum(xs), max(xs)))
    return {t: sorted(rs) for t, rs in results.items()}, {t: sorted(rs) for t, rs in late.items()}


def _merged(spans: list[list[Any]], horizon: int) -> list[list[Any]]:
    """Open sessions (ending after ``horizon``) merged where they overlap; complete ones left as they are."""
    done = [s for s in spans if s[1] <= horizon and not s[3]]
    open_ = sorted((s for s in spans if s[1] > horizon or s[3]), key=lambda s: s[0])
    out: list[list[Any]] = []
    for s in open_:
        s[3] = False
        if out and s[0] < out[-1][1]:
            out[-1][1] = max(out[-1][1], s[1])
            out[-1][2] = out[-1][2] + s[2]
        else:
            out.append(s)
    return done + out
