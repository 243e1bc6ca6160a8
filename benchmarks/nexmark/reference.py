"""The NEXMark queries in plain Python: what the dataflows must give, and the benchmark's baseline.

Each query reads the generator's batches in order (``[(time, {"persons": [...], "auctions": [...], "bids":
[...]})]``) as a stream processor with no framework would: one loop, dicts, and state closed as event time
passes (at each batch, time has reached the batch's time: no event of it or after it is earlier). It returns
the result rows (see :data:`RESULTS` for their columns); the order means nothing (tests compare sorted rows).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Callable, Iterable

from .generator import (A_CATEGORY, A_EXPIRES, A_ID, A_RESERVE, A_SELLER, A_TIME, B_AUCTION, B_PRICE, B_TIME, P_CITY,
                        P_ID, P_NAME, P_STATE, P_TIME)
from .params import Params, sliding_starts

Batches = list[tuple[int, dict[str, list[Any]]]]

RESULTS = {
    0: ("the events themselves: persons, auctions, bids",),
    1: ("auction", "bidder", "price", "date_time"),
    2: ("auction", "price"),
    3: ("name", "city", "state", "auction"),
    4: ("category", "window_start", "window_end", "n", "total", "mean"),
    5: ("window_start", "window_end", "auction", "count"),
    6: ("seller", "auction", "expires", "n", "total", "mean"),
    7: ("window_start", "window_end", "auction", "bidder", "price", "date_time"),
    8: ("window_start", "window_end", "id", "name", "reserve"),
}
"""Each query's result columns."""

Q3_STATES = frozenset(("OR", "ID", "CA"))
Q3_CATEGORY = 10
Q2_SKIP = 123


def q0(batches: Batches, params: Params) -> list[Any]:
    out: list[Any] = []
    for _time, batch in batches:
        out.extend(batch["persons"])
        out.extend(batch["auctions"])
        out.extend(batch["bids"])
    return out


