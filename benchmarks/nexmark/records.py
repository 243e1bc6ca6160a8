"""The NEXMark queries on the record API: streams of tuples and the library's operators.

Each ``qN(sources, params)`` takes the three input streams (:class:`Sources`: persons, auctions and bids, each
record a tuple in the generator's field order, at its batch's dataflow time) and returns the stream of result
rows (:data:`~.reference.RESULTS`). Event time is the ``date_time`` field (ms); the dataflow time of a batch is
its first event's time, so nothing is ever late and every window uses ``lateness=0``.
"""

from __future__ import annotations

import heapq
from collections import deque
from operator import itemgetter
from typing import Any, Callable

import aiotimely as at
from aiotimely.dataflow.builder import OperatorBuilder

from .generator import (A_CATEGORY, A_EXPIRES, A_ID, A_RESERVE, A_SELLER, A_TIME, B_AUCTION, B_PRICE, B_TIME, P_CITY,
                        P_ID, P_NAME, P_STATE, P_TIME, Events)
from .ordered import time_ordered
from .params import Params
from .reference import Q2_SKIP, Q3_CATEGORY, Q3_STATES


def record_source(scope: Any, batches: list[tuple[int, list[Any]]], name: str) -> at.Stream[Any]:
    """A stream of ``batches`` (``(time, records)``, times not decreasing), sent while there is room downstream."""
    builder = OperatorBuilder(scope, name)
    port, stream = builder.new_output()
    op = builder.op

    def constructor(capabilities: list[Any]) -> Callable[[], None]:
        cap = capabilities[0]
        pending = iter(batches)

        def run() -> None:
            if cap.dropped:
                return
            for time, records in pending:
                if time != cap.time:
                    cap.downgrade(time)
                if records:
                    port.push(time, records)
                if op.wait_for_room():
                    return
            cap.drop()

        return run

    builder.build(constructor)
    result: at.Stream[Any] = stream
    return result


class Sources:
    """The input streams a query asks for, each made once, from this worker's share of the batches."""

    def __init__(self, scope: Any, events: Events) -> None:
        self.scope = scope
        self._batches = events.record_batches(scope.worker.index, scope.worker.peers)
        self._made: dict[str, at.Stream[Any]] = {}

    def _get(self, kind: str) -> at.Stream[Any]:
        stream = self._made.get(kind)
        if stream is None:
            stream = self._made[kind] = record_source(self.scope, [(t, b[kind]) for t, b in self._batches],
                                                      kind.title())
        return stream

    @property
    def persons(self) -> at.Stream[Any]:
        return self._get("persons")

    @property
    def auctions(self) -> at.Stream[Any]:
        return self._get("auctions")

    @property
    def bids(self) -> at.Stream[Any]:
        return self._get("bids")


def q0(src: Sources, params: Params) -> at.Stream[Any]:
    """Passthrough: every event."""
    return at.concatenate(src.scope, [src.persons, src.auctions, src.bids])