def q1(batches: Batches, params: Params) -> list[Any]:
    out: list[Any] = []
    for _time, batch in batches:
        out.extend([(b[0], b[1], b[2] * 89 // 100, b[5]) for b in batch["bids"]])
    return out


def q2(batches: Batches, params: Params) -> list[Any]:
    out: list[Any] = []
    for _time, batch in batches:
        out.extend([(b[0], b[2]) for b in batch["bids"] if b[0] % Q2_SKIP == 0])
    return out


def q3(batches: Batches, params: Params) -> list[Any]:
    persons: dict[int, Any] = {}
    waiting: dict[int, list[int]] = {}       # seller -> auctions whose seller has not come (yet)
    out: list[Any] = []
    for _time, batch in batches:
        for p in batch["persons"]:
            if p[P_STATE] in Q3_STATES:
                persons[p[P_ID]] = p
                for auction in waiting.pop(p[P_ID], ()):
                    out.append((p[P_NAME], p[P_CITY], p[P_STATE], auction))
        for a in batch["auctions"]:
            if a[A_CATEGORY] == Q3_CATEGORY:
                p = persons.get(a[A_SELLER])
                if p is None:
                    waiting.setdefault(a[A_SELLER], []).append(a[A_ID])
                else:
                    out.append((p[P_NAME], p[P_CITY], p[P_STATE], a[A_ID]))
    return out


def winning_bids(batches: Batches, closed: Callable[[tuple[int, int, int, int, int]], None],
                 at_time: Callable[[int], None]) -> None:
    """Beam's WinningBids: a bid counts for its auction if ``auction.date_time <= bid.date_time <
    auction.expires`` and ``price >= reserve``; an auction closes once time reaches its ``expires``, and its
    winning bid (the highest price) is ``closed((auction, category, seller, price, expires))``, auctions closed in
    order of ``(expires, id)``; an auction with no such bid gives nothing. ``at_time(t)`` once time reaches ``t``,
    after what closes by then."""
    open_: dict[int, list[Any]] = {}
    expiring: list[tuple[int, int]] = []

    def close(reached: float) -> None:
        while expiring and expiring[0][0] <= reached:
            _e, aid = heapq.heappop(expiring)
            a, best = open_.pop(aid)
            if best is not None:
                closed((aid, a[A_CATEGORY], a[A_SELLER], best, a[A_EXPIRES]))

    get = open_.get
    for time, batch in batches:
        close(time)
        at_time(time)
        for a in batch["auctions"]:
            open_[a[A_ID]] = [a, None]
            heapq.heappush(expiring, (a[A_EXPIRES], a[A_ID]))
        for b in batch["bids"]:
            entry = get(b[B_AUCTION])
            if entry is not None:
                a = entry[0]
                price = b[B_PRICE]
                if a[A_TIME] <= b[B_TIME] < a[A_EXPIRES] and price >= a[A_RESERVE] and (
                        entry[1] is None or price > entry[1]):
                    entry[1] = price
    close(float("inf"))
    at_time(float("inf"))   # type: ignore[arg-type]


def q4(batches: Batches, params: Params) -> list[Any]:
    size, step = params.size, params.period
    windows: dict[tuple[int, int], list[int]] = {}      # (start, category) -> [n, total]
    ends: list[int] = []                                 # a heap of the open window starts
    out: list[Any] = []

    def closed(w: tuple[int, int, int, int, int]) -> None:
        category, price, t = w[1], w[3], w[4]
        for start in sliding_starts(t, size, step):
            acc = windows.get((start, category))
            if acc is None:
                windows[(start, category)] = [1, price]
                heapq.heappush(ends, start)
            else:
                acc[0] += 1
                acc[1] += price

    def at_time(time: int) -> None:
        due = set()
        while ends and ends[0] + size <= time:
            due.add(heapq.heappop(ends))
        if due:
            for key in [k for k in windows if k[0] in due]:
                n, total = windows.pop(key)
                out.append((key[1], key[0], key[0] + size, n, total, total / n))

    winning_bids(batches, closed, at_time)
    return out


def q5(batches: Batches, params: Params) -> list[Any]:
    size, step = params.size, params.period
    windows: dict[int, dict[int, int]] = {}
    out: list[Any] = []
    for time, batch in batches:
        for start in sorted(s for s in windows if s + size <= time):
            _hottest(out, start, size, windows.pop(start))
        for b in batch["bids"]:
            auction, t = b[0], b[5]
            low = t - size + 1
            for start in range(low + (-low) % step, t + 1, step):
                counts = windows.get(start)
                if counts is None:
                    counts = windows[start] = {}
                counts[auction] = counts.get(auction, 0) + 1
    for start in sorted(windows):
        _hottest(out, start, size, windows[start])
    return out


def _hottest(out: list[Any], start: int, size: int, counts: dict[int, int]) -> None:
    most = max(counts.values())
    out.extend((start, start + size, auction, n) for auction, n in counts.items() if n == most)


def q6(batches: Batches, params: Params) -> list[Any]:
    last: dict[int, deque[int]] = {}
    out: list[Any] = []

    def closed(w: tuple[int, int, int, int, int]) -> None:
        seller = w[2]
        prices = last.get(seller)
        if prices is None:
            prices = last[seller] = deque(maxlen=10)
        prices.append(w[3])
        total = sum(prices)
        out.append((seller, w[0], w[4], len(prices), total, total / len(prices)))

    winning_bids(batches, closed, lambda time: None)
    return out


def q7(batches: Batches, params: Params) -> list[Any]:
    size = params.size
    best: dict[int, list[Any]] = {}        # window start -> [price, bids at that price]
    out: list[Any] = []

    def emit(start: int, bids: Iterable[Any]) -> None:
        out.extend((start, start + size, b[0], b[1], b[2], b[5]) for b in bids)

    for time, batch in batches:
        for start in sorted(s for s in best if s + size <= time):
            emit(start, best.pop(start)[1])
        for b in batch["bids"]:
            t, price = b[B_TIME], b[B_PRICE]
            start = t - t % size
            top = best.get(start)
            if top is None:
                best[start] = [price, [b]]
            elif price > top[0]:
                top[0], top[1] = price, [b]
            elif price == top[0]:
                top[1].append(b)
    for start in sorted(best):
        emit(start, best[start][1])
    return out


def q8(batches: Batches, params: Params) -> list[Any]:
    size = params.size
    windows: dict[int, dict[int, tuple[list[str], list[int]]]] = {}
    out: list[Any] = []

    def emit(start: int, people: dict[int, tuple[list[str], list[int]]]) -> None:
        for pid, (names, reserves) in people.items():
            out.extend((start, start + size, pid, name, reserve) for name in names for reserve in reserves)

    def entry(t: int, key: int) -> tuple[list[str], list[int]]:
        people = windows.get(t - t % size)
        if people is None:
            people = windows[t - t % size] = {}
        found = people.get(key)
        if found is None:
            found = people[key] = ([], [])
        return found

    for time, batch in batches:
        for start in sorted(s for s in windows if s + size <= time):
            emit(start, windows.pop(start))
        for p in batch["persons"]:
            entry(p[P_TIME], p[P_ID])[0].append(p[P_NAME])
        for a in batch["auctions"]:
            entry(a[A_TIME], a[A_SELLER])[1].append(a[A_RESERVE])
    for start in sorted(windows):
        emit(start, windows[start])
    return out


QUERIES: dict[int, Callable[[Batches, Params], list[Any]]] = {0: q0, 1: q1, 2: q2, 3: q3, 4: q4, 5: q5, 6: q6, 7: q7,
                                                              8: q8}