def q1(src: Sources, params: Params) -> at.Stream[Any]:
    """Currency conversion: each bid's price in euros (``price * 89 // 100``)."""
    return src.bids.map(lambda b: (b[0], b[1], b[2] * 89 // 100, b[5]), name="Euros")


def q2(src: Sources, params: Params) -> at.Stream[Any]:
    """Selection: the bids on auctions whose id is a multiple of 123 (Beam's ``auctionSkip``)."""
    return src.bids.filter(lambda b: b[0] % Q2_SKIP == 0).map(lambda b: (b[0], b[2]))


def _q3_join(key: int, value: tuple[bool, Any], state: list[Any] | None) -> tuple[list[Any], list[Any]]:
    """Per seller: remember the person, or the auctions that came before it; emit each pair once."""
    if state is None:
        state = [None, []]
    is_person, v = value
    if is_person:
        state[0] = v
        out = [(*v, auction) for auction in state[1]]
        state[1] = []
        return state, out
    if state[0] is not None:
        return state, [(*state[0], v)]
    state[1].append(v)
    return state, []


def q3(src: Sources, params: Params) -> at.Stream[Any]:
    """Local item suggestion: sellers in OR, ID or CA with their auctions in category 10, whichever comes first
    (an unbounded join, kept per seller by ``state_machine``)."""
    people = src.persons.filter(lambda p: p[P_STATE] in Q3_STATES).map(
        lambda p: (p[P_ID], (True, (p[P_NAME], p[P_CITY], p[P_STATE]))))
    sold = src.auctions.filter(lambda a: a[A_CATEGORY] == Q3_CATEGORY).map(lambda a: (a[A_SELLER], (False, a[A_ID])))
    return people.concat(sold).state_machine(_q3_join)


class WinningBids:
    """Beam's WinningBids on records (see :func:`.reference.winning_bids`), for :func:`.ordered.time_ordered`:
    per auction, the highest valid bid; an auction closes once the input frontier reaches its ``expires``.
    Output: ``(auction, category, seller, price, expires)``, sent at the least ``expires`` of what closes."""

    def __init__(self) -> None:
        self.open: dict[int, list[Any]] = {}
        self.expiring: list[tuple[int, int]] = []

    def apply(self, time: int, inputs: list[list[Any]]) -> list[tuple[int, Any]]:
        auctions, bids = inputs
        open_, expiring = self.open, self.expiring
        for batch in auctions:
            for a in batch:
                open_[a[A_ID]] = [a, None]
                heapq.heappush(expiring, (a[A_EXPIRES], a[A_ID]))
        get = open_.get
        for batch in bids:
            for b in batch:
                entry = get(b[B_AUCTION])
                if entry is not None:
                    a = entry[0]
                    price = b[B_PRICE]
                    if a[A_TIME] <= b[B_TIME] < a[A_EXPIRES] and price >= a[A_RESERVE] and (
                            entry[1] is None or price > entry[1]):
                        entry[1] = price
        return []

    def close(self, reached: int | None) -> list[tuple[int, Any]]:
        expiring, open_ = self.expiring, self.open
        if not expiring or (reached is not None and expiring[0][0] > reached):
            return []
        first = expiring[0][0]
        out = []
        while expiring and (reached is None or expiring[0][0] <= reached):
            expires, aid = heapq.heappop(expiring)
            a, best = open_.pop(aid)
            if best is not None:
                out.append((aid, a[A_CATEGORY], a[A_SELLER], best, expires))
        return [(first, out)] if out else []

    def hold(self) -> int | None:
        return self.expiring[0][0] if self.expiring else None


def winning_bids(src: Sources) -> at.Stream[Any]:
    """The winning bids, by auction (auctions and bids routed by auction id)."""
    return time_ordered([src.auctions, src.bids], WinningBids(), exchange=[itemgetter(A_ID), itemgetter(B_AUCTION)],
                        name="WinningBids")


def q4(src: Sources, params: Params) -> at.Stream[Any]:
    """Average price per category: winning bids (at their auction's ``expires``), then per category and sliding
    window, the count, sum and mean of the winning prices."""
    return (winning_bids(src)
            .window(at.Sliding(params.size, params.period), (at.Agg.count(), at.Agg.sum(itemgetter(3))),
                    key=itemgetter(1), time=itemgetter(4), name="AveragePerCategory")
            .map(lambda r: (r[0], r[1][0], r[1][1], r[2][0], r[2][1], r[2][1] / r[2][0])))


def _hottest(acc: list[Any], value: tuple[int, int]) -> list[Any]:
    auction, n = value
    if n > acc[0]:
        acc[0], acc[1] = n, [auction]
    elif n == acc[0]:
        acc[1].append(auction)
    return acc


def q5(src: Sources, params: Params) -> at.Stream[Any]:
    """Hot items: per sliding window, the auction(s) with the most bids (a count per auction and window, then
    the most per window: a fold per window at the time its counts come out)."""
    return (src.bids
            .window(at.Sliding(params.size, params.period), at.Agg.count(), key=itemgetter(0), time=itemgetter(5),
                    name="BidsPerAuction")
            .map(lambda r: (r[1], (r[0], r[2])))
            .fold(lambda: [0, []], _hottest)
            .flat_map(lambda kv: [(kv[0][0], kv[0][1], auction, kv[1][0]) for auction in kv[1][1]]))


def _last_ten(seller: int, closes: list[tuple[int, int, int]], prices: deque[int] | None) -> tuple[Any, list[Any]]:
    if prices is None:
        prices = deque(maxlen=10)
    out = []
    for expires, auction, price in sorted(closes):
        prices.append(price)
        total = sum(prices)
        out.append((seller, auction, expires, len(prices), total, total / len(prices)))
    return prices, out


def _append(acc: list[Any], value: Any) -> list[Any]:
    acc.append(value)
    return acc


def q6(src: Sources, params: Params) -> at.Stream[Any]:
    """Average selling price by seller: per seller, at each closed auction (in order of ``expires``, then id),
    the mean of its last 10 winning prices. Winning bids are moved to their ``expires`` (``timed`` +
    ``settle``), gathered per seller and time (``fold``), and applied in time order (``state_machine``)."""
    return (winning_bids(src)
            .timed(itemgetter(4)).settle()
            .map(lambda w: (w[2], (w[4], w[0], w[3])))
            .fold(list, _append)
            .state_machine(_last_ten))


def _top_add(acc: Any, records: list[Any]) -> Any:
    most = max([r[B_PRICE] for r in records])
    return _top_merge(acc, (most, [r for r in records if r[B_PRICE] == most]))


def _top_merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None or a[0] > b[0]:
        return a
    if b[0] > a[0]:
        return b
    return (a[0], a[1] + b[1])


HIGHEST = at.Aggregation("highest", lambda: None, _top_add, _top_merge)
"""The bids at the highest price (ties kept): ``(price, [bids])``."""


def q7(src: Sources, params: Params) -> at.Stream[Any]:
    """Highest bid: per tumbling window, the bid(s) at the highest price (one window operator, unkeyed, each
    worker combining its bids before they go to the one that owns the windows)."""
    size = params.size
    return (src.bids
            .window(at.Tumbling(size), HIGHEST, time=itemgetter(B_TIME), combine=True, name="Highest")
            .flat_map(lambda r: [(r[0][0], r[0][1], b[0], b[1], b[2], b[5]) for b in r[1][1]]))


def _pairs(r: tuple[int, tuple[int, int], list[Any]]) -> list[Any]:
    pid, (start, end), rows = r
    names = [row[2] for row in rows if row[1]]
    reserves = [row[2] for row in rows if not row[1]]
    return [(start, end, pid, name, reserve) for name in names for reserve in reserves]


def q8(src: Sources, params: Params) -> at.Stream[Any]:
    """Monitor new users: people and the auctions they opened in the same tumbling window (a window per person
    id, over people and auctions keyed by seller, collecting both; Beam's CoGroupByKey)."""
    people = src.persons.map(lambda p: (p[P_ID], True, p[P_NAME], p[P_TIME]))
    sold = src.auctions.map(lambda a: (a[A_SELLER], False, a[A_RESERVE], a[A_TIME]))
    return (people.concat(sold)
            .window(at.Tumbling(params.size), at.Agg.collect(), key=itemgetter(0), time=itemgetter(3),
                    name="NewUsers")
            .flat_map(_pairs))


QUERIES: dict[int, Callable[[Sources, Params], at.Stream[Any]]] = {0: q0, 1: q1, 2: q2, 3: q3, 4: q4, 5: q5, 6: q6,
                                                                   7: q7, 8: q8}
